package routing

// The mesh modes on the regional cluster and the child (internal/mesh): the mirror namespace named
// like the release namespace, the istio.io/global Services, the per-child waypoint check.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/mesh"
)

// Clusters reaches child clusters by their ClusterDeployment (Regionals' Client; CacheRegionals over
// the child cache is one).
type Clusters interface {
	Client(ctx context.Context, key types.NamespacedName) (client.Client, error)
}

// claimMirrorNamespace finds or makes the mirror namespace of a workspace in a mesh mode: named
// exactly like its release namespace on the child, since Istio multi-cluster joins the Services of
// both clusters by namespace and name. It is a route namespace of the workspace (RouteNamespaceLabel
// and the owner labels, so Remove and the sweeper delete it) with the mode's data-plane label only.
// A namespace of that name that is not this workspace's mirror namespace (another tenant's same-named
// workspace behind this regional cluster, or anything else) is never shared: the routes wait, and
// the message says why without naming whose it is.
func (g *Gateway) claimMirrorNamespace(ctx context.Context, t *target, ws Workspace) (string, error) {
	name := ws.ReleaseNamespace
	if name == "" {
		return "", fmt.Errorf("mesh mode %s: the workspace's release namespace is not known", g.Options.Mesh.Mode)
	}
	want := g.Options.Mesh.MirrorNamespaceLabels()
	nsObj, err := g.getOrCreateNamespace(ctx, t, ws, name, want)
	if err != nil {
		return "", err
	}
	if !ownedRouteNamespace(nsObj, ws) {
		return "", infra("namespace %s on regional cluster %s is not this workspace's mirror namespace and is not shared: in mesh mode %s the mirror Services must be in a namespace named like the release namespace on the child (Istio multi-cluster joins Services by namespace and name); rename the workspace or remove that namespace",
			name, t.key, g.Options.Mesh.Mode)
	}
	if err := usable(nsObj, t.key); err != nil {
		return "", err
	}
	if err := g.adopt(ctx, t, ws, nsObj); err != nil {
		return "", err
	}
	// The mode's data-plane label, and no other mode's: a switch from ambient to sidecar must not
	// leave both. The namespace is the workspace's own, so the other mode's labels go.
	base := nsObj.DeepCopy()
	changed := false
	for _, k := range []string{mesh.DataplaneModeLabel, mesh.InjectionLabel, mesh.UseWaypointLabel, mesh.UseWaypointNamespaceLabel, mesh.IngressUseWaypointLabel} {
		if v, ok := want[k]; ok && nsObj.Labels[k] != v {
			nsObj.Labels[k], changed = v, true
		} else if _, has := nsObj.Labels[k]; !ok && has {
			delete(nsObj.Labels, k)
			changed = true
		}
	}
	if changed {
		if err := t.c.Patch(ctx, nsObj, client.MergeFrom(base)); err != nil {
			return "", fmt.Errorf("labelling namespace %s on regional cluster %s: %w", name, t.key, err)
		}
	}
	return name, nil
}

// dropMirrorNamespace removes the workspace's mirror namespace named like its release namespace when
// no mesh mode wants it (the controller ran in a mesh mode before): its routes would otherwise keep
// their TCP ports. Anything else of that name is left alone.
func (g *Gateway) dropMirrorNamespace(ctx context.Context, t *target, ws Workspace) error {
	if ws.ReleaseNamespace == "" {
		return nil
	}
	nsObj := &corev1.Namespace{}
	err := t.c.Get(ctx, types.NamespacedName{Name: ws.ReleaseNamespace}, nsObj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading namespace %s on regional cluster %s: %w", ws.ReleaseNamespace, t.key, err)
	}
	if !ownedRouteNamespace(nsObj, ws) {
		return nil
	}
	_, err = removeNamespace(ctx, t.c, *nsObj, ownSelector(ws))
	return err
}

