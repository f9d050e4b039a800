package childns

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// Delete deletes the release namespace on the child when it belongs to ws. A namespace of another workspace is
// left alone. One without owner labels is deleted only when ws may have made it
// (MayAdoptUnlabelled), ws may act in its ClusterDeployment's namespace (targetAllowed), and no older
// workspace of the same name (from another namespace) uses it on the cluster (OlderSameName). A
// namespace already being deleted counts as done: it is not deleted again, nor waited for. left says
// what was left and why ("" when the namespace is gone or going).
func (n Namespaces) Delete(ctx context.Context, ws *workspacesv1.WorkspaceDeployment, targetAllowed bool) (left string, err error) {
	name := owned.ReleaseNamespace(ws)
	ns := &corev1.Namespace{}
	err = n.Child.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading namespace %s: %w", name, err)
	}
	owner, who := OwnerOf(ns, ws)
	switch owner {
	case OwnerOther:
		return fmt.Sprintf("namespace %s on the child belongs to %s and was left alone", ns.Name, who), nil
	case OwnerNone:
		if !targetAllowed || !MayAdoptUnlabelled(ws) {
			return fmt.Sprintf("namespace %s on the child has no owner labels and this workspace did not make it; it was left alone", ns.Name), nil
		}
		older, err := n.OlderSameName(ctx, ws)
		if err != nil {
			return "", err
		}
		if older {
			return fmt.Sprintf("namespace %s on the child has no owner labels and an older workspace of the same name in another namespace uses it; it was left alone", ns.Name), nil
		}
	}
	if !ns.DeletionTimestamp.IsZero() {
		return "", nil
	}
	if err := n.Child.Delete(ctx, ns, client.Preconditions{UID: &ns.UID}); err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
	}
	return "", nil
}

// OlderSameName reports whether an older workspace of ws's name from another namespace is on the
// cluster with the same release namespace, which keeps that namespace there: ws may neither use nor
// delete it. Two namespaces' workspaces of one name share a release namespace only where both use
// ws-<name>: one of them on a cluster of its own namespace, the other installed there before release
// namespaces carried a qualifier (owned.ReleaseNamespace). The caller's messages do not name it: ws's
// tenant reads them.
func (n Namespaces) OlderSameName(ctx context.Context, ws *workspacesv1.WorkspaceDeployment) (bool, error) {
	mine := owned.ReleaseNamespace(ws)
	var list workspacesv1.WorkspaceDeploymentList
	if err := n.Workspaces.List(ctx, &list, client.MatchingFields{owned.IndexName: ws.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("listing workspaces named %s: %w", ws.Name, err)
	}
	for i := range list.Items {
		o := &list.Items[i]
		if owned.ClusterKey(o) != n.Cluster {
			continue
		}
		if o.Name == ws.Name && o.Namespace != ws.Namespace && owned.ReleaseNamespace(o) == mine && owned.Older(o, ws) {
			return true, nil
		}
	}
	return false, nil
}
