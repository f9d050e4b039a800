package workspace

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
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// namespaceOwner says who a release namespace on the child belongs to, from its labels.
type namespaceOwner int

const (
	// ownerNone: the namespace carries no owner labels (made by an earlier version, or by Sveltos).
	ownerNone namespaceOwner = iota
	// ownerSelf: the labels name this workspace (its uid, or its namespace and name: an earlier
	// object of the same workspace, which is gone since names are unique).
	ownerSelf
	// ownerOther: the labels name another workspace.
	ownerOther
)

func ownerOf(ns *corev1.Namespace, ws *workspacesv1.WorkspaceDeployment) (namespaceOwner, string) {
	l := ns.Labels
	name, namespace, uid := l[workspacesv1.WorkspaceLabel], l[workspacesv1.WorkspaceNamespaceLabel], l[workspacesv1.WorkspaceUIDLabel]
	switch {
	case name == "" && namespace == "" && uid == "":
		return ownerNone, ""
	case uid != "" && uid == string(ws.UID):
		return ownerSelf, ""
	case name == ws.Name && namespace == ws.Namespace:
		return ownerSelf, ""
	}
	return ownerOther, fmt.Sprintf("workspace %s/%s (uid %s)", namespace, name, uid)
}

// podSecurityLevel is the level the class asks for, baseline when it asks none.
func (s *scope) podSecurityLevel() string {
	if s.class != nil && s.class.Spec.PodSecurityLevel != "" {
		return string(s.class.Spec.PodSecurityLevel)
	}
	return string(workspacesv1.PodSecurityBaseline)
}

// claimReleaseNamespace checks, before the gate, that ws-<name> on the child is not another
// workspace's. A namespace still being deleted (an earlier workspace of this name) is waited for.
func (r *Reconciler) claimReleaseNamespace(ctx context.Context, s *scope) (stepResult, error) {
	ctx, cancel := r.childContext(ctx)
	defer cancel()
	cl, err := r.Children.Client(ctx, s.cdKey)
	if err != nil {
		return r.childUnreachable(s, err), nil
	}
	ns := &corev1.Namespace{}
	err = cl.Get(ctx, client.ObjectKey{Name: s.releaseNamespace()}, ns)
	if apierrors.IsNotFound(err) {
		s.releaseNSRead = true // ensureReleaseNamespace makes it without reading it again
		return next, nil
	}
	if err != nil {
		return stop, fmt.Errorf("reading namespace %s on the child of %s: %w", s.releaseNamespace(), s.cdKey, err)
	}
	s.releaseNS, s.releaseNSRead = ns, true
	if res, stopped := r.checkReleaseNamespaceOwner(s, ns); stopped {
		return res, nil
	}
	if !ns.DeletionTimestamp.IsZero() {
		s.blocked(workspacesv1.PhasePending, workspacesv1.ReleaseNamespaceReadyCondition, workspacesv1.ReasonReleaseNamespaceTerminating,
			fmt.Sprintf("namespace %s on the child of ClusterDeployment %s is still being deleted; it is made again once it is gone", ns.Name, s.cdKey))
		return stopAfter(r.Options.UnreachableRetry), nil
	}
	return next, nil
}

// desiredReleaseNamespace is ws-<name> as the controller makes it on the child: labelled with its
// owner and the Pod Security level.
func (s *scope) desiredReleaseNamespace() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: s.releaseNamespace(),
		Labels: map[string]string{
			workspacesv1.WorkspaceLabel:          s.ws.Name,
			workspacesv1.WorkspaceNamespaceLabel: s.ws.Namespace,
			workspacesv1.WorkspaceUIDLabel:       string(s.ws.UID),
			owned.LabelManagedBy:                 Component,
			owned.LabelPodSecurityEnforce:        s.podSecurityLevel(),
		},
	}}
}

