package routing

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
)

// Regionals reaches regional clusters by their ClusterDeployment.
type Regionals interface {
	// Client returns a client of the regional cluster of ClusterDeployment key. An error for which
	// childcluster.IsUnreachable holds means the cluster cannot be reached now.
	Client(ctx context.Context, key types.NamespacedName) (client.Client, error)
}

// CacheRegionals adapts a common/childcluster Cache to Regionals. Use a Cache of its own, built with
// Scheme(), so that workspace teardown (which forgets child connections) leaves it alone.
type CacheRegionals struct {
	Cache *childcluster.Cache
}

// Client implements Regionals.
func (c CacheRegionals) Client(ctx context.Context, key types.NamespacedName) (client.Client, error) {
	cl, err := c.Cache.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		return nil, err
	}
	return cl.Client(), nil
}

// Options configure the Gateway API provider.
type Options struct {
	// GatewayNamespace and GatewayName locate the tenant Gateway on each regional cluster.
	GatewayNamespace, GatewayName string
	// DefaultRegional is the regional cluster of children whose ClusterDeployment has no KOF label.
	DefaultRegional RegionalRef
}

// Gateway is the Gateway API Provider: one HTTPRoute per HTTP endpoint and one TCPRoute per SSH or
// TCP endpoint, attached to the tenant Gateway of the regional cluster, in a namespace of the
// workspace there, with selector-less mirror Services as backends.
type Gateway struct {
	Regionals Regionals
	Options   Options

	mu    sync.Mutex
	pools map[string]*sync.Mutex // per regional Gateway: port allocation is serialised
}

var _ Provider = (*Gateway)(nil)

// infraError is missing routing infrastructure: reported, never a failure.
type infraError struct{ msg string }

func (e *infraError) Error() string { return e.msg }

func infra(format string, args ...any) error { return &infraError{msg: fmt.Sprintf(format, args...)} }

// target is a workspace's view of its regional cluster.
type target struct {
	key    types.NamespacedName
	c      client.Client
	gw     *gwv1.Gateway
	tenant Tenant
	pool   []gwv1.Listener
	// local is true when the regional cluster is the workspace's own cluster: the routes go into the
	// release namespace and point at the release's own Services (no mirrors, no namespace of ours).
	local bool
}

// connect finds the regional cluster, its Gateway and what the Gateway serves.
func (g *Gateway) connect(ctx context.Context, ws Workspace) (*target, error) {
	if ws.Cluster == nil {
		return nil, infra("the ClusterDeployment of the workspace is gone")
	}
	key, source, ok := RegionalCluster(ws.Cluster, g.Options.DefaultRegional)
	if !ok {
		return nil, infra("no regional cluster: ClusterDeployment %s/%s has no label %s and the operator has no --default-regional-cluster",
			ws.Cluster.Namespace, ws.Cluster.Name, RegionalClusterNameLabel)
	}
	c, err := g.Regionals.Client(ctx, key)
	if err != nil {
		if childcluster.IsUnreachable(err) {
			return nil, infra("regional cluster %s (named by %s) cannot be reached: %v", key, source, err)
		}
		return nil, fmt.Errorf("connecting to regional cluster %s: %w", key, err)
	}
	gw := &gwv1.Gateway{}
	gwKey := types.NamespacedName{Namespace: g.Options.GatewayNamespace, Name: g.Options.GatewayName}
	if err := c.Get(ctx, gwKey, gw); err != nil {
		switch {
		case meta.IsNoMatchError(err) || apierrors.IsNotFound(err) && isMissingKind(err):
			return nil, infra("the Gateway API CRDs are not installed on regional cluster %s", key)
		case apierrors.IsNotFound(err):
			return nil, infra("Gateway %s not found on regional cluster %s", gwKey, key)
		}
		return nil, fmt.Errorf("reading Gateway %s on regional cluster %s: %w", gwKey, key, err)
	}
	t := &target{key: key, c: c, gw: gw, pool: TCPPool(gw), local: key == ws.ClusterKey}
	if tenant, ok := TenantFromGateway(gw); ok {
		t.tenant = tenant
	} else {
		return nil, infra("Gateway %s on regional cluster %s has no wildcard HTTPS or HTTP listener (hostname *.<tenant-domain>)", gwKey, key)
	}
	return t, nil
}

// isMissingKind tells a 404 for a resource type the server does not serve from a missing object.
func isMissingKind(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d == nil || d.Name == ""
}

