package workspace

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/tenancy"
	"github.com/exalsius/exalsius-operator/common/text"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// EventReasonCleanupIncomplete is the reason of the Warning Event a deletion leaves when it gave up
// waiting for an unreachable child and names what it could not clean up.
const EventReasonCleanupIncomplete = "CleanupIncomplete"

// reconcileDelete uninstalls the workspace: it deletes the ServiceSet and waits for it to go, deletes
// the values Secrets labelled with the workspace, deletes ws-<name> on the child when the workspace
// owns it (skipped when the cluster is gone), then removes the finalizer. suspend is ignored here, and nothing waits on a cluster that no longer exists. A
// child that cannot be reached while its ClusterDeployment exists is waited for at most
// UnreachableDeleteTimeout from the deletion request; then the deletion completes and a Warning Event
// names what was left behind.
// While the child is reachable the wait for KCM to drop its finalizer from the ServiceSet has no bound
// of its own (KCM finishes an install in progress first): ending it early would delete ws-<name>
// under a release still being installed. The workspace's unbound replicas hold no GPUs meanwhile
// (gate: bindsNoMore). See docs/RECONCILIATION.md, Deletion.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (reconcile.Result, error) {
	ws := s.ws
	if !controllerutil.ContainsFinalizer(ws, workspacesv1.WorkspaceFinalizer) && !controllerutil.ContainsFinalizer(ws, workspacesv1.LegacyFinalizer) {
		return reconcile.Result{}, nil
	}
	s.cdKey = owned.ClusterKey(ws)
	s.obs.deleting = true

	cd := &k0rdentv1beta1.ClusterDeployment{}
	err := r.Client.Get(ctx, s.cdKey, cd)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("reading ClusterDeployment %s: %w", s.cdKey, err)
	}
	cdGone := apierrors.IsNotFound(err)
	secretGone := cdGone
	if !cdGone {
		// The same lookup as resolveCluster: `<cd>-kubeconfig`, or an adopted or regional cluster's.
		_, err := r.Children.Find(ctx, s.cdKey)
		if err != nil && childcluster.UnreachableReason(err) != childcluster.ReasonKubeconfigMissing {
			return reconcile.Result{}, fmt.Errorf("looking up the kubeconfig of %s: %w", s.cdKey, err)
		}
		secretGone = err != nil
	}
	waited := s.now.Sub(ws.DeletionTimestamp.Time)
	givingUp := func(childErr error) bool {
		return childErr != nil && r.Options.UnreachableDeleteTimeout > 0 && waited >= r.Options.UnreachableDeleteTimeout
	}
	var left []string
	var cause error // why the child could not be reached, named once in the Event

	// The deletion never blocks on tenancy, but where the workspace may not act (the target namespace
	// does not allow the workspace's: the webhook was off, or the grant was revoked), it removes only
	// what carries this workspace's labels, never what merely has a name it could claim.
	targetAllowed, err := r.targetAllowed(ctx, ws, s.cdKey)
	if err != nil {
		return reconcile.Result{}, err
	}

	// Routes first: a removed TCPRoute frees its port (routes.go).
	if done, err := r.removeRoutes(ctx, s, cd, cdGone); err != nil || !done {
		return reconcile.Result{RequeueAfter: r.routingRetry()}, err
	}
	// A workspace the upstream operator made and this one never adopted has its ServiceSet under the
	// upstream name (adopt.go): it goes first, like our own.
	if gone, err := r.deleteLegacyServiceSet(ctx, s, targetAllowed, cdGone); err != nil || !gone {
		return reconcile.Result{RequeueAfter: r.Options.UnreachableRetry}, err
	}
	gone, err := r.deleteServiceSet(ctx, s, cdGone)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !gone {
		// k0rdent uninstalls the release from the child; an unreachable child holds it.
		var childErr error
		if !cdGone && !secretGone {
			cctx, cancel := r.childContext(ctx)
			_, childErr = r.Children.Client(cctx, s.cdKey)
			cancel()
		}
		if !givingUp(childErr) {
			if childErr != nil {
				s.obs.note += fmt.Sprintf("; the child cannot be reached (%v); giving up %s after the deletion request",
					childErr, r.Options.UnreachableDeleteTimeout)
				return reconcile.Result{RequeueAfter: r.requeueWithin(r.Options.UnreachableDeleteTimeout - waited)}, nil
			}
			// The ServiceSet's deletion brings the workspace back; so does the child becoming
			// unreachable (a child event), and, as a fallback, a look after the retry delay.
			return reconcile.Result{RequeueAfter: r.Options.UnreachableRetry}, nil
		}
		left = append(left, fmt.Sprintf("ServiceSet %s/%s is still being deleted by k0rdent, so the release may still be installed",
			s.cdKey.Namespace, s.serviceSetNameForDelete()))
		cause = childErr
	}
	// The values Secrets go with the workspace, also those no ServiceSet ever owned (a ServiceSet
	// create that failed): nothing that holds its secret values outlives it.
	if err := r.removeValuesSecrets(ctx, s); err != nil {
		return reconcile.Result{}, err
	}

	if cdGone || secretGone {
		r.Children.Forget(s.cdKey)
	} else {
		note, err := r.deleteReleaseNamespace(ctx, s, targetAllowed)
		switch {
		case err != nil && givingUp(err):
			left = append(left, fmt.Sprintf("namespace %s on the child was not deleted", s.releaseNamespace()))
			if cause == nil || childcluster.UnreachableReason(err) == "" {
				cause = err
			}
		case err != nil:
			s.obs.note = fmt.Sprintf("cannot delete namespace %s on the child of ClusterDeployment %s yet: %v", s.releaseNamespace(), s.cdKey, err)
			if r.Options.UnreachableDeleteTimeout > 0 {
				s.obs.note += fmt.Sprintf("; giving up %s after the deletion request", r.Options.UnreachableDeleteTimeout)
			}
			return reconcile.Result{RequeueAfter: r.requeueWithin(r.Options.UnreachableDeleteTimeout - waited)}, nil
		case note != "":
			log.FromContext(ctx).Info("release namespace left on the child", "reason", note)
		}
		if err := r.forgetUnusedChild(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
	}
	if len(left) > 0 {
		r.Recorder.Eventf(ws, nil, corev1.EventTypeWarning, EventReasonCleanupIncomplete, "Delete", "%s",
			cleanupIncompleteNote(r.Options.UnreachableDeleteTimeout, s.cdKey, left, cause))
	}

	r.gateFor().Forget(s.key())
	patchBase := ws.DeepCopy()
	controllerutil.RemoveFinalizer(ws, workspacesv1.WorkspaceFinalizer)
	controllerutil.RemoveFinalizer(ws, workspacesv1.LegacyFinalizer) // the upstream operator's, if never adopted (adopt.go)
	if err := r.Client.Patch(ctx, ws, client.MergeFromWithOptions(patchBase, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("removing finalizer: %w", err)
	}
	return reconcile.Result{}, nil
}

// cleanupIncompleteNote is the note of the CleanupIncomplete Event: what was left first, the cause
// (named once) last. The Event API refuses a note longer than text.MaxEventNoteBytes as a whole (and
// the Event is lost), so the note is cut to it, and the cut falls on the long error text.
func cleanupIncompleteNote(waited time.Duration, cd types.NamespacedName, left []string, cause error) string {
	note := fmt.Sprintf("deleted after waiting %s for the unreachable child of ClusterDeployment %s; not cleaned up: %s",
		waited, cd, strings.Join(left, "; "))
	if cause != nil {
		note += "; the child could not be reached: " + cause.Error()
	}
	return text.Truncate(note, text.MaxEventNoteBytes)
}

// requeueWithin is the delay before the next look at an unreachable child: the retry delay, or the
// time left until the deletion gives up when that is sooner.
func (r *Reconciler) requeueWithin(left time.Duration) time.Duration {
	if left > 0 && left < r.Options.UnreachableRetry {
		return left
	}
	return r.Options.UnreachableRetry
}

func (s *scope) serviceSetNameForDelete() string {
	if s.ws.Status.ServiceSetName != "" {
		return s.ws.Status.ServiceSetName
	}
	return owned.ServiceSetName(s.ws)
}

// deleteServiceSet deletes the workspace's ServiceSet and reports whether it is gone. When the
// ClusterDeployment is gone, k0rdent's finalizer on the ServiceSet would never be removed (KCM reads
// the ClusterDeployment first), so the operator removes it: there is no release left to uninstall.
func (r *Reconciler) deleteServiceSet(ctx context.Context, s *scope, cdGone bool) (bool, error) {
	name := s.serviceSetNameForDelete()
	key := types.NamespacedName{Namespace: s.cdKey.Namespace, Name: name}
	ss := &k0rdentv1beta1.ServiceSet{}
	err := r.Client.Get(ctx, key, ss)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		// The cache may not show a ServiceSet this process made a moment ago (a workspace deleted
		// right after its install, or while the watches re-list after an API server restart): only
		// the API server can say it is gone, or the finalizer would go and leave the ServiceSet and
		// its release behind.
		err = r.APIReader.Get(ctx, key, ss)
	}
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading ServiceSet %s/%s: %w", s.cdKey.Namespace, name, err)
	}
	if !owned.LabelledServiceSet(ss, s.ws) {
		return true, nil // not ours: only a ServiceSet labelled with this workspace is deleted
	}
	if ss.DeletionTimestamp.IsZero() {
		if err := r.Client.Delete(ctx, ss); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("deleting ServiceSet %s/%s: %w", ss.Namespace, ss.Name, err)
		}
		s.obs.note = fmt.Sprintf("uninstalling: waiting for ServiceSet %s/%s to be deleted", ss.Namespace, ss.Name)
		if !cdGone {
			return false, nil
		}
	}
	if cdGone && len(ss.Finalizers) > 0 {
		patchBase := ss.DeepCopy()
		ss.Finalizers = nil
		if err := r.Client.Patch(ctx, ss, client.MergeFrom(patchBase)); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("removing finalizers of ServiceSet %s/%s (its ClusterDeployment is gone): %w", ss.Namespace, ss.Name, err)
		}
	}
	s.obs.note = fmt.Sprintf("uninstalling: waiting for ServiceSet %s/%s to be deleted", ss.Namespace, ss.Name)
	return false, nil
}