// desiredQuota caps the namespace's GPU requests at what the gate admitted: the admitted number of
// the admitted vendor's GPUs, and none of the other vendors'. Extended resources cannot be
// overcommitted (a GPU limit is also the request), so capping the requests caps the limits too.
func (s *scope) desiredQuota() *corev1.ResourceQuota {
	hard := corev1.ResourceList{}
	for _, res := range []corev1.ResourceName{gpu.ResourceNVIDIA, gpu.ResourceAMD} {
		hard[corev1.ResourceName("requests."+string(res))] = *resource.NewQuantity(0, resource.DecimalSI)
	}
	if ad := s.ws.Status.Admission; ad != nil && ad.GPUResourceName != "" {
		hard[corev1.ResourceName("requests."+ad.GPUResourceName)] = *resource.NewQuantity(ad.GPUs, resource.DecimalSI)
	}
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.releaseNamespace(), Name: owned.GPUQuotaName, Labels: map[string]string{owned.LabelManagedBy: Component}},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}
}

// ensureReleaseNamespace makes ws-<name> on the child before the release: owned by the workspace,
// with its Pod Security level and a ResourceQuota capping GPUs at the admission. It corrects drift
// in the labels and quota the controller sets, and leaves everything else alone.
func (r *Reconciler) ensureReleaseNamespace(ctx context.Context, s *scope) (stepResult, error) {
	ctx, cancel := r.childContext(ctx)
	defer cancel()
	cl, err := r.Children.Client(ctx, s.cdKey)
	if err != nil {
		return r.childUnreachable(s, err), nil
	}
	want := s.desiredReleaseNamespace()
	got := &corev1.Namespace{}
	// The claim read the namespace a moment ago in this pass: that read is reused.
	switch {
	case s.releaseNSRead && s.releaseNS == nil:
		err = apierrors.NewNotFound(corev1.Resource("namespaces"), want.Name)
	case s.releaseNSRead:
		got = s.releaseNS
	default:
		err = cl.Get(ctx, client.ObjectKeyFromObject(want), got)
	}
	created := false
	switch {
	case apierrors.IsNotFound(err):
		err = cl.Create(ctx, want)
		if err == nil {
			created = true
			s.releaseNSCreated = true
			break
		}
		if !apierrors.IsAlreadyExists(err) {
			return stop, fmt.Errorf("creating namespace %s on the child of %s: %w", want.Name, s.cdKey, err)
		}
		// Made by someone else since it was read: whose it is decides, not the name.
		if err := cl.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
			return stop, fmt.Errorf("reading namespace %s on the child of %s: %w", want.Name, s.cdKey, err)
		}
		if res, stopped, err := r.correctReleaseNamespace(ctx, cl, s, want, got); stopped || err != nil {
			return res, err
		}
	case err != nil:
		return stop, fmt.Errorf("reading namespace %s on the child of %s: %w", want.Name, s.cdKey, err)
	default:
		if res, stopped, err := r.correctReleaseNamespace(ctx, cl, s, want, got); stopped || err != nil {
			return res, err
		}
	}
	if err := ensureQuota(ctx, cl, s.desiredQuota(), created); err != nil {
		return stop, fmt.Errorf("GPU quota in namespace %s on the child of %s: %w", want.Name, s.cdKey, err)
	}
	s.setTrue(workspacesv1.ReleaseNamespaceReadyCondition, workspacesv1.ReasonReleaseNamespaceReady,
		fmt.Sprintf("namespace %s on the child is owned by the workspace, enforces Pod Security %q and caps GPU requests at %s",
			want.Name, s.podSecurityLevel(), quotaString(s.desiredQuota())))
	return next, nil
}

// correctReleaseNamespace takes an existing ws-<name> in hand: it stops the pass when the namespace is
// not this workspace's to use or is being deleted, and otherwise corrects drift in the labels the
// controller sets (leaving everything else alone).
func (r *Reconciler) correctReleaseNamespace(ctx context.Context, cl client.Client, s *scope, want, got *corev1.Namespace) (stepResult, bool, error) {
	if res, stopped := r.checkReleaseNamespaceOwner(s, got); stopped {
		return res, true, nil
	}
	if !got.DeletionTimestamp.IsZero() {
		s.blocked(workspacesv1.PhaseDeploying, workspacesv1.ReleaseNamespaceReadyCondition, workspacesv1.ReasonReleaseNamespaceTerminating,
			fmt.Sprintf("namespace %s on the child of ClusterDeployment %s is being deleted; it is made again once it is gone", got.Name, s.cdKey))
		return stopAfter(r.Options.UnreachableRetry), true, nil
	}
	drift := false
	for k, v := range want.Labels {
		if got.Labels[k] != v {
			drift = true
		}
	}
	if !drift {
		return next, false, nil
	}
	patchBase := got.DeepCopy()
	if got.Labels == nil {
		got.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		got.Labels[k] = v
	}
	if err := cl.Patch(ctx, got, client.MergeFrom(patchBase)); err != nil {
		return stop, true, fmt.Errorf("labelling namespace %s on the child of %s: %w", want.Name, s.cdKey, err)
	}
	return next, false, nil
}

