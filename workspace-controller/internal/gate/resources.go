package gate

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
)

// GPUs returns the GPUs per replica of resolved resources.
func GPUs(r *workspacesv1.ResolvedResources) int64 {
	if r == nil || r.PerReplica.GPUCount == nil {
		return 0
	}
	return int64(*r.PerReplica.GPUCount)
}

// gpuRequest turns resolved resources into the gate's request.
func gpuRequest(key string, r *workspacesv1.ResolvedResources) gpu.Request {
	return gpu.Request{
		Key:            key,
		Vendor:         r.PerReplica.GPUVendor,
		GPUType:        r.PerReplica.GPUType,
		NodeSelector:   r.PerReplica.GPUNodeSelector,
		GPUsPerReplica: GPUs(r),
		Replicas:       r.Replicas,
	}
}

// Covers reports whether an admission on the cluster grants exactly what the resources ask of the
// gate: vendor, GPUs per replica, replicas and selector.
func Covers(ad *workspacesv1.Admission, cluster string, r *workspacesv1.ResolvedResources) bool {
	if ad == nil || ad.Cluster != cluster || ad.Replicas != r.Replicas || ad.GPUsPerReplica != GPUs(r) {
		return false
	}
	if GPUs(r) == 0 {
		return true
	}
	sel := gpu.Selector(gpuRequest("", r))
	return ad.GPUVendor == r.PerReplica.GPUVendor && equality.Semantic.DeepEqual(nonEmpty(ad.Selector), nonEmpty(sel))
}

func nonEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func withoutTime(ad *workspacesv1.Admission) *workspacesv1.Admission {
	c := ad.DeepCopy()
	c.AdmittedAt = nil
	return c
}

// newAdmission records a gate decision that admitted the resources.
func newAdmission(cluster string, res *workspacesv1.ResolvedResources, d gpu.Decision, nodes []corev1.Node, now time.Time) *workspacesv1.Admission {
	byName := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	t := metav1.NewTime(now.UTC().Truncate(time.Second))
	ad := &workspacesv1.Admission{Cluster: cluster, Replicas: res.Replicas, AdmittedAt: &t}
	if n := GPUs(res); n > 0 {
		ad.GPUResourceName = res.GPUResourceName
		ad.GPUVendor = res.PerReplica.GPUVendor
		ad.GPUsPerReplica = n
		ad.GPUs = n * int64(res.Replicas)
		ad.Selector = nonEmpty(d.Selector)
		rn := corev1.ResourceName(res.GPUResourceName)
		for _, p := range d.Placement {
			an := workspacesv1.AdmittedNode{Name: p.Node, Replicas: p.Replicas}
			if n := byName[p.Node]; n != nil {
				an.Hostname, an.GPUModel = n.Labels[corev1.LabelHostname], gpu.ModelOf(n, rn)
			}
			ad.Nodes = append(ad.Nodes, an)
		}
		ad.GPUModel = admittedModel(d, ad.Nodes)
	}
	return ad
}

// admittedModel is the GPU model of the nodes a decision placed the replicas on, when they share one:
// the model the request selected, else the admitted nodes' (gpu.ModelOf).
func admittedModel(d gpu.Decision, nodes []workspacesv1.AdmittedNode) string {
	if m := d.Selector[gpu.LabelGPUModel]; m != "" {
		return m
	}
	model := ""
	for i, n := range nodes {
		if i > 0 && n.GPUModel != model {
			return ""
		}
		model = n.GPUModel
	}
	return model
}

// PinSelector is the node selector entry that pins a workspace to its admitted node, or nil: when the
// gate counted every replica on one node with a hostname label, the scheduler must place them there,
// not on GPUs the gate counted for another workspace.
func PinSelector(ad *workspacesv1.Admission) map[string]string {
	if ad == nil || ad.GPUsPerReplica == 0 || len(ad.Nodes) != 1 || ad.Nodes[0].Hostname == "" {
		return nil
	}
	return map[string]string{corev1.LabelHostname: ad.Nodes[0].Hostname}
}

// perReplicaList is the per-replica request the feasibility report checks: cpu, memory and GPUs.
// Storage is a persistent volume, not a node resource, so it is reported but not fitted.
func perReplicaList(r *workspacesv1.ResolvedResources) corev1.ResourceList {
	out := corev1.ResourceList{}
	if r.PerReplica.CPU != nil {
		out[corev1.ResourceCPU] = *r.PerReplica.CPU
	}
	if r.PerReplica.Memory != nil {
		out[corev1.ResourceMemory] = *r.PerReplica.Memory
	}
	if n := GPUs(r); n > 0 && r.GPUResourceName != "" {
		out[corev1.ResourceName(r.GPUResourceName)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return out
}

func feasibilityMessage(d gpu.Decision, fit gpu.Fit, r *workspacesv1.ResolvedResources) string {
	msg := d.Message
	if len(perReplicaList(r)) > 0 {
		msg += "; cpu/memory/GPUs now: " + fit.Message
		if d.Feasible() && !fit.Fits(r.Replicas) {
			msg += " (pods may stay Pending until cpu or memory frees up)"
		}
	}
	if r.PerReplica.Storage != nil {
		msg += fmt.Sprintf("; storage %s per replica is claimed from persistent volumes, not checked against nodes", r.PerReplica.Storage.String())
	}
	return msg
}

// Selector is the node selector the gate matches GPU nodes with for the resources: their
// GPUNodeSelector and, when they name a GPU type, the GPU-model label.
func Selector(r *workspacesv1.ResolvedResources) map[string]string {
	return gpu.Selector(gpuRequest("", r))
}