// removeValuesSecrets deletes the values Secrets labelled with the workspace in its ClusterDeployment's
// namespace, once its ServiceSet is gone (or the deletion gave up waiting for it). They are listed
// from the API server: the cache may not show one a pass made a moment ago.
func (r *Reconciler) removeValuesSecrets(ctx context.Context, s *scope) error {
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader
	}
	secrets, err := valuesSecretsOf(ctx, reader, types.NamespacedName{Namespace: s.ws.Namespace, Name: s.ws.Name}, s.cdKey.Namespace)
	if err != nil {
		return err
	}
	return r.deleteValuesSecrets(ctx, secrets)
}

// targetAllowed reports whether the workspace may act in its ClusterDeployment's namespace: its own,
// or one whose annotation allows it (common/tenancy). A namespace that is gone allows nothing.
func (r *Reconciler) targetAllowed(ctx context.Context, ws *workspacesv1.WorkspaceDeployment, cd types.NamespacedName) (bool, error) {
	if tenancy.SameNamespace(ws.Namespace, cd.Namespace) {
		return true, nil
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	err := r.Client.Get(ctx, types.NamespacedName{Name: cd.Namespace}, ns)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading namespace %s: %w", cd.Namespace, err)
	}
	ok, _ := tenancy.Allowed(ws.Namespace, &corev1.Namespace{ObjectMeta: ns.ObjectMeta})
	return ok, nil
}

// forgetUnusedChild stops the child's cache when no other workspace uses the cluster. The namespace
// deletion that follows reconnects once if needed.
func (r *Reconciler) forgetUnusedChild(ctx context.Context, s *scope) error {
	var list workspacesv1.WorkspaceDeploymentList
	if err := r.Client.List(ctx, &list, client.MatchingFields{owned.IndexCluster: s.cdKey.String()}, client.UnsafeDisableDeepCopy); err != nil { // read-only
		return fmt.Errorf("listing workspaces of %s: %w", s.cdKey, err)
	}
	for i := range list.Items {
		if list.Items[i].Namespace != s.ws.Namespace || list.Items[i].Name != s.ws.Name {
			return nil
		}
	}
	r.Children.Forget(s.cdKey)
	return nil
}
