package routing

// Removing routes, mirror Services and route namespaces.

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
)

// ownSelector selects what the provider made for the workspace: its identity labels and
// app.kubernetes.io/managed-by: workspace-controller (a chart's own objects in a release namespace may
// carry the workspace's labels, never this).
func ownSelector(ws Workspace) client.MatchingLabels {
	return client.MatchingLabels{workspacesv1.WorkspaceLabel: ws.Name, workspacesv1.WorkspaceNamespaceLabel: ws.Namespace, ManagedByLabel: ManagedByValue}
}

// pruneRoutes deletes the workspace's routes and, with mirrors, its mirror Services in ns that no
// endpoint wants any more. In a release namespace (mirrors false) the Services are the release's and
// are never touched.
func (g *Gateway) pruneRoutes(ctx context.Context, c client.Client, ws Workspace, ns string, mirrors bool) error {
	wantRoute := map[string]workspacesv1.EndpointProtocol{}
	wantSvc := map[string]bool{}
	denied := ws.portDenied()
	for _, ep := range ws.Endpoints {
		if denied[ep.Name] {
			continue // past the namespace's cap: its port is given back
		}
		wantRoute[ep.Name] = ep.Protocol
		wantSvc[BackendService(ws.Release, ep)] = true
	}
	sel := ownSelector(ws)
	var hr gwv1.HTTPRouteList
	if err := c.List(ctx, &hr, client.InNamespace(ns), sel); err == nil {
		for i := range hr.Items {
			if wantRoute[hr.Items[i].Name] != workspacesv1.EndpointProtocolHTTP {
				if err := c.Delete(ctx, &hr.Items[i]); client.IgnoreNotFound(err) != nil {
					return err
				}
			}
		}
	}
	if tr, err := newTCPRouteList(c); err == nil && c.List(ctx, tr, client.InNamespace(ns), sel) == nil {
		items, err := meta.ExtractList(tr)
		if err != nil {
			return err
		}
		for _, o := range items {
			obj, ok := o.(client.Object)
			if !ok {
				continue
			}
			if p, ok := wantRoute[obj.GetName()]; !ok || p == workspacesv1.EndpointProtocolHTTP {
				if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
					return err
				}
			}
		}
	}
	if !mirrors {
		return nil
	}
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs, client.InNamespace(ns), sel); err != nil {
		return fmt.Errorf("listing mirror Services in %s: %w", ns, err)
	}
	for i := range svcs.Items {
		if !wantSvc[svcs.Items[i].Name] {
			if err := c.Delete(ctx, &svcs.Items[i]); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}

// Remove implements Provider: routes first (a TCPRoute gone is a port freed), then the mirror
// Services, then the namespaces. It waits for the routes only.
func (g *Gateway) Remove(ctx context.Context, ws Workspace) (bool, error) {
	cd := ws.Cluster
	if cd == nil {
		// The ClusterDeployment is gone with its labels: only the default can still name the regional
		// cluster. Routes on a cluster its label named are left to the sweeper.
		cd = &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ws.ClusterKey.Namespace, Name: ws.ClusterKey.Name}}
	}
	key, _, ok := RegionalCluster(cd, g.Options.DefaultRegional)
	if !ok {
		return true, nil
	}
	// A regional cluster the tenancy rule does not allow is never touched: Ensure published nothing
	// there since the rule stopped allowing it, and what it published before is left to the sweeper of
	// a reference that is allowed (or to the owners of that cluster).
	if why, err := allowRegional(ctx, g.Regionals, cd, key); err != nil || why != "" {
		return err == nil, err
	}
	c, err := g.Regionals.Client(ctx, key)
	if err != nil {
		if childcluster.IsUnreachable(err) {
			return true, nil
		}
		return false, err
	}
	sel := ownSelector(ws)
	if key == ws.ClusterKey {
		// The workspace's own cluster: its routes are in the release namespace, which is the release's
		// (the workspace's deletion removes it after the release); then the empty route namespace
		// that claimed the hostnames.
		if gone, err := deleteRoutes(ctx, c, ws.ReleaseNamespace, sel); err != nil || !gone {
			return false, err
		}
	}
	return RemoveFrom(ctx, c, sel)
}

