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
)

const (
	// LegacyFinalizer is the finalizer the upstream exalsius-operator 0.11 put on WorkspaceDeployments.
	// Nothing else removes it after a switch, so the workspace-controller does, once its own is on.
	LegacyFinalizer = "workspaces.exalsius.ai/deployment"
	// AnnotationServiceSetName pins, on a WorkspaceDeployment, the name of the ServiceSet adopted from
	// the upstream operator, so that the release is kept instead of reinstalled under a new name.
	AnnotationServiceSetName = "workspaces.exalsius.ai/serviceset-name"
	// AnnotationReleaseName pins the adopted Helm release name.
	AnnotationReleaseName = "workspaces.exalsius.ai/release-name"
)

// LegacyName is the ServiceSet and Helm release name the upstream operator 0.11 gave a workspace:
// `wsd-<cluster deployment>-<name>`.
func LegacyName(ws *workspacesv1.WorkspaceDeployment) string {
	return "wsd-" + ws.Spec.ClusterDeploymentRef.Name + "-" + ws.Name
}

// adoptLegacy takes over what the upstream operator left: its finalizer is dropped (ours is on), and
// a workspace this controller has never installed whose upstream ServiceSet exists keeps that
// ServiceSet and its release names (pinned in annotations), so the release is upgraded in place, not
// uninstalled and installed again. See docs/MIGRATION.md.
func (r *Reconciler) adoptLegacy(ctx context.Context, s *scope) (stepResult, error) {
	ws := s.ws
	patchBase := ws.DeepCopy()
	changed := false
	if controllerutil.ContainsFinalizer(ws, LegacyFinalizer) && controllerutil.ContainsFinalizer(ws, workspacesv1.WorkspaceFinalizer) {
		controllerutil.RemoveFinalizer(ws, LegacyFinalizer)
		changed = true
	}
	if ws.Annotations[AnnotationServiceSetName] == "" && ws.Status.ServiceSetName == "" {
		name := LegacyName(ws)
		ss := &k0rdentv1beta1.ServiceSet{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: ClusterKey(ws).Namespace, Name: name}, ss)
		switch {
		case err == nil && ss.DeletionTimestamp.IsZero() && len(ss.Spec.Services) == 1 &&
			ss.Spec.Services[0].Namespace == ReleaseNamespace(ws.Name) && ss.Spec.Cluster == ws.Spec.ClusterDeploymentRef.Name:
			if ws.Annotations == nil {
				ws.Annotations = map[string]string{}
			}
			ws.Annotations[AnnotationServiceSetName] = ss.Name
			ws.Annotations[AnnotationReleaseName] = ss.Spec.Services[0].Name
			changed = true
			log.FromContext(ctx).Info("adopting the ServiceSet of the upstream operator", "serviceSet", ss.Name, "release", ss.Spec.Services[0].Name)
		case err != nil && !apierrors.IsNotFound(err):
			return stop, fmt.Errorf("looking for the upstream ServiceSet %s: %w", name, err)
		}
	}
	if !changed {
		return next, nil
	}
	if err := r.Client.Patch(ctx, ws, client.MergeFromWithOptions(patchBase, client.MergeFromWithOptimisticLock{})); err != nil {
		return stop, fmt.Errorf("adopting upstream names and finalizer: %w", err)
	}
	return next, nil
}

// deleteLegacyServiceSet deletes, for a workspace of the upstream operator that was never adopted,
// the upstream ServiceSet before the release namespace goes, as the upstream operator did; it
// reports whether it is gone. Adopted workspaces delete it as their own ServiceSet.
func (r *Reconciler) deleteLegacyServiceSet(ctx context.Context, s *scope) (bool, error) {
	ws := s.ws
	if !controllerutil.ContainsFinalizer(ws, LegacyFinalizer) || ws.Annotations[AnnotationServiceSetName] != "" {
		return true, nil
	}
	ss := &k0rdentv1beta1.ServiceSet{}
	key := types.NamespacedName{Namespace: ClusterKey(ws).Namespace, Name: LegacyName(ws)}
	err := r.Client.Get(ctx, key, ss)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the upstream ServiceSet %s: %w", key, err)
	}
	if ss.Spec.Cluster != ws.Spec.ClusterDeploymentRef.Name || len(ss.Spec.Services) != 1 || ss.Spec.Services[0].Namespace != ReleaseNamespace(ws.Name) {
		return true, nil // not the upstream ServiceSet of this workspace
	}
	if ss.DeletionTimestamp.IsZero() {
		if err := r.Client.Delete(ctx, ss, client.Preconditions{UID: &ss.UID}); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("deleting the upstream ServiceSet %s: %w", key, err)
		}
	}
	return false, nil // the ServiceSet watch (or the next pass) comes back once it is gone
}
