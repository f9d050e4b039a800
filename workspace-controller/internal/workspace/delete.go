package workspace

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// reconcileDelete uninstalls the workspace: it deletes the ServiceSet and waits for it to go, deletes
// ws-<name> on the child (skipped when the cluster is gone), then removes the finalizer. suspend is
// ignored here, and nothing waits on a cluster that no longer exists.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (reconcile.Result, error) {
	ws := s.ws
	if !controllerutil.ContainsFinalizer(ws, workspacesv1.WorkspaceFinalizer) {
		return reconcile.Result{}, nil
	}
	s.cdKey = ClusterKey(ws)
	if ws.Status.Phase != workspacesv1.PhaseDeleting {
		s.setCondition(workspacesv1.ReadyCondition, metav1.ConditionFalse, workspacesv1.ReasonDeleting, "the workspace is being deleted")
	}
	s.ws.Status.Phase = workspacesv1.PhaseDeleting

	cd := &k0rdentv1.ClusterDeployment{}
	err := r.Client.Get(ctx, s.cdKey, cd)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("reading ClusterDeployment %s: %w", s.cdKey, err)
	}
	cdGone := apierrors.IsNotFound(err)

	// Routes first: a removed TCPRoute frees its port (routes.go).
	if done, err := r.removeRoutes(ctx, s, cd, cdGone); err != nil || !done {
		return reconcile.Result{RequeueAfter: r.routingRetry()}, err
	}

	gone, err := r.deleteServiceSet(ctx, s, cdGone)
	if err != nil || !gone {
		return reconcile.Result{}, err
	}

	secretGone := cdGone
	if !cdGone {
		secret := &metav1.PartialObjectMetadata{}
		secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.cdKey.Namespace, Name: k0rdentv1.KubeconfigSecretName(s.cdKey.Name)}, secret)
		if err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("reading kubeconfig Secret metadata of %s: %w", s.cdKey, err)
		}
		secretGone = apierrors.IsNotFound(err)
	}
	if cdGone || secretGone {
		r.Children.Forget(s.cdKey)
	} else {
		if err := r.Children.DeleteNamespace(ctx, s.cdKey, s.releaseNamespace()); err != nil {
			s.ws.Status.Message = fmt.Sprintf("cannot delete namespace %s on the child of ClusterDeployment %s yet: %v", s.releaseNamespace(), s.cdKey, err)
			return reconcile.Result{RequeueAfter: r.Options.UnreachableRetry}, nil
		}
		if err := r.forgetUnusedChild(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
	}

	r.admissionsFor().forget(s.key())
	patchBase := ws.DeepCopy()
	controllerutil.RemoveFinalizer(ws, workspacesv1.WorkspaceFinalizer)
	if err := r.Client.Patch(ctx, ws, client.MergeFromWithOptions(patchBase, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("removing finalizer: %w", err)
	}
	return reconcile.Result{}, nil
}

// deleteServiceSet deletes the workspace's ServiceSet and reports whether it is gone. When the
// ClusterDeployment is gone, k0rdent's finalizer on the ServiceSet would never be removed (KCM reads
// the ClusterDeployment first), so the operator removes it: there is no release left to uninstall.
func (r *Reconciler) deleteServiceSet(ctx context.Context, s *scope, cdGone bool) (bool, error) {
	name := s.ws.Status.ServiceSetName
	if name == "" {
		name = ServiceSetName(s.ws)
	}
	ss := &k0rdentv1.ServiceSet{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.cdKey.Namespace, Name: name}, ss)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading ServiceSet %s/%s: %w", s.cdKey.Namespace, name, err)
	}
	if ss.Labels[workspacesv1.WorkspaceLabel] != s.ws.Name || ss.Labels[workspacesv1.WorkspaceNamespaceLabel] != s.ws.Namespace {
		return true, nil // not ours
	}
	if ss.DeletionTimestamp.IsZero() {
		if err := r.Client.Delete(ctx, ss); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("deleting ServiceSet %s/%s: %w", ss.Namespace, ss.Name, err)
		}
		s.ws.Status.Message = fmt.Sprintf("uninstalling: waiting for ServiceSet %s/%s to be deleted", ss.Namespace, ss.Name)
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
	s.ws.Status.Message = fmt.Sprintf("uninstalling: waiting for ServiceSet %s/%s to be deleted", ss.Namespace, ss.Name)
	return false, nil
}

// forgetUnusedChild stops the child's cache when no other workspace uses the cluster. The namespace
// deletion that follows reconnects once if needed.
func (r *Reconciler) forgetUnusedChild(ctx context.Context, s *scope) error {
	var list workspacesv1.WorkspaceDeploymentList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexCluster: s.cdKey.String()}); err != nil {
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
