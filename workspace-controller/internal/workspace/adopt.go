package workspace

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// adoptLegacy takes over what the upstream operator left: a workspace this controller has never
// installed whose upstream ServiceSet exists keeps that ServiceSet and its release names (pinned in
// annotations), so the release is upgraded in place, not uninstalled and installed again; upstream's
// finalizer is dropped once ours is on and the release is settled. See docs/MIGRATION.md.
func (r *Reconciler) adoptLegacy(ctx context.Context, s *scope) (stepResult, error) {
	ws := s.ws
	patchBase := ws.DeepCopy()
	changed := false
	allowed := false
	if owned.AdoptedServiceSetName(ws) == "" && ws.Status.ServiceSetName == "" {
		// Only where the workspace may act: the ServiceSet of the same name in a namespace that does
		// not allow this one belongs to a workspace there.
		var err error
		if allowed, err = r.targetAllowed(ctx, ws, owned.ClusterKey(ws)); err != nil {
			return stop, err
		}
	}
	if allowed {
		name := owned.LegacyName(ws)
		ss := &k0rdentv1beta1.ServiceSet{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: owned.ClusterKey(ws).Namespace, Name: name}, ss)
		switch {
		case err == nil && ss.DeletionTimestamp.IsZero() && owned.UpstreamShape(ss, ws) && unlabelledOrOwn(ss, ws) &&
			owned.ValidateReleaseName(ss.Spec.Services[0].Name) == nil:
			// The ServiceSet is labelled as this workspace's first: from then on its labels, which
			// tenants cannot write, say whose it is (the deletion deletes only labelled ServiceSets).
			if err := r.labelAdopted(ctx, ss, ws); err != nil {
				return stop, err
			}
			if ws.Annotations == nil {
				ws.Annotations = map[string]string{}
			}
			ws.Annotations[workspacesv1.ServiceSetNameAnnotation] = ss.Name
			ws.Annotations[workspacesv1.ReleaseNameAnnotation] = ss.Spec.Services[0].Name
			changed = true
			log.FromContext(ctx).Info("adopting the ServiceSet of the upstream operator", "serviceSet", ss.Name, "release", ss.Spec.Services[0].Name)
		case err != nil && !apierrors.IsNotFound(err):
			return stop, fmt.Errorf("looking for the upstream ServiceSet %s: %w", name, err)
		}
	}
	// Upstream's finalizer goes once ours is on and the workspace's release is settled: adopted, or
	// installed by this controller (status names its ServiceSet). Until then it is the evidence that
	// an unlabelled ws-<name> on the child is this workspace's, made by the upstream operator
	// (childns.MayAdoptUnlabelled): dropped earlier, a workspace whose upstream ServiceSet cannot be
	// adopted would find its own release namespace in conflict, and leave it behind when deleted.
	// The deletion removes it in any case (delete.go).
	if controllerutil.ContainsFinalizer(ws, workspacesv1.LegacyFinalizer) && controllerutil.ContainsFinalizer(ws, workspacesv1.WorkspaceFinalizer) &&
		(owned.AdoptedServiceSetName(ws) != "" || ws.Status.ServiceSetName != "") {
		controllerutil.RemoveFinalizer(ws, workspacesv1.LegacyFinalizer)
		changed = true
	}
	if !changed {
		return next, nil
	}
	if err := r.Client.Patch(ctx, ws, client.MergeFromWithOptions(patchBase, client.MergeFromWithOptimisticLock{})); err != nil {
		return stop, fmt.Errorf("adopting upstream names and finalizer: %w", err)
	}
	return next, nil
}

// unlabelledOrOwn reports whether ss carries no workspace labels, or this workspace's.
func unlabelledOrOwn(ss *k0rdentv1beta1.ServiceSet, ws *workspacesv1.WorkspaceDeployment) bool {
	n, ns := ss.Labels[workspacesv1.WorkspaceLabel], ss.Labels[workspacesv1.WorkspaceNamespaceLabel]
	return (n == "" && ns == "") || (n == ws.Name && ns == ws.Namespace)
}

// labelAdopted gives the adopted upstream ServiceSet this workspace's labels.
func (r *Reconciler) labelAdopted(ctx context.Context, ss *k0rdentv1beta1.ServiceSet, ws *workspacesv1.WorkspaceDeployment) error {
	if ss.Labels[workspacesv1.WorkspaceLabel] == ws.Name && ss.Labels[workspacesv1.WorkspaceNamespaceLabel] == ws.Namespace {
		return nil
	}
	patchBase := ss.DeepCopy()
	if ss.Labels == nil {
		ss.Labels = map[string]string{}
	}
	ss.Labels[workspacesv1.WorkspaceLabel] = ws.Name
	ss.Labels[workspacesv1.WorkspaceNamespaceLabel] = ws.Namespace
	if err := r.Client.Patch(ctx, ss, client.MergeFromWithOptions(patchBase, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("labelling the adopted upstream ServiceSet %s: %w", ss.Name, err)
	}
	return nil
}

// deleteLegacyServiceSet deletes, for a workspace of the upstream operator that was never adopted,
// the upstream ServiceSet before the release namespace goes, as the upstream operator did; it
// reports whether it is gone. Adopted workspaces delete it as their own ServiceSet. The ServiceSet
// carries no labels of ours, so it is deleted only where the workspace may act (targetAllowed: the
// tenancy rule holds for the ClusterDeployment's namespace), and only in the upstream shape. When
// the ClusterDeployment is gone, KCM's finalizer on it would never be removed (as for our own
// ServiceSet, deleteServiceSet): the operator removes it, there is no release left to uninstall.
func (r *Reconciler) deleteLegacyServiceSet(ctx context.Context, s *scope, targetAllowed, cdGone bool) (bool, error) {
	ws := s.ws
	if !targetAllowed || !controllerutil.ContainsFinalizer(ws, workspacesv1.LegacyFinalizer) || owned.AdoptedServiceSetName(ws) != "" {
		return true, nil
	}
	ss := &k0rdentv1beta1.ServiceSet{}
	key := types.NamespacedName{Namespace: owned.ClusterKey(ws).Namespace, Name: owned.LegacyName(ws)}
	err := r.Client.Get(ctx, key, ss)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the upstream ServiceSet %s: %w", key, err)
	}
	if !owned.UpstreamShape(ss, ws) || !unlabelledOrOwn(ss, ws) {
		return true, nil // not the upstream ServiceSet of this workspace
	}
	if ss.DeletionTimestamp.IsZero() {
		if err := r.Client.Delete(ctx, ss, client.Preconditions{UID: &ss.UID}); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("deleting the upstream ServiceSet %s: %w", key, err)
		}
	}
	if cdGone && len(ss.Finalizers) > 0 {
		patchBase := ss.DeepCopy()
		ss.Finalizers = nil
		if err := r.Client.Patch(ctx, ss, client.MergeFrom(patchBase)); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("removing finalizers of the upstream ServiceSet %s (its ClusterDeployment is gone): %w", key, err)
		}
	}
	s.obs.note = fmt.Sprintf("uninstalling: waiting for the upstream ServiceSet %s to be deleted", key)
	return false, nil // the ServiceSet watch (or the next pass) comes back once it is gone
}
