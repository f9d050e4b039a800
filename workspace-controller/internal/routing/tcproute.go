package routing

// TCPRoutes on the Gateway's pool of TCP listeners.

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// poolLock serialises port allocation on one regional Gateway within this process; the
// oldest-claim rule of Allocate settles a race with any other writer.
func (g *Gateway) poolLock(t *target) *sync.Mutex {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pools == nil {
		g.pools = map[string]*sync.Mutex{}
	}
	k := t.key.String() + "|" + t.gw.Namespace + "/" + t.gw.Name
	if g.pools[k] == nil {
		g.pools[k] = &sync.Mutex{}
	}
	return g.pools[k]
}

// ensureTCP gives each SSH and TCP endpoint a port of the pool, through one TCPRoute each.
func (g *Gateway) ensureTCP(ctx context.Context, t *target, ws Workspace, ns string, res *Result) error {
	var idx []int
	for i, ep := range ws.Endpoints {
		if ep.Protocol == workspacesv1.EndpointProtocolSSH || ep.Protocol == workspacesv1.EndpointProtocolTCP {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	if len(t.pool) == 0 {
		msg := fmt.Sprintf("Gateway %s/%s on regional cluster %s has no TCP listeners: the port pool of SSH and TCP endpoints", t.gw.Namespace, t.gw.Name, t.key)
		res.InfraNotReady = msg
		for _, i := range idx {
			res.Access[i].Message = msg
		}
		return nil
	}
	lock := g.poolLock(t)
	lock.Lock()
	defer lock.Unlock()
	routes, err := listTCPRoutes(ctx, t.c)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return reportInfraOn(res, idx, fmt.Sprintf("the Gateway API TCPRoute CRD (gateway.networking.k8s.io v1 or v1alpha2) is not installed on regional cluster %s", t.key))
		}
		return fmt.Errorf("listing TCPRoutes on regional cluster %s: %w", t.key, err)
	}
	claims := ClaimsOf(routes, t.gw, t.pool)
	denied := ws.portDenied()
	for _, i := range idx {
		ep := ws.Endpoints[i]
		a := &res.Access[i]
		if denied[ep.Name] {
			a.Message = ws.PortsMessage // its route, if it had one, goes in pruneRoutes
			continue
		}
		ours := types.NamespacedName{Namespace: ns, Name: ep.Name}
		l, ok := Allocate(t.pool, claims, ours)
		if !ok {
			a.Message = fmt.Sprintf("no free port: all %d TCP listeners of Gateway %s/%s on regional cluster %s are taken", len(t.pool), t.gw.Namespace, t.gw.Name, t.key)
			continue
		}
		rt, err := g.applyTCPRoute(ctx, t, ws, ns, ep, l.Name)
		if err != nil {
			return err
		}
		// Record the claim, so the next endpoint of this workspace gets another listener.
		kept := claims[:0]
		for _, c := range claims {
			if c.Route != ours {
				kept = append(kept, c)
			}
		}
		claims = append(kept, Claim{Route: ours, Listener: l.Name, Created: rt.CreationTimestamp})
		a.URL = PortURL(ep.Protocol, t.tenant.Domain, int32(l.Port))
		a.Ready, a.Message = RouteReady(ns, rt.Generation, rt.Status.Parents, t.gw, l.Name)
	}
	return nil
}

func reportInfraOn(res *Result, idx []int, msg string) error {
	res.InfraNotReady = msg
	for _, i := range idx {
		res.Access[i].Message = msg
	}
	return nil
}

func (g *Gateway) applyTCPRoute(ctx context.Context, t *target, ws Workspace, ns string, ep workspacesv1.AccessEndpoint, section gwv1.SectionName) (*gwv1.TCPRoute, error) {
	labels := workspaceLabels(ws)
	labels[EndpointLabel] = ep.Name
	want := gwv1.TCPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{t.parentRef(section)}},
		Rules:           []gwv1.TCPRouteRule{{BackendRefs: []gwv1.BackendRef{backendRef(BackendService(ws.Release, ep), ep.Port)}}},
	}
	same := func(rt *gwv1.TCPRoute) bool {
		return sameParents(rt.Spec.ParentRefs, want.ParentRefs) && len(rt.Spec.Rules) == 1 &&
			sameBackends(rt.Spec.Rules[0].BackendRefs, want.Rules[0].BackendRefs)
	}
	v, err := tcpRouteVersion(t.c)
	if err != nil {
		return nil, fmt.Errorf("finding the TCPRoute version of regional cluster %s: %w", t.key, err)
	}
	if v == gwv1alpha2.GroupVersion.Version {
		// Gateway API 1.4 or 1.5: the same route in the version the cluster serves.
		rt, err := applyRoute(ctx, t, ns, ep.Name, "TCPRoute", labels,
			func(rt *gwv1alpha2.TCPRoute) bool { return same(tcpRouteFromV1alpha2(rt)) },
			func(rt *gwv1alpha2.TCPRoute) { rt.Spec = tcpRouteSpecToV1alpha2(want) })
		if err != nil {
			return nil, err
		}
		return tcpRouteFromV1alpha2(rt), nil
	}
	return applyRoute(ctx, t, ns, ep.Name, "TCPRoute", labels, same, func(rt *gwv1.TCPRoute) { rt.Spec = want })
}
