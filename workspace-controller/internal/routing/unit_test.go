package routing

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

func listener(name string, proto gwv1.ProtocolType, host string, port int32) gwv1.Listener {
	l := gwv1.Listener{Name: gwv1.SectionName(name), Protocol: proto, Port: gwv1.PortNumber(port)}
	if host != "" {
		h := gwv1.Hostname(host)
		l.Hostname = &h
	}
	return l
}

func gatewayWith(ls ...gwv1.Listener) *gwv1.Gateway {
	return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "gw-ns", Name: "gw"}, Spec: gwv1.GatewaySpec{Listeners: ls}}
}

func TestTenantFromGateway(t *testing.T) {
	cases := []struct {
		name   string
		gw     *gwv1.Gateway
		want   Tenant
		wantOK bool
	}{
		{"https wins over an earlier http", gatewayWith(listener("http", gwv1.HTTPProtocolType, "*.plain.example", 80), listener("https", gwv1.HTTPSProtocolType, "*.tenant.example", 443)),
			Tenant{Domain: "tenant.example", Scheme: "https", Listener: "https"}, true},
		{"http fallback", gatewayWith(listener("http", gwv1.HTTPProtocolType, "*.dev.example", 80), listener("ssh-1", gwv1.TCPProtocolType, "", 2201)),
			Tenant{Domain: "dev.example", Scheme: "http", Listener: "http"}, true},
		{"first https wildcard wins", gatewayWith(listener("a", gwv1.HTTPSProtocolType, "*.a.example", 443), listener("b", gwv1.HTTPSProtocolType, "*.b.example", 443)),
			Tenant{Domain: "a.example", Scheme: "https", Listener: "a"}, true},
		{"an exact hostname is no wildcard", gatewayWith(listener("https", gwv1.HTTPSProtocolType, "www.tenant.example", 443)), Tenant{}, false},
		{"no hostname", gatewayWith(listener("https", gwv1.HTTPSProtocolType, "", 443)), Tenant{}, false},
		{"tcp only", gatewayWith(listener("ssh-1", gwv1.TCPProtocolType, "", 2201)), Tenant{}, false},
		{"bare star", gatewayWith(listener("https", gwv1.HTTPSProtocolType, "*.", 443)), Tenant{}, false},
	}
	for _, c := range cases {
		got, ok := TenantFromGateway(c.gw)
		if ok != c.wantOK || got != c.want {
			t.Errorf("%s: got %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.wantOK)
		}
	}
}

func TestURLShapes(t *testing.T) {
	tn := Tenant{Domain: "tenant.example", Scheme: "https"}
	if got := HTTPURL(tn, HostLabel("nb", "web", true)); got != "https://nb.tenant.example" {
		t.Errorf("primary: %s", got)
	}
	if got := HTTPURL(tn, HostLabel("nb", "api", false)); got != "https://nb-api.tenant.example" {
		t.Errorf("second: %s", got)
	}
	if got := HTTPURL(Tenant{Domain: "dev.example", Scheme: "http"}, "nb"); got != "http://nb.dev.example" {
		t.Errorf("http: %s", got)
	}
	if got := PortURL(workspacesv1.EndpointProtocolSSH, "tenant.example", 2207); got != "ssh://tenant.example:2207" {
		t.Errorf("ssh: %s", got)
	}
	if got := PortURL(workspacesv1.EndpointProtocolTCP, "tenant.example", 2207); got != "tcp://tenant.example:2207" {
		t.Errorf("tcp: %s", got)
	}
}

func TestHostLabel63(t *testing.T) {
	ws := strings.Repeat("w", 58)
	if msg := CheckHostLabel(HostLabel(ws, "api", false)); msg != "" { // 62
		t.Errorf("62 characters refused: %s", msg)
	}
	if msg := CheckHostLabel(HostLabel(ws, "apix", false)); msg != "" { // 63
		t.Errorf("63 characters refused: %s", msg)
	}
	msg := CheckHostLabel(HostLabel(ws, "apixy", false)) // 64
	if !strings.Contains(msg, "64 characters") || !strings.Contains(msg, "63") {
		t.Errorf("64 characters: %q", msg)
	}
}

func TestQualifierAndNamespaces(t *testing.T) {
	first, again := Qualifier("team-a"), Qualifier("team-a")
	if first == Qualifier("team-b") || first != again || len(Qualifier("x")) != 5 {
		t.Fatalf("qualifier not stable or not distinct")
	}
	if got := RouteNamespace("nb", "team-a", false); got != "wsr-nb" {
		t.Errorf("short namespace %s", got)
	}
	if got := RouteNamespace("nb", "team-a", true); got != "wsr-nb-"+Qualifier("team-a") {
		t.Errorf("qualified namespace %s", got)
	}
	// A route namespace is never a release namespace (ws-<name>) of any workspace, short or cut.
	for _, n := range []string{"nb", "r-nb", "r", strings.Repeat("r", 60), "r-" + strings.Repeat("n", 58)} {
		for _, q := range []bool{false, true} {
			if got := RouteNamespace(n, "team-a", q); strings.HasPrefix(got, "ws-") {
				t.Errorf("route namespace %q of %q has the release namespaces' prefix", got, n)
			}
		}
	}
	long := RouteNamespace(strings.Repeat("n", 60), "team-a", true)
	if len(long) > 63 || len(validation.IsDNS1123Label(long)) > 0 {
		t.Errorf("long qualified namespace %q", long)
	}
	if got := BackendService("nb", workspacesv1.AccessEndpoint{Name: "web"}); got != "nb-web" {
		t.Errorf("default service %s", got)
	}
	if got := BackendService("nb", workspacesv1.AccessEndpoint{Name: "web", ServiceName: "jupyter"}); got != "jupyter" {
		t.Errorf("serviceName %s", got)
	}
}

func TestRegionalCluster(t *testing.T) {
	cd := &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "child"}}
	if _, _, ok := RegionalCluster(cd, RegionalRef{}); ok {
		t.Errorf("found a regional cluster without label or default")
	}
	def, err := ParseRegionalRef("regional")
	if err != nil {
		t.Fatal(err)
	}
	if k, _, ok := RegionalCluster(cd, def); !ok || k != (types.NamespacedName{Namespace: "team-a", Name: "regional"}) {
		t.Errorf("default in the child's namespace: %v %v", k, ok)
	}
	cd.Labels = map[string]string{RegionalClusterNameLabel: "kof-eu"}
	if k, _, _ := RegionalCluster(cd, def); k != (types.NamespacedName{Namespace: "team-a", Name: "kof-eu"}) {
		t.Errorf("label wins: %v", k)
	}
	cd.Labels[RegionalClusterNamespaceLabel] = "kcm-system"
	if k, _, _ := RegionalCluster(cd, def); k != (types.NamespacedName{Namespace: "kcm-system", Name: "kof-eu"}) {
		t.Errorf("namespace label: %v", k)
	}
	for _, bad := range []string{"a/b/c", "Bad/x", "/x", "x/"} {
		if _, err := ParseRegionalRef(bad); err == nil {
			t.Errorf("ParseRegionalRef(%q) accepted", bad)
		}
	}
}

