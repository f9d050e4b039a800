package workspace

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// A workspace can vanish without its deletion ever being reconciled: the API server deletes an object
// at once when it had no finalizer at the moment the DELETE read it, even if a finalizer was added
// in between (the DELETE does not read the finalizers again). A pass that added the finalizer a moment
// before then goes on and installs the workspace: its ServiceSet, its release and ws-<name> on the
// child are left without an owner, and hold the workspace's GPUs for good. Two things clean that up:
// the pass itself, when its status write finds the workspace gone (removeVanished), and the reconcile
// of a workspace that no longer exists, which looks for ServiceSets still labelled with it
// (collectOrphans), for instance after a restart.

// A third case: the pass made ws-<name> and then failed before it made the ServiceSet, and its status
// write failed too (the management API server restarting): nothing on the management cluster names
// the namespace. The pass remembers it (madeNamespaces) when it ends in an error; the next reconcile
// either finds the workspace (and forgets it) or finds it gone and removes the namespace
// (collectMadeNamespace). The memory is the process's: a restart in between loses it.

// madeNamespaces maps a workspace to the ClusterDeployment on whose child a pass that ended in an
// error made its release namespace.
type madeNamespaces struct {
	mu sync.Mutex
	m  map[types.NamespacedName]types.NamespacedName
}

func (n *madeNamespaces) remember(ws, cd types.NamespacedName) {
	if cd.Name == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[types.NamespacedName]types.NamespacedName{}
	}
	n.m[ws] = cd
}

func (n *madeNamespaces) forget(ws types.NamespacedName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.m, ws)
}

func (n *madeNamespaces) lookup(ws types.NamespacedName) (types.NamespacedName, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	cd, ok := n.m[ws]
	return cd, ok
}

// collectMadeNamespace removes the release namespace a failed pass made for a workspace that no longer
// exists (confirmed by the API server), when the namespace's labels name that workspace.
func (r *Reconciler) collectMadeNamespace(ctx context.Context, key types.NamespacedName) error {
	cd, ok := r.madeNamespaces.lookup(key)
	if !ok {
		return nil
	}
	if r.APIReader != nil {
		err := r.APIReader.Get(ctx, key, &workspacesv1.WorkspaceDeployment{})
		if err == nil {
			r.madeNamespaces.forget(key)
			return nil // it exists: the cache is behind
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading workspace %s: %w", key, err)
		}
	}
	log.FromContext(ctx).Info("removing the release namespace a failed pass made for a workspace that no longer exists", "clusterDeployment", cd)
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: workspacesv1.WorkspaceDeploymentSpec{ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: cd.Name, Namespace: cd.Namespace}}}
	if err := r.removeInstall(ctx, &scope{ws: ws, cdKey: cd}); err != nil {
		return err
	}
	r.madeNamespaces.forget(key)
	return nil
}

// removeVanished removes what a pass installed for a workspace that was deleted during the pass.
func (r *Reconciler) removeVanished(ctx context.Context, s *scope) error {
	if s.cdKey.Name == "" || (s.svcSet == nil && !s.releaseNSCreated) {
		return nil
	}
	log.FromContext(ctx).Info("the workspace was deleted while this pass installed it; removing what the pass made",
		"clusterDeployment", s.cdKey, "serviceSet", s.serviceSetNameForDelete())
	return r.removeInstall(ctx, s)
}

// collectOrphans deletes the ServiceSets, the release namespaces on the child and the values Secrets
// of a workspace that does not exist. The cache is read first (a deleted workspace has none,
// normally); the API server confirms that no workspace of that name exists before anything is
// deleted. The values Secrets labelled with the workspace go once no ServiceSet of it is left (one
// that exists owns its Secret, and its deletion brings the collector back): a Secret no ServiceSet
// ever owned, left by a failed ServiceSet create, goes too.
func (r *Reconciler) collectOrphans(ctx context.Context, key types.NamespacedName) error {
	var sets k0rdentv1beta1.ServiceSetList
	if err := r.Client.List(ctx, &sets, client.UnsafeDisableDeepCopy, client.MatchingLabels{
		workspacesv1.WorkspaceLabel: key.Name, workspacesv1.WorkspaceNamespaceLabel: key.Namespace}); err != nil {
		return fmt.Errorf("listing the ServiceSets of workspace %s: %w", key, err)
	}
	var secrets []metav1.PartialObjectMetadata
	if len(sets.Items) == 0 {
		var err error
		if secrets, err = valuesSecretsOf(ctx, r.Client, key, ""); err != nil {
			return err
		}
	}
	if len(sets.Items) == 0 && len(secrets) == 0 {
		return nil
	}
	if r.APIReader != nil {
		err := r.APIReader.Get(ctx, key, &workspacesv1.WorkspaceDeployment{})
		if err == nil {
			return nil // it exists: the cache is behind, and its own passes own the ServiceSet
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading workspace %s: %w", key, err)
		}
	}
	if len(secrets) > 0 {
		log.FromContext(ctx).Info("removing the values Secrets of a workspace that no longer exists", "secrets", len(secrets))
		return r.deleteValuesSecrets(ctx, secrets)
	}
	var errs []error
	for i := range sets.Items {
		ss := &sets.Items[i]
		cd := types.NamespacedName{Namespace: ss.Namespace, Name: ss.Labels[workspacesv1.ClusterDeploymentLabel]}
		if cd.Name == "" {
			cd.Name = ss.Spec.Cluster
		}
		ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		ws.Status.ServiceSetName = ss.Name
		if len(ss.Spec.Services) == 1 {
			ws.Status.ReleaseNamespace = ss.Spec.Services[0].Namespace // honoured only in one of its two forms
		}
		s := &scope{ws: ws, cdKey: cd}
		log.FromContext(ctx).Info("removing the ServiceSet and release namespace of a workspace that no longer exists",
			"clusterDeployment", cd, "serviceSet", ss.Name)
		errs = append(errs, r.removeInstall(ctx, s))
	}
	return errors.Join(errs...)
}

// removeInstall deletes a workspace's ServiceSet (k0rdent uninstalls the release) and ws-<name> on
// the child when the workspace owns it. The ClusterDeployment being gone is handled as in a deletion.
func (r *Reconciler) removeInstall(ctx context.Context, s *scope) error {
	cdGone := false
	if err := r.Client.Get(ctx, s.cdKey, &k0rdentv1beta1.ClusterDeployment{}); apierrors.IsNotFound(err) {
		cdGone = true
	} else if err != nil {
		return fmt.Errorf("reading ClusterDeployment %s: %w", s.cdKey, err)
	}
	if _, err := r.deleteServiceSet(ctx, s, cdGone); err != nil {
		return err
	}
	if cdGone {
		return nil
	}
	allowed, err := r.targetAllowed(ctx, s.ws, s.cdKey)
	if err != nil {
		return err
	}
	note, err := r.deleteReleaseNamespace(ctx, s, allowed)
	if note != "" {
		log.FromContext(ctx).Info("release namespace left on the child", "reason", note)
	}
	return err
}