// RemoveFrom deletes, on one regional cluster, the routes, mirror Services and route namespaces
// (those labelled RouteNamespaceLabel) that match sel, in that order, and reports whether the routes
// are gone. A namespace without RouteNamespaceLabel (a release namespace) is never touched.
func RemoveFrom(ctx context.Context, c client.Client, sel client.MatchingLabels) (bool, error) {
	var nss corev1.NamespaceList
	withRoute := client.MatchingLabels{RouteNamespaceLabel: "true"}
	for k, v := range sel {
		withRoute[k] = v
	}
	if err := c.List(ctx, &nss, withRoute); err != nil {
		return false, fmt.Errorf("listing route namespaces: %w", err)
	}
	sort.Slice(nss.Items, func(i, j int) bool { return nss.Items[i].Name < nss.Items[j].Name })
	gone := true
	for _, n := range nss.Items {
		ok, err := removeNamespace(ctx, c, n, sel)
		if err != nil {
			return false, err
		}
		gone = gone && ok
	}
	return gone, nil
}

// removeNamespace deletes the routes in one route namespace and, once they are gone, its mirror
// Services and the namespace itself (not awaited). It reports whether the routes are gone. A
// namespace that is not a route namespace is refused: a release namespace is deleted by its
// workspace only.
func removeNamespace(ctx context.Context, c client.Client, n corev1.Namespace, sel client.MatchingLabels) (bool, error) {
	if !isRouteNamespace(&n) {
		return false, fmt.Errorf("namespace %s is not a route namespace (no label %s=true): not removed", n.Name, RouteNamespaceLabel)
	}
	in := client.InNamespace(n.Name)
	if gone, err := deleteRoutes(ctx, c, n.Name, sel); err != nil || !gone {
		return false, err // the namespace waits until its routes are gone
	}
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs, in, sel); err != nil {
		return false, fmt.Errorf("listing mirror Services in %s: %w", n.Name, err)
	}
	for i := range svcs.Items {
		if err := c.Delete(ctx, &svcs.Items[i]); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("deleting mirror Service %s/%s: %w", n.Name, svcs.Items[i].Name, err)
		}
	}
	if n.DeletionTimestamp.IsZero() {
		if err := c.Delete(ctx, &n); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("deleting namespace %s: %w", n.Name, err)
		}
	}
	return true, nil
}

// deleteRoutes deletes the HTTPRoutes and TCPRoutes matching sel in one namespace and reports whether
// none is left (routes without finalizers go at once).
func deleteRoutes(ctx context.Context, c client.Client, ns string, sel client.MatchingLabels) (bool, error) {
	in := client.InNamespace(ns)
	for pass := 0; pass < 2; pass++ {
		remaining := 0
		lists, err := routeLists(c)
		if err != nil {
			return false, err
		}
		for _, list := range lists {
			if err := c.List(ctx, list, in, sel); err != nil {
				if meta.IsNoMatchError(err) {
					continue
				}
				return false, fmt.Errorf("listing routes in %s: %w", ns, err)
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				return false, err
			}
			for _, o := range items {
				obj, ok := o.(client.Object)
				if !ok {
					continue
				}
				remaining++
				if obj.GetDeletionTimestamp().IsZero() {
					if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
						return false, fmt.Errorf("deleting route %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
					}
				}
			}
		}
		if remaining == 0 {
			return true, nil
		}
	}
	return false, nil
}

// routeLists are empty lists of the HTTPRoutes and of the TCPRoutes in the version the cluster serves
// (tcpRouteVersion); without TCPRoutes, of the HTTPRoutes alone.
func routeLists(c client.Client) ([]client.ObjectList, error) {
	tr, err := newTCPRouteList(c)
	switch {
	case meta.IsNoMatchError(err):
		return []client.ObjectList{&gwv1.HTTPRouteList{}}, nil
	case err != nil:
		return nil, fmt.Errorf("finding the TCPRoute version: %w", err)
	}
	return []client.ObjectList{&gwv1.HTTPRouteList{}, tr}, nil
}