func tcpRoute(ns, name string, created time.Time, gw *gwv1.Gateway, section string) gwv1.TCPRoute {
	s := gwv1.SectionName(section)
	gns := gwv1.Namespace(gw.Namespace)
	return gwv1.TCPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       gwv1.TCPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Namespace: &gns, Name: gwv1.ObjectName(gw.Name), SectionName: &s}}}},
	}
}

func TestAllocate(t *testing.T) {
	gw := gatewayWith(listener("ssh-3", gwv1.TCPProtocolType, "", 2203), listener("ssh-1", gwv1.TCPProtocolType, "", 2201), listener("ssh-2", gwv1.TCPProtocolType, "", 2202))
	pool := TCPPool(gw)
	t0 := time.Unix(1000, 0)
	me := types.NamespacedName{Namespace: "ws-b", Name: "ssh"}

	l, ok := Allocate(pool, nil, me)
	if !ok || l.Port != 2201 {
		t.Fatalf("empty pool: %v %v, want the lowest port", l.Port, ok)
	}
	claims := ClaimsOf([]gwv1.TCPRoute{tcpRoute("ws-a", "ssh", t0, gw, "ssh-1")}, gw, pool)
	if l, _ := Allocate(pool, claims, me); l.Port != 2202 {
		t.Errorf("next free: %d", l.Port)
	}
	// Sticky: a route already holding ssh-3 keeps it although lower ports are free.
	claims = ClaimsOf([]gwv1.TCPRoute{tcpRoute("ws-b", "ssh", t0, gw, "ssh-3")}, gw, pool)
	if l, _ := Allocate(pool, claims, me); l.Port != 2203 {
		t.Errorf("sticky: %d", l.Port)
	}
	// A race: two routes on ssh-1; the older keeps it, the younger moves.
	claims = ClaimsOf([]gwv1.TCPRoute{tcpRoute("ws-a", "ssh", t0, gw, "ssh-1"), tcpRoute("ws-b", "ssh", t0.Add(time.Second), gw, "ssh-1")}, gw, pool)
	if l, _ := Allocate(pool, claims, me); l.Port != 2202 {
		t.Errorf("younger racer: %d", l.Port)
	}
	if l, _ := Allocate(pool, claims, types.NamespacedName{Namespace: "ws-a", Name: "ssh"}); l.Port != 2201 {
		t.Errorf("older racer: %d", l.Port)
	}
	// Exhaustion, and routes of other Gateways or being deleted do not count.
	other := gatewayWith()
	other.Name = "other"
	going := tcpRoute("ws-z", "ssh", t0, gw, "ssh-2")
	going.DeletionTimestamp = &metav1.Time{Time: t0}
	full := []gwv1.TCPRoute{tcpRoute("ws-a", "ssh", t0, gw, "ssh-1"), tcpRoute("ws-c", "ssh", t0, gw, "ssh-2"), tcpRoute("ws-d", "ssh", t0, gw, "ssh-3")}
	if _, ok := Allocate(pool, ClaimsOf(full, gw, pool), me); ok {
		t.Errorf("allocated from a full pool")
	}
	if l, ok := Allocate(pool, ClaimsOf([]gwv1.TCPRoute{tcpRoute("ws-a", "ssh", t0, other, "ssh-1"), going}, gw, pool), me); !ok || l.Port != 2201 {
		t.Errorf("foreign or deleted routes counted: %v %v", l.Port, ok)
	}
	// A parent reference by port takes the listener on that port.
	byPort := tcpRoute("ws-a", "ssh", t0, gw, "")
	byPort.Spec.ParentRefs[0].SectionName = nil
	p := gwv1.PortNumber(2201)
	byPort.Spec.ParentRefs[0].Port = &p
	if l, _ := Allocate(pool, ClaimsOf([]gwv1.TCPRoute{byPort}, gw, pool), me); l.Port != 2202 {
		t.Errorf("port reference ignored: %d", l.Port)
	}
}

