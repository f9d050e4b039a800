package routing

// Route namespaces on the regional cluster: claiming, adopting and telling whose they are.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/names"
)

// labelledFor reports whether an object's identity labels name the workspace.
func labelledFor(o metav1.Object, ws Workspace) bool {
	l := o.GetLabels()
	return l[workspacesv1.WorkspaceLabel] == ws.Name && l[workspacesv1.WorkspaceNamespaceLabel] == ws.Namespace
}

// ownedRouteNamespace reports whether a namespace is a route namespace of the workspace: its
// identity labels name the workspace and it carries RouteNamespaceLabel (a release namespace never
// does).
func ownedRouteNamespace(n *corev1.Namespace, ws Workspace) bool {
	return isRouteNamespace(n) && labelledFor(n, ws)
}

// isRouteNamespace reports whether the provider made the namespace for routes.
func isRouteNamespace(n *corev1.Namespace) bool {
	return n.Labels[RouteNamespaceLabel] == "true"
}

func ownerOf(o metav1.Object) string {
	l := o.GetLabels()
	if l[workspacesv1.WorkspaceLabel] == "" {
		return "something that is not a workspace"
	}
	if n, ok := o.(*corev1.Namespace); ok && !isRouteNamespace(n) {
		return "workspace " + l[workspacesv1.WorkspaceNamespaceLabel] + "/" + l[workspacesv1.WorkspaceLabel] + " (not as a route namespace)"
	}
	return "workspace " + l[workspacesv1.WorkspaceNamespaceLabel] + "/" + l[workspacesv1.WorkspaceLabel]
}

// claimNamespace finds or makes the workspace's namespace on the regional cluster. The short
// wsr-<name> is first come, first served among same-named workspaces of different namespaces behind
// this regional cluster; the others get wsr-<name>-<qualifier>, and keep it (a namespace that is
// already theirs is found first).
//
// A workspace whose name already ends like a qualifier ("-" and 5 hex characters) only ever gets the
// qualified form: otherwise a team could name a workspace `notebook-<qualifier of another namespace>`
// and take, first, the hostname that namespace's `notebook` gets when the short one is taken. A short
// namespace such a workspace holds from before this rule is removed with its routes.
func (g *Gateway) claimNamespace(ctx context.Context, t *target, ws Workspace) (string, bool, error) {
	qualified := RouteNamespace(ws.Name, ws.Namespace, true)
	short := RouteNamespace(ws.Name, ws.Namespace, false)
	candidates := []struct {
		name      string
		qualified bool
	}{{short, false}, {qualified, true}}
	if names.EndsInQualifier(ws.Name) {
		if err := g.dropShortNamespace(ctx, t, ws, short); err != nil {
			return "", false, err
		}
		candidates = candidates[1:]
	}
	nsObj := &corev1.Namespace{}
	err := t.c.Get(ctx, types.NamespacedName{Name: qualified}, nsObj)
	if err == nil && ownedRouteNamespace(nsObj, ws) {
		return qualified, true, usable(nsObj, t.key)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return "", false, fmt.Errorf("reading namespace %s on regional cluster %s: %w", qualified, t.key, err)
	}
	for _, cand := range candidates {
		nsObj, err := g.getOrCreateNamespace(ctx, t, ws, cand.name, nil)
		if err != nil {
			return "", false, err
		}
		if ownedRouteNamespace(nsObj, ws) {
			if err := g.adopt(ctx, t, ws, nsObj); err != nil {
				return "", false, err
			}
			return cand.name, cand.qualified, usable(nsObj, t.key)
		}
		if cand.qualified {
			return "", false, infra("namespace %s on regional cluster %s belongs to %s", cand.name, t.key, ownerOf(nsObj))
		}
	}
	return "", false, nil // not reached
}

// dropShortNamespace removes the short route namespace name when it is the workspace's (claimNamespace).
func (g *Gateway) dropShortNamespace(ctx context.Context, t *target, ws Workspace, name string) error {
	nsObj := &corev1.Namespace{}
	err := t.c.Get(ctx, types.NamespacedName{Name: name}, nsObj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading namespace %s on regional cluster %s: %w", name, t.key, err)
	}
	if !ownedRouteNamespace(nsObj, ws) {
		return nil
	}
	_, err = removeNamespace(ctx, t.c, *nsObj, ownSelector(ws))
	return err
}

// usable reports a namespace that is being deleted (a previous workspace's, being swept).
func usable(ns *corev1.Namespace, key types.NamespacedName) error {
	if !ns.DeletionTimestamp.IsZero() {
		return infra("namespace %s on regional cluster %s is still being deleted", ns.Name, key)
	}
	return nil
}

// getOrCreateNamespace reads the namespace name on the regional cluster, or makes it as a route
// namespace of the workspace with the extra labels.
func (g *Gateway) getOrCreateNamespace(ctx context.Context, t *target, ws Workspace, name string, extra map[string]string) (*corev1.Namespace, error) {
	nsObj := &corev1.Namespace{}
	err := t.c.Get(ctx, types.NamespacedName{Name: name}, nsObj)
	if err == nil {
		return nsObj, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading namespace %s on regional cluster %s: %w", name, t.key, err)
	}
	labels := workspaceLabels(ws)
	labels[RouteNamespaceLabel] = "true"
	for k, v := range extra {
		labels[k] = v
	}
	nsObj = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	err = t.c.Create(ctx, nsObj)
	if apierrors.IsAlreadyExists(err) {
		nsObj = &corev1.Namespace{}
		err = t.c.Get(ctx, types.NamespacedName{Name: name}, nsObj)
	}
	if err != nil {
		return nil, fmt.Errorf("creating namespace %s on regional cluster %s: %w", name, t.key, err)
	}
	return nsObj, nil
}

// adopt moves the UID label of a namespace to the current workspace (a workspace recreated under the
// same name takes over what the sweeper has not removed yet).
func (g *Gateway) adopt(ctx context.Context, t *target, ws Workspace, nsObj *corev1.Namespace) error {
	if nsObj.Labels[WorkspaceUIDLabel] == string(ws.UID) {
		return nil
	}
	base := nsObj.DeepCopy()
	nsObj.Labels[WorkspaceUIDLabel] = string(ws.UID)
	if err := t.c.Patch(ctx, nsObj, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("labelling namespace %s on regional cluster %s: %w", nsObj.Name, t.key, err)
	}
	return nil
}