// mayAdoptUnlabelled reports whether an existing ws-<name> without owner labels may be this
// workspace's: one it installed before (the child lost the labels, or Sveltos made the namespace
// again), or one the upstream operator made for it (a migrated workspace). Anything else without
// labels is someone else's (a platform team's namespace that happens to have the name) and is
// neither adopted nor deleted. The evidence is the workspace's status and the upstream finalizer or
// adopted ServiceSet, which only the controller writes or honours.
func mayAdoptUnlabelled(ws *workspacesv1.WorkspaceDeployment) bool {
	return ws.Status.ServiceSetName != "" || owned.AdoptedServiceSetName(ws) != "" ||
		controllerutil.ContainsFinalizer(ws, workspacesv1.LegacyFinalizer)
}

// checkReleaseNamespaceOwner stops the pass when the existing ws-<name> is not this workspace's to
// use: another workspace's, one without owner labels this workspace may not adopt, or one being
// deleted (an earlier workspace of this name).
func (r *Reconciler) checkReleaseNamespaceOwner(s *scope, got *corev1.Namespace) (stepResult, bool) {
	switch owner, who := ownerOf(got, s.ws); {
	case owner == ownerOther:
		// Made by another workspace since the claim: its owner keeps it.
		s.failed(workspacesv1.ReleaseNamespaceReadyCondition, workspacesv1.ReasonReleaseNamespaceConflict,
			fmt.Sprintf("namespace %s on the child of ClusterDeployment %s belongs to %s; rename this workspace", got.Name, s.cdKey, who))
		return stop, true
	case owner == ownerNone && !mayAdoptUnlabelled(s.ws):
		s.failed(workspacesv1.ReleaseNamespaceReadyCondition, workspacesv1.ReasonReleaseNamespaceConflict,
			fmt.Sprintf("namespace %s on the child of ClusterDeployment %s exists without the labels of a workspace and is not adopted; remove it or rename this workspace", got.Name, s.cdKey))
		return stop, true
	}
	return next, false
}

// childUnreachable reports a child that cannot be reached. An installed workspace keeps its phase
// (its release is untouched, and the rest of the pass needs no child); any other waits Pending.
func (r *Reconciler) childUnreachable(s *scope, err error) stepResult {
	msg := fmt.Sprintf("cannot reach the child cluster of ClusterDeployment %s: %v", s.cdKey, err)
	if s.installed() {
		s.setCondition(workspacesv1.ReleaseNamespaceReadyCondition, metav1.ConditionFalse, workspacesv1.ReasonClusterUnreachable, msg)
		return next
	}
	s.blocked(workspacesv1.PhasePending, workspacesv1.ReleaseNamespaceReadyCondition, workspacesv1.ReasonClusterUnreachable, msg)
	return stopAfter(r.Options.UnreachableRetry)
}

// childContext bounds the requests to a child: a child that stops answering mid-request (its API
// server hung, the network gone) must not hold a worker.
func (r *Reconciler) childContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.Options.ChildRequestTimeout)
}