func TestRouteReady(t *testing.T) {
	gw := gatewayWith(listener("https", gwv1.HTTPSProtocolType, "*.t.example", 443))
	gns := gwv1.Namespace("gw-ns")
	parent := func(conds ...metav1.Condition) []gwv1.RouteParentStatus {
		return []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Namespace: &gns, Name: "gw"}, Conditions: conds}}
	}
	cond := func(t, s string, gen int64) metav1.Condition {
		return metav1.Condition{Type: t, Status: metav1.ConditionStatus(s), Reason: "R", ObservedGeneration: gen}
	}
	cases := []struct {
		name    string
		parents []gwv1.RouteParentStatus
		want    bool
	}{
		{"no status", nil, false},
		{"accepted and resolved", parent(cond("Accepted", "True", 1), cond("ResolvedRefs", "True", 1)), true},
		{"refs unresolved", parent(cond("Accepted", "True", 1), cond("ResolvedRefs", "False", 1)), false},
		{"not programmed", parent(cond("Accepted", "True", 1), cond("ResolvedRefs", "True", 1), cond("Programmed", "False", 1)), false},
		{"current generation", parent(cond("Accepted", "True", 1), cond("ResolvedRefs", "True", 1)), true},
		{"another gateway", []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Name: "other"}, Conditions: []metav1.Condition{cond("Accepted", "True", 1), cond("ResolvedRefs", "True", 1)}}}, false},
	}
	for _, c := range cases {
		if got, msg := RouteReady("ws-nb", 1, c.parents, gw, "https"); got != c.want {
			t.Errorf("%s: ready %v (%s), want %v", c.name, got, msg, c.want)
		}
	}
	if ok, _ := RouteReady("ws-nb", 2, parent(cond("Accepted", "True", 1), cond("ResolvedRefs", "True", 1)), gw, "https"); ok {
		t.Errorf("conditions of generation 1 counted for generation 2")
	}
	gw.Status.Listeners = []gwv1.ListenerStatus{{Name: "https", Conditions: []metav1.Condition{cond("Programmed", "False", 1)}}}
	if ok, _ := RouteReady("ws-nb", 1, parent(cond("Accepted", "True", 1), cond("ResolvedRefs", "True", 1)), gw, "https"); ok {
		t.Errorf("ready on a listener that is not Programmed")
	}
}