// labelChildServices gives the child's Services of the endpoints, in the release namespace, the
// mode's Service labels (istio.io/global), where missing; other labels are left alone. A Service the
// release has not made (yet) is skipped: the next pass labels it.
func (g *Gateway) labelChildServices(ctx context.Context, ws Workspace) error {
	want := g.Options.Mesh.ServiceLabels()
	c, err := g.childClient(ctx, ws)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, ep := range ws.Endpoints {
		name := BackendService(ws.Release, ep)
		if seen[name] {
			continue
		}
		seen[name] = true
		svc := &corev1.Service{}
		err := c.Get(ctx, types.NamespacedName{Namespace: ws.ReleaseNamespace, Name: name}, svc)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading Service %s/%s on the child cluster of ClusterDeployment %s: %w", ws.ReleaseNamespace, name, ws.ClusterKey, err)
		}
		if hasLabels(svc.Labels, want) {
			continue
		}
		base := svc.DeepCopy()
		if svc.Labels == nil {
			svc.Labels = map[string]string{}
		}
		for k, v := range want {
			svc.Labels[k] = v
		}
		if err := c.Patch(ctx, svc, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("labelling Service %s/%s on the child cluster of ClusterDeployment %s: %w", ws.ReleaseNamespace, name, ws.ClusterKey, err)
		}
	}
	return nil
}

func (g *Gateway) childClient(ctx context.Context, ws Workspace) (client.Client, error) {
	if g.Children == nil {
		return nil, infra("mesh mode %s needs the child clusters, and this provider has none", g.Options.Mesh.Mode)
	}
	c, err := g.Children.Client(ctx, ws.ClusterKey)
	if err != nil {
		if childcluster.IsUnreachable(err) {
			return nil, infra("the child cluster of ClusterDeployment %s cannot be reached: %v", ws.ClusterKey, err)
		}
		return nil, fmt.Errorf("connecting to the child cluster of ClusterDeployment %s: %w", ws.ClusterKey, err)
	}
	return c, nil
}

// waypointNotReady checks, in the waypoint mode, that the per-child waypoint (a Gateway
// <cluster>-waypoint in the waypoint namespace) exists and is Programmed on the regional cluster and
// on the child: without it the release namespace's traffic, which names it, goes nowhere. It returns
// "" when both are, else which one is missing or not programmed. The operator never makes waypoints:
// the onboarding of a cluster does.
func (g *Gateway) waypointNotReady(ctx context.Context, t *target, ws Workspace) (string, error) {
	if g.Options.Mesh.Mode != mesh.Waypoint {
		return "", nil
	}
	key := types.NamespacedName{Namespace: g.Options.Mesh.WaypointNamespace, Name: mesh.WaypointName(ws.ClusterKey.Name)}
	why, err := waypointOn(ctx, t.c, key, fmt.Sprintf("regional cluster %s", t.key))
	if why != "" || err != nil {
		return why, err
	}
	c, err := g.childClient(ctx, ws)
	if err != nil {
		return "", err
	}
	return waypointOn(ctx, c, key, fmt.Sprintf("child cluster (ClusterDeployment %s)", ws.ClusterKey))
}

// waypointOn reads the waypoint Gateway key through c as unstructured (a child client has no Gateway
// API in its scheme) and says what is wrong with it on where.
func waypointOn(ctx context.Context, c client.Client, key types.NamespacedName, where string) (string, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: gwv1.GroupName, Version: gwv1.GroupVersion.Version, Kind: "Gateway"})
	err := c.Get(ctx, key, u)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err) && isMissingKind(err):
		return fmt.Sprintf("per-child waypoint %s not found on the %s: the Gateway API CRDs are not installed there", key, where), nil
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("per-child waypoint %s not found on the %s", key, where), nil
	case err != nil:
		return "", fmt.Errorf("reading waypoint %s on the %s: %w", key, where, err)
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, o := range conds {
		m, ok := o.(map[string]any)
		if ok && m["type"] == string(gwv1.GatewayConditionProgrammed) && m["status"] == string(metav1.ConditionTrue) {
			return "", nil
		}
	}
	return fmt.Sprintf("per-child waypoint %s on the %s is not programmed yet", key, where), nil
}

// hasLabels reports whether have carries every label of want.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
