package childcluster

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
)

// TestTrimmedObjectsGiveTheSameArithmetic: every reader of the cache (the inventory's offerings, the
// workspace gate, the resource fit, the gate's hostname and selector reads) gets the same answer from
// the trimmed Nodes and Pods the cache keeps as from the full objects the API server sends. The full
// objects carry everything a real child has that the cache drops (taints, capacity, images,
// annotations, heartbeats, other conditions, container details), and vary in what it keeps (Ready
// status, cordon, models, vendors, allocatable, pods' phases, nodes and requests).
func TestTrimmedObjectsGiveTheSameArithmetic(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 42))
		nodes, pods := randomChild(rng)
		trimmedNodes := make([]corev1.Node, 0, len(nodes))
		for i := range nodes {
			out, err := trimNode(nodes[i].DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			trimmedNodes = append(trimmedNodes, *out.(*corev1.Node))
		}
		trimmedPods := make([]corev1.Pod, 0, len(pods))
		for i := range pods {
			out, err := trimPod(pods[i].DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			trimmedPods = append(trimmedPods, out.(*pod).asPod())
		}
		same := func(what string, full, trimmed any) {
			t.Helper()
			if !reflect.DeepEqual(full, trimmed) {
				t.Fatalf("seed %d: %s differs:\nfull:    %+v\ntrimmed: %+v", seed, what, full, trimmed)
			}
		}
		same("offerings", gpu.Offerings(nodes, pods), gpu.Offerings(trimmedNodes, trimmedPods))
		for i := range nodes {
			n, tn := &nodes[i], &trimmedNodes[i]
			same("name", n.Name, tn.Name)
			same("labels", n.Labels, tn.Labels)
			same("ready", gpu.IsReady(n), gpu.IsReady(tn))
			same("schedulable", gpu.IsSchedulable(n), gpu.IsSchedulable(tn))
		}
		for _, vendor := range []workspacesv1.GPUVendor{workspacesv1.GPUVendorNVIDIA, workspacesv1.GPUVendorAMD} {
			for _, model := range []string{"", "H100", "MI300X"} {
				req := gpu.Request{Key: "ns/ws", Vendor: vendor, GPUType: model, GPUsPerReplica: 1 + rng.Int64N(8), Replicas: 1 + rng.Int32N(4)}
				if rng.IntN(2) == 0 {
					req.NodeSelector = map[string]string{"zone": "a"}
				}
				res := []gpu.Reservation{{Key: "ns/other", Vendor: vendor, Selector: gpu.Selector(req), GPUsPerReplica: 1, Replicas: 1}}
				same(fmt.Sprintf("gate %+v", req), gpu.Gate(req, nodes, pods, res), gpu.Gate(req, trimmedNodes, trimmedPods, res))
				per := corev1.ResourceList{"cpu": resource.MustParse(fmt.Sprintf("%dm", 100+rng.IntN(4000))),
					"memory": resource.MustParse(fmt.Sprintf("%dMi", 128+rng.IntN(8192)))}
				same("fit", gpu.FitResources(gpu.Selector(req), per, req.Replicas, nodes, pods),
					gpu.FitResources(gpu.Selector(req), per, req.Replicas, trimmedNodes, trimmedPods))
			}
		}
	}
}

// randomChild returns the Nodes and Pods of a child as the API server sends them.
func randomChild(rng *rand.Rand) ([]corev1.Node, []corev1.Pod) {
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	now := metav1.Now()
	var nodes []corev1.Node
	for i := range 1 + rng.IntN(8) {
		name := fmt.Sprintf("node-%d", i)
		labels := map[string]string{corev1.LabelHostname: name, "zone": pick("a", "b")}
		res := corev1.ResourceName(pick(string(gpu.ResourceNVIDIA), string(gpu.ResourceAMD)))
		switch rng.IntN(3) {
		case 0:
			labels[gpu.LabelGPUModel] = pick("H100", "MI300X")
		case 1:
			labels[gpu.LabelNVIDIAProduct] = "NVIDIA-H100-80GB-HBM3"
			labels[gpu.LabelAMDProductName] = "MI300X"
		}
		gpus := fmt.Sprint(rng.IntN(9))
		alloc := corev1.ResourceList{res: q(gpus), "cpu": q(fmt.Sprint(8 + rng.IntN(64))), "memory": q(fmt.Sprintf("%dGi", 16+rng.IntN(512))), "pods": q("110")}
		capacity := alloc.DeepCopy()
		capacity[res] = q("8")
		var conds []corev1.NodeCondition
		for _, typ := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeReady, corev1.NodeDiskPressure} {
			if typ == corev1.NodeReady && rng.IntN(6) == 0 {
				continue // no Ready condition yet
			}
			st := corev1.ConditionFalse
			if typ == corev1.NodeReady {
				st = corev1.ConditionStatus(pick("True", "True", "True", "False", "Unknown"))
			}
			conds = append(conds, corev1.NodeCondition{Type: typ, Status: st, Reason: "KubeletReady", Message: "kubelet is posting ready status",
				LastHeartbeatTime: now, LastTransitionTime: now})
		}
		nodes = append(nodes, corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: fmt.Sprint(rng.IntN(1000)), Labels: labels,
				Annotations:   map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}},
			Spec: corev1.NodeSpec{Unschedulable: rng.IntN(5) == 0, PodCIDR: "10.0.0.0/24", ProviderID: "kind://" + name,
				Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Allocatable: alloc, Capacity: capacity, Conditions: conds,
				Images:    []corev1.ContainerImage{{Names: []string{"registry/cuda:12"}, SizeBytes: 1 << 30}},
				NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}},
		})
	}
	var pods []corev1.Pod
	for i := range rng.IntN(20) {
		gpuRes := corev1.ResourceName(pick(string(gpu.ResourceNVIDIA), string(gpu.ResourceAMD)))
		containers := []corev1.Container{{Name: "main", Image: "registry/train:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": q(fmt.Sprintf("%dm", rng.IntN(4000))), "memory": q(fmt.Sprintf("%dMi", rng.IntN(4096)))},
				Limits:   corev1.ResourceList{gpuRes: q(fmt.Sprint(rng.IntN(5)))}}}}
		var inits []corev1.Container
		if rng.IntN(3) == 0 {
			always := corev1.ContainerRestartPolicyAlways
			inits = append(inits, corev1.Container{Name: "side", RestartPolicy: &always,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("100m"), gpuRes: q("1")}}})
		}
		if rng.IntN(3) == 0 {
			inits = append(inits, corev1.Container{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpuRes: q("8"), "cpu": q("2")}}})
		}
		spec := corev1.PodSpec{Containers: containers, InitContainers: inits, NodeSelector: map[string]string{"zone": "a"}}
		if rng.IntN(4) == 0 {
			spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("3"), "memory": q("4Gi")}}
		}
		if len(nodes) > 0 && rng.IntN(5) != 0 {
			spec.NodeName = nodes[rng.IntN(len(nodes))].Name
		}
		pods = append(pods, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: pick("ns", "other"), Labels: map[string]string{"app": "x"}},
			Spec:       spec,
			Status: corev1.PodStatus{Phase: corev1.PodPhase(pick("Pending", "Running", "Running", "Succeeded", "Failed")),
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		})
	}
	return nodes, pods
}