func FuzzHostnames(f *testing.F) {
	for _, s := range []string{"*.tenant.example", "*.", "*", "", "*.a_b", "*.UPPER.example", strings.Repeat("*.a", 100)} {
		f.Add(s, "nb", "web")
	}
	f.Fuzz(func(t *testing.T, host, ws, ep string) {
		gw := gatewayWith(listener("https", gwv1.HTTPSProtocolType, host, 443))
		tn, ok := TenantFromGateway(gw)
		if ok && len(validation.IsDNS1123Subdomain(tn.Domain)) > 0 {
			t.Fatalf("domain %q from %q is not a DNS name", tn.Domain, host)
		}
		label := HostLabel(ws, ep, false)
		if CheckHostLabel(label) == "" && len(validation.IsDNS1123Label(label)) > 0 {
			t.Fatalf("label %q accepted", label)
		}
	})
}

func TestHostTakenBy(t *testing.T) {
	gw := gatewayWith(listener("https", gwv1.HTTPSProtocolType, "*.t.example", 443))
	gns := gwv1.Namespace(gw.Namespace)
	route := func(ns, name, host string, g *gwv1.Gateway) gwv1.HTTPRoute {
		return gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{workspacesv1.WorkspaceNamespaceLabel: "team"}}, Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Namespace: &gns, Name: gwv1.ObjectName(g.Name)}}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(host)}}}
	}
	other := gatewayWith()
	other.Name = "other"
	// Workspace "a" with endpoint "b" and workspace "a-b" want the same hostname.
	routes := []gwv1.HTTPRoute{route("ws-a", "b", "a-b.t.example", gw), route("ws-x", "web", "x.t.example", other)}
	if got := hostTakenBy(routes, "a-b.t.example", "ws-a-b", "web", gw, "team"); got != "HTTPRoute ws-a/b" {
		t.Errorf("collision not seen: %q", got)
	}
	// Seen from another namespace, the route is not named.
	if got := hostTakenBy(routes, "a-b.t.example", "ws-a-b", "web", gw, "rival"); got != "an HTTPRoute of another namespace" {
		t.Errorf("collision seen from another namespace: %q", got)
	}
	if got := hostTakenBy(routes, "a-b.t.example", "ws-a", "b", gw, "team"); got != "" {
		t.Errorf("the route itself counted: %q", got)
	}
	if got := hostTakenBy(routes, "x.t.example", "ws-y", "web", gw, "team"); got != "" {
		t.Errorf("a route of another Gateway counted: %q", got)
	}
}