// Ensure implements Provider.
func (g *Gateway) Ensure(ctx context.Context, ws Workspace) (Result, error) {
	res := Result{Access: make([]workspacesv1.AccessStatus, len(ws.Endpoints))}
	for i, ep := range ws.Endpoints {
		res.Access[i] = workspacesv1.AccessStatus{Name: ep.Name, Protocol: ep.Protocol}
	}
	t, err := g.connect(ctx, ws)
	if err != nil {
		return res, reportInfra(&res, err)
	}
	// The route namespace is also the claim of the short hostnames among same-named workspaces behind
	// this Gateway. A workspace routed on its own cluster claims one too (it stays empty: its routes go
	// into the release namespace, next to the release's Services), so the rule is the same for both.
	ns, qualified, err := g.claimNamespace(ctx, t, ws)
	if err != nil {
		return res, reportInfra(&res, err)
	}
	if t.local {
		ns = ws.ReleaseNamespace
	} else if err := g.ensureServices(ctx, t, ws, ns); err != nil {
		return res, err
	}
	if err := g.ensureHTTP(ctx, t, ws, ns, qualified, &res); err != nil {
		return res, err
	}
	if err := g.ensureTCP(ctx, t, ws, ns, &res); err != nil {
		return res, err
	}
	return res, g.pruneRoutes(ctx, t.c, ws, ns, !t.local)
}

// reportInfra turns missing infrastructure into the result (every entry says why it is not ready)
// and returns other errors.
func reportInfra(res *Result, err error) error {
	var ie *infraError
	if !errors.As(err, &ie) {
		return err
	}
	res.InfraNotReady = ie.msg
	for i := range res.Access {
		res.Access[i].Message = ie.msg
	}
	return nil
}

// owned reports whether an object's identity labels name the workspace.
func owned(o metav1.Object, ws Workspace) bool {
	l := o.GetLabels()
	return l[workspacesv1.WorkspaceLabel] == ws.Name && l[workspacesv1.WorkspaceNamespaceLabel] == ws.Namespace
}

// ownedRouteNamespace reports whether a namespace is a route namespace of the workspace: its
// identity labels name the workspace and it carries RouteNamespaceLabel (a release namespace never
// does).
func ownedRouteNamespace(n *corev1.Namespace, ws Workspace) bool {
	return isRouteNamespace(n) && owned(n, ws)
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
// ws-<name> is first come, first served among same-named workspaces of different namespaces behind
// this regional cluster; the others get ws-<name>-<qualifier>, and keep it (a namespace that is
// already theirs is found first).
func (g *Gateway) claimNamespace(ctx context.Context, t *target, ws Workspace) (string, bool, error) {
	qualified := RouteNamespace(ws.Name, ws.Namespace, true)
	short := RouteNamespace(ws.Name, ws.Namespace, false)
	nsObj := &corev1.Namespace{}
	err := t.c.Get(ctx, types.NamespacedName{Name: qualified}, nsObj)
	if err == nil && ownedRouteNamespace(nsObj, ws) {
		return qualified, true, usable(nsObj, t.key)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return "", false, fmt.Errorf("reading namespace %s on regional cluster %s: %w", qualified, t.key, err)
	}
	for _, cand := range []struct {
		name      string
		qualified bool
	}{{short, false}, {qualified, true}} {
		nsObj, err := g.getOrCreateNamespace(ctx, t, ws, cand.name)
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

// usable reports a namespace that is being deleted (a previous workspace's, being swept).
func usable(ns *corev1.Namespace, key types.NamespacedName) error {
	if !ns.DeletionTimestamp.IsZero() {
		return infra("namespace %s on regional cluster %s is still being deleted", ns.Name, key)
	}
	return nil
}

func (g *Gateway) getOrCreateNamespace(ctx context.Context, t *target, ws Workspace, name string) (*corev1.Namespace, error) {
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

// ensureServices makes the selector-less mirror Services: one per backend Service name, with the
// ports of every endpoint it serves.
func (g *Gateway) ensureServices(ctx context.Context, t *target, ws Workspace, ns string) error {
	want := map[string][]corev1.ServicePort{}
	for _, ep := range ws.Endpoints {
		name := BackendService(ws.Release, ep)
		dup := false
		for _, p := range want[name] {
			dup = dup || p.Port == ep.Port
		}
		if !dup {
			want[name] = append(want[name], corev1.ServicePort{Name: ep.Name, Port: ep.Port, TargetPort: intstr.FromInt32(ep.Port), Protocol: corev1.ProtocolTCP})
		}
	}
	for name, ports := range want {
		svc := &corev1.Service{}
		err := t.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, svc)
		if apierrors.IsNotFound(err) {
			svc = &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: workspaceLabels(ws)},
				Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: ports},
			}
			if err := t.c.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating mirror Service %s/%s on regional cluster %s: %w", ns, name, t.key, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("reading mirror Service %s/%s on regional cluster %s: %w", ns, name, t.key, err)
		}
		if samePorts(svc.Spec.Ports, ports) && len(svc.Spec.Selector) == 0 {
			continue
		}
		base := svc.DeepCopy()
		svc.Spec.Ports, svc.Spec.Selector = ports, nil
		if err := t.c.Patch(ctx, svc, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("updating mirror Service %s/%s on regional cluster %s: %w", ns, name, t.key, err)
		}
	}
	return nil
}