// ensureQuota creates or corrects the quota; fresh says the namespace was just made (so the quota
// cannot exist yet and is created without reading it first).
func ensureQuota(ctx context.Context, cl client.Client, want *corev1.ResourceQuota, fresh bool) error {
	got := &corev1.ResourceQuota{}
	var err error
	if fresh {
		err = apierrors.NewNotFound(corev1.Resource("resourcequotas"), want.Name)
	} else {
		err = cl.Get(ctx, client.ObjectKeyFromObject(want), got)
	}
	if apierrors.IsNotFound(err) {
		if err := cl.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(got.Spec.Hard, want.Spec.Hard) && len(got.Spec.Scopes) == 0 && got.Spec.ScopeSelector == nil {
		return nil
	}
	patchBase := got.DeepCopy()
	got.Spec = want.Spec
	return cl.Patch(ctx, got, client.MergeFrom(patchBase))
}

func quotaString(q *corev1.ResourceQuota) string {
	parts := make([]string, 0, len(q.Spec.Hard))
	for k, v := range q.Spec.Hard {
		parts = append(parts, fmt.Sprintf("%s=%s", k, v.String()))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// quotaRefusal returns the child's latest report that the release's pods were refused for exceeding
// the namespace's quota (the workload controllers' FailedCreate events), or "".
func (r *Reconciler) quotaRefusal(ctx context.Context, s *scope) string {
	ctx, cancel := r.childContext(ctx)
	defer cancel()
	cl, err := r.Children.Client(ctx, s.cdKey)
	if err != nil {
		return ""
	}
	var list eventsv1.EventList
	if err := cl.List(ctx, &list, client.InNamespace(s.releaseNamespace()), client.Limit(500)); err != nil {
		return ""
	}
	var latest *eventsv1.Event
	for i := range list.Items {
		e := &list.Items[i]
		if !strings.Contains(e.Note, "exceeded quota") || !strings.Contains(e.Note, owned.GPUQuotaName) {
			continue
		}
		if latest == nil || eventTime(latest).Time.Before(eventTime(e).Time) {
			latest = e
		}
	}
	if latest == nil {
		return ""
	}
	return fmt.Sprintf("the child refused pods of the release: %s %s: %s (the GPUs are capped at what the gate admitted; ask for more through spec.resources, not chart values)",
		latest.Regarding.Kind, latest.Regarding.Name, strings.TrimSpace(latest.Note))
}

// deleteReleaseNamespace deletes ws-<name> on the child when it belongs to this workspace. A namespace
// of another workspace is left alone. One without owner labels is deleted only when this workspace
// may have made it (mayAdoptUnlabelled), the workspace may act in the target namespace
// (targetAllowed), and no older workspace of the same name (from another namespace) uses it on the
// cluster. It reports what it left and why.
func (r *Reconciler) deleteReleaseNamespace(ctx context.Context, s *scope, targetAllowed bool) (left string, err error) {
	ctx, cancel := r.childContext(ctx)
	defer cancel()
	cl, err := r.Children.Client(ctx, s.cdKey)
	if err != nil {
		return "", err
	}
	ns := &corev1.Namespace{}
	err = cl.Get(ctx, client.ObjectKey{Name: s.releaseNamespace()}, ns)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading namespace %s: %w", s.releaseNamespace(), err)
	}
	owner, who := ownerOf(ns, s.ws)
	switch owner {
	case ownerOther:
		return fmt.Sprintf("namespace %s on the child belongs to %s and was left alone", ns.Name, who), nil
	case ownerNone:
		if !targetAllowed || !mayAdoptUnlabelled(s.ws) {
			return fmt.Sprintf("namespace %s on the child has no owner labels and this workspace did not make it; it was left alone", ns.Name), nil
		}
		holder, err := r.olderSameName(ctx, s)
		if err != nil {
			return "", err
		}
		if holder != "" {
			return fmt.Sprintf("namespace %s on the child has no owner labels and the older workspace %s uses it; it was left alone", ns.Name, holder), nil
		}
	}
	if !ns.DeletionTimestamp.IsZero() {
		return "", nil
	}
	if err := cl.Delete(ctx, ns, client.Preconditions{UID: &ns.UID}); err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
	}
	return "", nil
}

// olderSameName names an older workspace of the same name from another namespace on the cluster.
func (r *Reconciler) olderSameName(ctx context.Context, s *scope) (string, error) {
	var list workspacesv1.WorkspaceDeploymentList
	if err := r.Client.List(ctx, &list, client.MatchingFields{owned.IndexName: s.ws.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return "", fmt.Errorf("listing workspaces named %s: %w", s.ws.Name, err)
	}
	for i := range list.Items {
		o := &list.Items[i]
		if owned.ClusterKey(o) != s.cdKey {
			continue
		}
		if o.Name == s.ws.Name && o.Namespace != s.ws.Namespace && older(o, s.ws) {
			return o.Namespace + "/" + o.Name, nil
		}
	}
	return "", nil
}
