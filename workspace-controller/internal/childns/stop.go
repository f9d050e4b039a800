package childns

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/component"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// A stopped workspace keeps its release (its volumes, Services and so its URLs) but runs no pod of
// it. Scaling the release to zero through its values is not enough: published charts fix their
// replica count and ignore the value. So the stop is made on the child, in a way a re-sync of the
// release does not undo: a ResourceQuota of its own in ws-<name> (StopQuotaName, pods: 0) refuses
// every pod of the release, whatever its workloads ask, and the release's running pods are deleted.
// The workloads stay as the chart made them, and their controllers keep trying (and are refused)
// while the workspace is stopped. Starting deletes the quota and touches the ReplicaSets and
// StatefulSets, so that their controllers create the pods at once rather than after their back-off.

// Held is what still runs of a stopping workspace's release on the child.
type Held struct {
	// GPUPods are the release's pods that are not finished and request GPUs, by name (sorted);
	// terminating pods are among them until they are gone, since their GPUs are not free before.
	GPUPods []string
	// GPUs is what those pods request in all.
	GPUs int64
	// Pods counts every pod of the release that is not finished.
	Pods int
}

// HoldsGPUs reports whether a pod of the release still holds GPUs.
func (h Held) HoldsGPUs() bool { return len(h.GPUPods) > 0 }

// String names what is held: "2 pods holding 3 GPUs (nb-0, nb-1)", at most five names.
func (h Held) String() string {
	return fmt.Sprintf("%d pod(s) holding %d GPU(s) (%s)", len(h.GPUPods), h.GPUs, namedPods(h.GPUPods))
}

// StopQuota is the ResourceQuota that refuses every pod in a stopped workspace's release namespace.
func StopQuota(namespace string) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: owned.StopQuotaName, Labels: map[string]string{owned.LabelManagedBy: component.Name}},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(0, resource.DecimalSI)}},
	}
}

// Stop stops what runs of ws's release on the child: the stop quota is put in ws-<name> (or
// corrected), then the release's pods that are not being deleted are deleted. It returns what still
// holds GPUs there. A ws-<name> that is absent, being deleted, or not this workspace's (Check) holds
// nothing of this release and is left alone.
func (n Namespaces) Stop(ctx context.Context, ws *workspacesv1.WorkspaceDeployment) (Held, error) {
	name := owned.ReleaseNamespace(ws)
	ns := &corev1.Namespace{}
	if err := n.Child.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return Held{}, nil
		}
		return Held{}, fmt.Errorf("reading namespace %s on the child of %s: %w", name, n.Cluster, err)
	}
	if n.Check(ns, ws).Kind != Usable {
		return Held{}, nil
	}
	if _, err := ensureQuota(ctx, n.Child, StopQuota(name), false); err != nil {
		return Held{}, fmt.Errorf("stop quota in namespace %s on the child of %s: %w", name, n.Cluster, err)
	}
	var pods corev1.PodList
	if err := n.Child.List(ctx, &pods, client.InNamespace(name)); err != nil {
		return Held{}, fmt.Errorf("listing pods in namespace %s on the child of %s: %w", name, n.Cluster, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if gpu.IsTerminal(p) || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if err := n.Child.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return Held{}, fmt.Errorf("deleting pod %s/%s on the child of %s: %w", name, p.Name, n.Cluster, err)
		}
	}
	// What holds GPUs now is every pod that has not finished: the ones just deleted, and those already
	// terminating, keep their GPUs until the kubelet has stopped them. The list read above says it.
	return heldBy(pods.Items), nil
}

// heldBy is what the release's pods that have not finished hold.
func heldBy(pods []corev1.Pod) Held {
	var h Held
	for i := range pods {
		p := &pods[i]
		if gpu.IsTerminal(p) {
			continue
		}
		h.Pods++
		var g int64
		for _, res := range []corev1.ResourceName{gpu.ResourceNVIDIA, gpu.ResourceAMD} {
			g += gpu.PodRequest(p, res)
		}
		if g > 0 {
			h.GPUPods = append(h.GPUPods, p.Name)
			h.GPUs += g
		}
	}
	sort.Strings(h.GPUPods)
	return h
}

// Start undoes Stop in namespace: the stop quota is deleted, and the ReplicaSets and StatefulSets
// there are annotated with the time of the start, so that their controllers create the refused pods
// at once. It is safe to call again (a start interrupted between the two is finished by the next
// pass).
func (n Namespaces) Start(ctx context.Context, namespace string, now time.Time) error {
	q := StopQuota(namespace)
	if err := n.Child.Delete(ctx, q); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the stop quota in namespace %s on the child of %s: %w", namespace, n.Cluster, err)
	}
	stamp := now.UTC().Format(time.RFC3339)
	var rs appsv1.ReplicaSetList
	if err := n.Child.List(ctx, &rs, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("listing ReplicaSets in namespace %s on the child of %s: %w", namespace, n.Cluster, err)
	}
	var sts appsv1.StatefulSetList
	if err := n.Child.List(ctx, &sts, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("listing StatefulSets in namespace %s on the child of %s: %w", namespace, n.Cluster, err)
	}
	var objs []client.Object
	for i := range rs.Items {
		if rs.Items[i].Spec.Replicas != nil && *rs.Items[i].Spec.Replicas > 0 {
			objs = append(objs, &rs.Items[i])
		}
	}
	for i := range sts.Items {
		objs = append(objs, &sts.Items[i])
	}
	for _, o := range objs {
		if o.GetAnnotations()[owned.AnnotationStartedAt] == stamp {
			continue
		}
		patch := client.RawPatch("application/merge-patch+json",
			fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, owned.AnnotationStartedAt, stamp))
		if err := n.Child.Patch(ctx, o, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("waking %s/%s on the child of %s: %w", namespace, o.GetName(), n.Cluster, err)
		}
	}
	return nil
}