func samePorts(have, want []corev1.ServicePort) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range want {
		if have[i].Name != want[i].Name || have[i].Port != want[i].Port || have[i].TargetPort != want[i].TargetPort {
			return false
		}
	}
	return true
}

// parentRef attaches a route to one listener of the tenant Gateway.
func (t *target) parentRef(section gwv1.SectionName) gwv1.ParentReference {
	group, kind := gwv1.Group(gwv1.GroupName), gwv1.Kind("Gateway")
	ns := gwv1.Namespace(t.gw.Namespace)
	return gwv1.ParentReference{Group: &group, Kind: &kind, Namespace: &ns, Name: gwv1.ObjectName(t.gw.Name), SectionName: &section}
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
		if other := hostTakenBy(all.Items, host, ns, ep.Name, t.gw); other != "" {
			a.Message = fmt.Sprintf("the hostname %s is already routed by HTTPRoute %s on regional cluster %s", host, other, t.key)
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

// hostTakenBy names another HTTPRoute attached to gw that serves host, or "".
func hostTakenBy(routes []gwv1.HTTPRoute, host, ns, name string, gw *gwv1.Gateway) string {
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
			if strings.EqualFold(string(h), host) {
				return rt.Namespace + "/" + rt.Name
			}
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
	rt := &gwv1.HTTPRoute{}
	err := t.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: ep.Name}, rt)
	if apierrors.IsNotFound(err) {
		rt = &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ep.Name, Labels: labels}, Spec: want}
		if err := t.c.Create(ctx, rt); err != nil {
			return nil, fmt.Errorf("creating HTTPRoute %s/%s on regional cluster %s: %w", ns, ep.Name, t.key, err)
		}
		return rt, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading HTTPRoute %s/%s on regional cluster %s: %w", ns, ep.Name, t.key, err)
	}
	if sameHTTP(rt.Spec, want) {
		return rt, nil
	}
	base := rt.DeepCopy()
	rt.Spec = want
	rt.Labels = labels
	if err := t.c.Patch(ctx, rt, client.MergeFrom(base)); err != nil {
		return nil, fmt.Errorf("updating HTTPRoute %s/%s on regional cluster %s: %w", ns, ep.Name, t.key, err)
	}
	return rt, nil
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
	var routes gwv1.TCPRouteList
	if err := t.c.List(ctx, &routes); err != nil {
		if meta.IsNoMatchError(err) {
			return reportInfraOn(res, idx, fmt.Sprintf("the Gateway API TCPRoute CRD (gateway.networking.k8s.io/v1) is not installed on regional cluster %s", t.key))
		}
		return fmt.Errorf("listing TCPRoutes on regional cluster %s: %w", t.key, err)
	}
	claims := ClaimsOf(routes.Items, t.gw, t.pool)
	for _, i := range idx {
		ep := ws.Endpoints[i]
		a := &res.Access[i]
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
	rt := &gwv1.TCPRoute{}
	err := t.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: ep.Name}, rt)
	if apierrors.IsNotFound(err) {
		rt = &gwv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ep.Name, Labels: labels}, Spec: want}
		if err := t.c.Create(ctx, rt); err != nil {
			return nil, fmt.Errorf("creating TCPRoute %s/%s on regional cluster %s: %w", ns, ep.Name, t.key, err)
		}
		return rt, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading TCPRoute %s/%s on regional cluster %s: %w", ns, ep.Name, t.key, err)
	}
	if sameParents(rt.Spec.ParentRefs, want.ParentRefs) && len(rt.Spec.Rules) == 1 && sameBackends(rt.Spec.Rules[0].BackendRefs, want.Rules[0].BackendRefs) {
		return rt, nil
	}
	base := rt.DeepCopy()
	rt.Spec = want
	rt.Labels = labels
	if err := t.c.Patch(ctx, rt, client.MergeFrom(base)); err != nil {
		return nil, fmt.Errorf("updating TCPRoute %s/%s on regional cluster %s: %w", ns, ep.Name, t.key, err)
	}
	return rt, nil
}

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
	for _, ep := range ws.Endpoints {
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
	var tr gwv1.TCPRouteList
	if err := c.List(ctx, &tr, client.InNamespace(ns), sel); err == nil {
		for i := range tr.Items {
			if p, ok := wantRoute[tr.Items[i].Name]; !ok || p == workspacesv1.EndpointProtocolHTTP {
				if err := c.Delete(ctx, &tr.Items[i]); client.IgnoreNotFound(err) != nil {
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
		for _, list := range []client.ObjectList{&gwv1.HTTPRouteList{}, &gwv1.TCPRouteList{}} {
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
