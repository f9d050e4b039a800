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
// the admitted vendor's GPUs, and none of the other vendors'. Extended resources cannot be
// overcommitted (a GPU limit is also the request), so capping the requests caps the limits too.
func DesiredQuota(namespace string, ad *workspacesv1.Admission) *corev1.ResourceQuota {
	hard := corev1.ResourceList{}
	for _, res := range []corev1.ResourceName{gpu.ResourceNVIDIA, gpu.ResourceAMD} {
		hard[corev1.ResourceName("requests."+string(res))] = *resource.NewQuantity(0, resource.DecimalSI)
	}
	if ad != nil && ad.GPUResourceName != "" {
		hard[corev1.ResourceName("requests."+ad.GPUResourceName)] = *resource.NewQuantity(ad.GPUs, resource.DecimalSI)
	}
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: owned.GPUQuotaName, Labels: map[string]string{owned.LabelManagedBy: component.Name}},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}
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
