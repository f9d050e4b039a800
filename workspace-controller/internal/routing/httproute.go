package routing

// HTTPRoutes, and the parent and backend references every route uses.

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// parentRef attaches a route to one listener of the tenant Gateway.
func (t *target) parentRef(section gwv1.SectionName) gwv1.ParentReference {
	group, kind := gwv1.Group(gwv1.GroupName), gwv1.Kind("Gateway")
	ns := gwv1.Namespace(t.gw.Namespace)
	return gwv1.ParentReference{Group: &group, Kind: &kind, Namespace: &ns, Name: gwv1.ObjectName(t.gw.Name), SectionName: &section}
}

// applyRoute makes the route kind/name in ns on the regional cluster, or puts back its spec and
// labels (set) when same says the route there differs from what is wanted. HTTPRoutes and TCPRoutes
// share it.
func applyRoute[R any, P interface {
	*R
	client.Object
}](ctx context.Context, t *target, ns, name, kind string, labels map[string]string, same func(P) bool, set func(P)) (P, error) {
	rt := P(new(R))
	err := t.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, rt)
	if apierrors.IsNotFound(err) {
		rt = P(new(R))
		rt.SetNamespace(ns)
		rt.SetName(name)
		rt.SetLabels(labels)
		set(rt)
		if err := t.c.Create(ctx, rt); err != nil {
			return nil, fmt.Errorf("creating %s %s/%s on regional cluster %s: %w", kind, ns, name, t.key, err)
		}
		return rt, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s/%s on regional cluster %s: %w", kind, ns, name, t.key, err)
	}
	if same(rt) {
		return rt, nil
	}
	base := rt.DeepCopyObject().(client.Object)
	set(rt)
	rt.SetLabels(labels)
	if err := t.c.Patch(ctx, rt, client.MergeFrom(base)); err != nil {
		return nil, fmt.Errorf("updating %s %s/%s on regional cluster %s: %w", kind, ns, name, t.key, err)
	}
	return rt, nil
}

func backendRef(name string, port int32) gwv1.BackendRef {
	group, kind, p, w := gwv1.Group(""), gwv1.Kind("Service"), gwv1.PortNumber(port), int32(1)
	return gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Group: &group, Kind: &kind, Name: gwv1.ObjectName(name), Port: &p}, Weight: &w}
}

// sameParent compares the fields of a parent reference the provider sets.
func sameParents(have, want []gwv1.ParentReference) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range want {
		h, w := have[i], want[i]
		if h.Name != w.Name || h.Namespace == nil || *h.Namespace != *w.Namespace || h.SectionName == nil || *h.SectionName != *w.SectionName {
			return false
		}
	}
	return true
}

func sameBackends(have, want []gwv1.BackendRef) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range want {
		h, w := have[i], want[i]
		if h.Name != w.Name || h.Port == nil || *h.Port != *w.Port || (h.Kind != nil && *h.Kind != *w.Kind) {
			return false
		}
	}
	return true
}

// ensureHTTP makes one HTTPRoute per HTTP endpoint and fills their entries.
func (g *Gateway) ensureHTTP(ctx context.Context, t *target, ws Workspace, ns string, qualified bool, res *Result) error {
	var all gwv1.HTTPRouteList
	hasHTTP := false
	for _, ep := range ws.Endpoints {
		hasHTTP = hasHTTP || ep.Protocol == workspacesv1.EndpointProtocolHTTP
	}
	if !hasHTTP {
		return nil
	}
	if err := t.c.List(ctx, &all); err != nil {
		if meta.IsNoMatchError(err) {
			return reportInfra(res, infra("the Gateway API HTTPRoute CRD is not installed on regional cluster %s", t.key))
		}
		return fmt.Errorf("listing HTTPRoutes on regional cluster %s: %w", t.key, err)
	}
	base := hostBase(ws.Name, ws.Namespace, qualified)
	primary := true
	for i, ep := range ws.Endpoints {
		if ep.Protocol != workspacesv1.EndpointProtocolHTTP {
			continue
		}
		a := &res.Access[i]
		label := HostLabel(base, ep.Name, primary)
		primary = false
		if msg := CheckHostLabel(label); msg != "" {
			a.Message = msg
			continue
		}
		host := label + "." + t.tenant.Domain
		if other := hostTakenBy(all.Items, host, ns, ep.Name, t.gw, ws.Namespace); other != "" {
			a.Message = fmt.Sprintf("the hostname %s is already routed by %s on regional cluster %s", host, other, t.key)
			continue
		}
		a.URL = HTTPURL(t.tenant, label)
		rt, err := g.applyHTTPRoute(ctx, t, ws, ns, ep, host)
		if err != nil {
			return err
		}
		a.Ready, a.Message = RouteReady(ns, rt.Generation, rt.Status.Parents, t.gw, t.tenant.Listener)
	}
	return nil
}

// hostTakenBy names another HTTPRoute attached to gw that serves host, or "", as the tenant of viewer
// (the asking workspace's namespace) may read it: by its name when it routes a workspace of viewer,
// and as another namespace's otherwise, so that a status never tells one team what another runs.
func hostTakenBy(routes []gwv1.HTTPRoute, host, ns, name string, gw *gwv1.Gateway, viewer string) string {
	for i := range routes {
		rt := &routes[i]
		if rt.Namespace == ns && rt.Name == name {
			continue
		}
		attached := false
		for _, ref := range rt.Spec.ParentRefs {
			attached = attached || refersTo(ref, rt.Namespace, gw)
		}
		if !attached {
			continue
		}
		for _, h := range rt.Spec.Hostnames {
			if !strings.EqualFold(string(h), host) {
				continue
			}
			if rt.Labels[workspacesv1.WorkspaceNamespaceLabel] == viewer {
				return "HTTPRoute " + rt.Namespace + "/" + rt.Name
			}
			return "an HTTPRoute of another namespace"
		}
	}
	return ""
}

func (g *Gateway) applyHTTPRoute(ctx context.Context, t *target, ws Workspace, ns string, ep workspacesv1.AccessEndpoint, host string) (*gwv1.HTTPRoute, error) {
	labels := workspaceLabels(ws)
	labels[EndpointLabel] = ep.Name
	want := gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{t.parentRef(t.tenant.Listener)}},
		Hostnames:       []gwv1.Hostname{gwv1.Hostname(host)},
		Rules:           []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: backendRef(BackendService(ws.Release, ep), ep.Port)}}}},
	}
	return applyRoute(ctx, t, ns, ep.Name, "HTTPRoute", labels,
		func(rt *gwv1.HTTPRoute) bool { return sameHTTP(rt.Spec, want) },
		func(rt *gwv1.HTTPRoute) { rt.Spec = want })
}

func sameHTTP(have, want gwv1.HTTPRouteSpec) bool {
	if !sameParents(have.ParentRefs, want.ParentRefs) || len(have.Hostnames) != 1 || have.Hostnames[0] != want.Hostnames[0] || len(have.Rules) != 1 {
		return false
	}
	var hb []gwv1.BackendRef
	for _, b := range have.Rules[0].BackendRefs {
		hb = append(hb, b.BackendRef)
	}
	return sameBackends(hb, []gwv1.BackendRef{want.Rules[0].BackendRefs[0].BackendRef}) && len(have.Rules[0].Filters) == 0
}
