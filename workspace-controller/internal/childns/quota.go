package childns

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/text"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/component"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// DesiredQuota caps the GPU requests in namespace at what the gate admitted: the admitted number of
// the admitted vendor's GPUs, and none of the other vendors' nor of any other device resource the
// child's nodes advertise (devices: MIG profiles, renamed or shared GPU resources). Extended
// resources cannot be overcommitted (a GPU limit is also the request), so capping the requests caps
// the limits too. Unless claims is set, no DRA ResourceClaim may be made in the namespace, so that no
// device reaches a pod past the gate.
func DesiredQuota(namespace string, ad *workspacesv1.Admission, devices []corev1.ResourceName, claims bool, compute corev1.ResourceList) *corev1.ResourceQuota {
	hard := compute.DeepCopy()
	if hard == nil {
		hard = corev1.ResourceList{}
	}
	for _, res := range append([]corev1.ResourceName{gpu.ResourceNVIDIA, gpu.ResourceAMD}, devices...) {
		hard[corev1.ResourceName("requests."+string(res))] = *resource.NewQuantity(0, resource.DecimalSI)
	}
	if !claims {
		hard[ResourceClaimsCount] = *resource.NewQuantity(0, resource.DecimalSI)
	}
	if ad != nil && ad.GPUResourceName != "" {
		hard[corev1.ResourceName("requests."+ad.GPUResourceName)] = *resource.NewQuantity(ad.GPUs, resource.DecimalSI)
	}
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: owned.GPUQuotaName, Labels: map[string]string{owned.LabelManagedBy: component.Name}},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}
}

// ComputeCap is the CPU, memory and pod cap of a class's ComputeQuota for the resolved resources: each
// replica's CPU and memory requests and one pod, times the replicas plus the class's headroom; nil
// when the class sets no ComputeQuota. A resource the workspace does not set is not capped.
func ComputeCap(class *workspacesv1.WorkspaceClass, res *workspacesv1.ResolvedResources) corev1.ResourceList {
	if class == nil || class.Spec.ComputeQuota == nil || res == nil {
		return nil
	}
	n := int64(res.Replicas) + int64(class.Spec.ComputeQuota.HeadroomReplicas)
	out := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(n, resource.DecimalSI)}
	times := func(q *resource.Quantity) resource.Quantity {
		total := resource.Quantity{Format: q.Format}
		for range n {
			total.Add(*q)
		}
		return total
	}
	if q := res.PerReplica.CPU; q != nil {
		out[corev1.ResourceRequestsCPU] = times(q)
	}
	if q := res.PerReplica.Memory; q != nil {
		out[corev1.ResourceRequestsMemory] = times(q)
	}
	return out
}

// ResourceClaimsCount is the object-count quota of DRA ResourceClaims.
const ResourceClaimsCount corev1.ResourceName = "count/resourceclaims.resource.k8s.io"

// deviceDomains are the resource-name domains of the GPU vendors' device plugins.
var deviceDomains = []string{"nvidia.com/", "amd.com/"}

// DeviceResources lists, sorted, the device resources of the GPU vendors that nodes advertise in
// their allocatable: nvidia.com/gpu and amd.com/gpu, and MIG profiles (nvidia.com/mig-1g.10gb),
// shared or renamed resources (nvidia.com/gpu.shared) the vendors' operators configure.
func DeviceResources(nodes []corev1.Node) []corev1.ResourceName {
	seen := map[corev1.ResourceName]bool{}
	for i := range nodes {
		for name := range nodes[i].Status.Allocatable {
			for _, d := range deviceDomains {
				if strings.HasPrefix(string(name), d) {
					seen[name] = true
				}
			}
		}
	}
	out := make([]corev1.ResourceName, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// QuotaString lists a quota's hard limits, sorted: "requests.amd.com/gpu=0, requests.nvidia.com/gpu=1".
func QuotaString(q *corev1.ResourceQuota) string {
	parts := make([]string, 0, len(q.Spec.Hard))
	for k, v := range q.Spec.Hard {
		parts = append(parts, fmt.Sprintf("%s=%s", k, v.String()))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// ensureQuota creates or corrects the quota and reports whether it corrected one (patched its limits,
// or replaced one with scopes, which cannot be patched); fresh says the namespace was just made (so
// the quota cannot exist yet and is created without reading it first).
func ensureQuota(ctx context.Context, cl client.Client, want *corev1.ResourceQuota, fresh bool) (patched bool, err error) {
	got := &corev1.ResourceQuota{}
	if fresh {
		err = apierrors.NewNotFound(corev1.Resource("resourcequotas"), want.Name)
	} else {
		err = cl.Get(ctx, client.ObjectKeyFromObject(want), got)
	}
	if apierrors.IsNotFound(err) {
		if err := cl.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !quotaDrifted(got, want) {
		return false, nil
	}
	if len(got.Spec.Scopes) > 0 || got.Spec.ScopeSelector != nil {
		// A quota's scopes are immutable (the API server refuses to patch them away): the scoped quota
		// is replaced by the controller's.
		if err := cl.Delete(ctx, got, client.Preconditions{UID: &got.UID, ResourceVersion: &got.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		if err := cl.Create(ctx, want); err != nil {
			return false, err
		}
		return true, nil
	}
	patchBase := got.DeepCopy()
	got.Spec = want.Spec
	return true, cl.Patch(ctx, got, client.MergeFrom(patchBase))
}

// quotaDrifted reports whether got differs from want in what the controller sets: the hard limits,
// and no scopes (a scope would let pods outside it past the cap).
func quotaDrifted(got, want *corev1.ResourceQuota) bool {
	return !equality.Semantic.DeepEqual(got.Spec.Hard, want.Spec.Hard) || len(got.Spec.Scopes) > 0 || got.Spec.ScopeSelector != nil
}

// quotaMessage is what the workspace repeats of a refusal of the GPU quota.
func quotaMessage(e *eventsv1.Event) string {
	return fmt.Sprintf("the child refused pods of the release: %s %s: %s (the GPUs are capped at what the gate admitted; ask for more through spec.resources, not chart values)",
		e.Regarding.Kind, e.Regarding.Name, text.Truncate(strings.TrimSpace(e.Note), MaxChildMessageBytes))
}

// latestQuotaRefusal is the latest of events that says the GPU quota was exceeded, or nil.
func latestQuotaRefusal(events []eventsv1.Event) *eventsv1.Event {
	var latest *eventsv1.Event
	for i := range events {
		e := &events[i]
		if !strings.Contains(e.Note, "exceeded quota") || !strings.Contains(e.Note, owned.GPUQuotaName) {
			continue
		}
		if latest == nil || conditions.EventTime(latest).Time.Before(conditions.EventTime(e).Time) {
			latest = e
		}
	}
	return latest
}
