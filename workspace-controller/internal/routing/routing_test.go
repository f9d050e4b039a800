package routing_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	k0rdentv1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/routing"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspace"
)

// Two HTTP endpoints and one SSH endpoint: URL shapes, the HTTPRoutes and mirror Services on the
// regional cluster, readiness, then deletion in order: routes (the port freed) before the release.
func TestRoutesServeAndDeletionOrder(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, []workspacesv1.AccessEndpoint{httpEP("web", 8888), httpEP("api", 8000), sshEP("ssh")}, ns)
	cd := createCluster(t, ns, nil)
	wsName := name("nb")
	key := runningWorkspace(t, ns, wsName, class, cd)
	ws := waitWS(t, key, "routes ready", routesReady(map[string]string{
		"web": "https://" + wsName + "." + domain,
		"api": "https://" + wsName + "-api." + domain,
		"ssh": "",
	}))
	if u := access(ws, "ssh").URL; !strings.HasPrefix(u, "ssh://"+domain+":22") {
		t.Errorf("ssh URL %q", u)
	}

	rns := "ws-" + wsName
	hr := &gwv1.HTTPRoute{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: "api"}, hr))
	if len(hr.Spec.Hostnames) != 1 || string(hr.Spec.Hostnames[0]) != wsName+"-api."+domain ||
		string(hr.Spec.Rules[0].BackendRefs[0].Name) != wsName+"-api" || *hr.Spec.Rules[0].BackendRefs[0].Port != 8000 ||
		string(*hr.Spec.ParentRefs[0].SectionName) != "https" {
		t.Errorf("HTTPRoute api: %+v", hr.Spec)
	}
	svc := &corev1.Service{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: wsName + "-web"}, svc))
	if len(svc.Spec.Selector) != 0 || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8888 {
		t.Errorf("mirror Service web: %+v", svc.Spec)
	}
	if c := conditions.Get(ws.Status.Conditions, workspacesv1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v", c)
	}

	// Deletion: hold the TCPRoute with a finalizer of the test; the ServiceSet must not be touched
	// while a route is there.
	tr := &gwv1.TCPRoute{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: "ssh"}, tr))
	tr.Finalizers = append(tr.Finalizers, "test.example/hold")
	must(t, rc.Update(ctxT(t), tr))
	must(t, k8s.Delete(ctxT(t), ws))
	waitWS(t, key, "waiting for routes", func(ws *workspacesv1.WorkspaceDeployment) error {
		if !strings.Contains(ws.Status.Message, "removing the routes") {
			return fmt.Errorf("message %q", ws.Status.Message)
		}
		return nil
	})
	ss := &k0rdentv1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: workspace.ServiceSetName(ws)}, ss))
	if !ss.DeletionTimestamp.IsZero() {
		t.Fatalf("the ServiceSet is being deleted while a route is still there")
	}
	if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: "web"}, &gwv1.HTTPRoute{}); !apierrors.IsNotFound(err) {
		t.Errorf("HTTPRoute web still there: %v", err)
	}
	must(t, rc.Get(ctxT(t), client.ObjectKeyFromObject(tr), tr))
	tr.Finalizers = nil
	must(t, rc.Update(ctxT(t), tr))
	deleteWorkspace(t, key)
	n := &corev1.Namespace{}
	must(t, client.IgnoreNotFound(rc.Get(ctxT(t), types.NamespacedName{Name: rns}, n)))
	if n.Name != "" && n.DeletionTimestamp.IsZero() {
		t.Errorf("route namespace %s not deleted", rns)
	}
	if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: wsName + "-web"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("mirror Service still there: %v", err)
	}
}

// A hostname label over 63 characters makes only that entry not ready, with a message.
func TestHostnameLabelOver63(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, []workspacesv1.AccessEndpoint{httpEP("web", 80), httpEP("dashboard", 81)}, ns)
	cd := createCluster(t, ns, nil)
	wsName := name(strings.Repeat("l", 55)) // 57+ characters: <ws>-dashboard is over 63
	key := runningWorkspace(t, ns, wsName, class, cd)
	ws := waitWS(t, key, "one ready, one too long", func(ws *workspacesv1.WorkspaceDeployment) error {
		web, dash := access(ws, "web"), access(ws, "dashboard")
		c := conditions.Get(ws.Status.Conditions, workspacesv1.RoutesReadyCondition)
		if !web.Ready || dash.Ready || !strings.Contains(dash.Message, "63") || c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("web %+v, dashboard %+v, RoutesReady %+v", web, dash, c)
		}
		return nil
	})
	if ws.Status.Phase != workspacesv1.PhaseRunning || access(ws, "dashboard").URL != "" {
		t.Errorf("phase %s, dashboard %+v", ws.Status.Phase, access(ws, "dashboard"))
	}
	deleteWorkspace(t, key)
}

// The same workspace name in two namespaces behind one Gateway: the first keeps the short URL, the
// second gets a qualified one, both serve.
func TestSameNameTwoNamespaces(t *testing.T) {
	nsA, nsB := newNamespace(t), newNamespace(t)
	class := createClass(t, []workspacesv1.AccessEndpoint{httpEP("web", 80)}, nsA, nsB)
	cdA, cdB := createCluster(t, nsA, nil), createCluster(t, nsB, nil)
	wsName := name("same")
	a := runningWorkspace(t, nsA, wsName, class, cdA)
	waitWS(t, a, "short URL", routesReady(map[string]string{"web": "https://" + wsName + "." + domain}))
	b := runningWorkspace(t, nsB, wsName, class, cdB)
	qualified := wsName + "-" + routing.Qualifier(nsB)
	waitWS(t, b, "qualified URL", routesReady(map[string]string{"web": "https://" + qualified + "." + domain}))
	if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: "ws-" + qualified, Name: "web"}, &gwv1.HTTPRoute{}); err != nil {
		t.Errorf("the second workspace's route namespace: %v", err)
	}
	// The first keeps its short URL.
	waitWS(t, a, "short URL kept", routesReady(map[string]string{"web": "https://" + wsName + "." + domain}))
	deleteWorkspace(t, a)
	deleteWorkspace(t, b)
}

func sshPort(ws *workspacesv1.WorkspaceDeployment, ep string) string {
	a := access(ws, ep)
	if !a.Ready {
		return ""
	}
	return a.URL[strings.LastIndex(a.URL, ":")+1:]
}

// Ports: lowest free first, exhaustion is a message on the entry (never Failed), a port freed by a
// deletion goes to the waiting entry, a held port is sticky (also across a controller restart).
func TestPortPool(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, []workspacesv1.AccessEndpoint{sshEP("ssh"), {Name: "db", Protocol: workspacesv1.EndpointProtocolTCP, Port: 5432}}, ns)
	cd := createCluster(t, ns, nil)

	w1 := runningWorkspace(t, ns, name("p"), class, cd)
	ws1 := waitWS(t, w1, "two ports", routesReady(map[string]string{"ssh": "ssh://" + domain + ":2201", "db": "tcp://" + domain + ":2202"}))
	w2 := runningWorkspace(t, ns, name("p"), class, cd)
	ws2 := waitWS(t, w2, "one port, one exhausted", func(ws *workspacesv1.WorkspaceDeployment) error {
		c := conditions.Get(ws.Status.Conditions, workspacesv1.RoutesReadyCondition)
		if sshPort(ws, "ssh") != "2203" || access(ws, "db").Ready || !strings.Contains(access(ws, "db").Message, "no free port") ||
			c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("access %+v, RoutesReady %+v", ws.Status.Access, c)
		}
		return nil
	})
	if ws2.Status.Phase != workspacesv1.PhaseRunning {
		t.Errorf("exhaustion changed the phase: %s", ws2.Status.Phase)
	}

	// Freed on deletion: w2's waiting entry gets a port; its held port 2203 stays (sticky, though
	// 2201 and 2202 are lower).
	deleteWorkspace(t, w1)
	_ = ws1
	waitWS(t, w2, "freed port taken, held port kept", func(ws *workspacesv1.WorkspaceDeployment) error {
		if sshPort(ws, "ssh") != "2203" || sshPort(ws, "db") != "2201" {
			return fmt.Errorf("access %+v", ws.Status.Access)
		}
		return nil
	})

	// A restarted controller finds the allocation in the TCPRoutes.
	rns := "ws-" + w2.Name
	before := tcpSection(t, rns, "ssh") + "," + tcpSection(t, rns, "db")
	must(t, stopControllers())
	must(t, startControllers())
	w3 := runningWorkspace(t, ns, name("p"), class, cd)
	waitWS(t, w3, "the last free port", func(ws *workspacesv1.WorkspaceDeployment) error {
		if p := sshPort(ws, "ssh"); p != "2202" {
			return fmt.Errorf("access %+v", ws.Status.Access)
		}
		return nil
	})
	waitWS(t, w2, "ports kept across the restart", func(ws *workspacesv1.WorkspaceDeployment) error {
		if sshPort(ws, "ssh") != "2203" || sshPort(ws, "db") != "2201" {
			return fmt.Errorf("access %+v", ws.Status.Access)
		}
		return nil
	})
	if after := tcpSection(t, rns, "ssh") + "," + tcpSection(t, rns, "db"); after != before {
		t.Errorf("listeners moved across the restart: %s -> %s", before, after)
	}
	deleteWorkspace(t, w2)
	deleteWorkspace(t, w3)
}

func infraNotReady(contains string) func(*workspacesv1.WorkspaceDeployment) error {
	return func(ws *workspacesv1.WorkspaceDeployment) error {
		c := conditions.Get(ws.Status.Conditions, workspacesv1.RoutesReadyCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != workspacesv1.ReasonRoutingInfraNotReady || !strings.Contains(c.Message, contains) {
			return fmt.Errorf("RoutesReady %+v", c)
		}
		if ws.Status.Phase != workspacesv1.PhaseRunning {
			return fmt.Errorf("phase %s", ws.Status.Phase)
		}
		for _, a := range ws.Status.Access {
			if a.Ready || a.Message == "" {
				return fmt.Errorf("access %+v", a)
			}
		}
		return nil
	}
}

// Missing infrastructure is RoutingInfraNotReady naming what is missing, the workspace stays
// Running, and routes follow when it appears, without a restart. The regional cluster is named by
// KOF's label here.
func TestInfraMissingThenRestored(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, []workspacesv1.AccessEndpoint{httpEP("web", 80), sshEP("ssh")}, ns)
	late := name("late-regional")
	cd := createCluster(t, ns, map[string]string{routing.RegionalClusterNameLabel: late})
	key := runningWorkspace(t, ns, name("infra"), class, cd)
	waitWS(t, key, "no regional cluster", infraNotReady(ns+"/"+late))

	// The regional cluster appears, but without the Gateway.
	gw := &gwv1.Gateway{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Namespace: gwNamespace, Name: gwName}, gw))
	must(t, rc.Delete(ctxT(t), gw))
	restored := false
	t.Cleanup(func() {
		if !restored {
			_ = rc.Delete(ctxT(t), &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gwNamespace, Name: gwName}})
			_ = createGateway(ctxT(t))
		}
	})
	must(t, mgmt.WriteKubeconfigSecret(ctxT(t), ns, late, regional.Kubeconfig))
	waitWS(t, key, "no Gateway", infraNotReady("Gateway "+gwNamespace+"/"+gwName+" not found"))

	// A Gateway without TCP listeners: the HTTP endpoint serves, the SSH endpoint waits for the pool.
	noPool := tenantGateway()
	noPool.Spec.Listeners = noPool.Spec.Listeners[:1]
	must(t, rc.Create(ctxT(t), noPool))
	waitWS(t, key, "no TCP listener", func(ws *workspacesv1.WorkspaceDeployment) error {
		c := conditions.Get(ws.Status.Conditions, workspacesv1.RoutesReadyCondition)
		if c == nil || c.Reason != workspacesv1.ReasonRoutingInfraNotReady || !strings.Contains(c.Message, "no TCP listeners") ||
			!access(ws, "web").Ready || access(ws, "ssh").Ready || ws.Status.Phase != workspacesv1.PhaseRunning {
			return fmt.Errorf("RoutesReady %+v, access %+v, phase %s", c, ws.Status.Access, ws.Status.Phase)
		}
		return nil
	})

	// The admin adds the pool: the SSH endpoint follows.
	must(t, rc.Get(ctxT(t), client.ObjectKeyFromObject(noPool), noPool))
	noPool.Spec.Listeners = tenantGateway().Spec.Listeners
	must(t, rc.Update(ctxT(t), noPool))
	restored = true
	waitWS(t, key, "routes follow", routesReady(map[string]string{"web": "https://" + key.Name + "." + domain, "ssh": ""}))
	deleteWorkspace(t, key)
}

// The sweeper removes routes, mirror Services and route namespaces whose workspace is gone, and
// leaves those of live workspaces alone.
func TestSweep(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, []workspacesv1.AccessEndpoint{httpEP("web", 80)}, ns)
	cd := createCluster(t, ns, nil)
	live := runningWorkspace(t, ns, name("live"), class, cd)
	waitWS(t, live, "routes ready", routesReady(map[string]string{"web": ""}))

	orphan := createOrphan(t, ns)
	waitSwept(t, orphan)
	if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: "ws-" + live.Name, Name: "web"}, &gwv1.HTTPRoute{}); err != nil {
		t.Errorf("the live workspace's route was swept: %v", err)
	}
	deleteWorkspace(t, live)
}

// The sweeper also runs when the controller starts: routes left while it was down go at once, not
// one interval later.
func TestSweepOnStart(t *testing.T) {
	ns := newNamespace(t)
	must(t, stopControllers())
	orphan := createOrphan(t, ns)
	sweepEvery = time.Hour
	t.Cleanup(func() {
		sweepEvery = time.Second
		must(t, stopControllers())
		must(t, startControllers())
	})
	must(t, startControllers())
	waitSwept(t, orphan)
}

// createOrphan makes a route namespace with an HTTPRoute and a mirror Service for a workspace that
// does not exist.
func createOrphan(t *testing.T, ns string) string {
	t.Helper()
	orphan := "ws-" + name("gone")
	labels := map[string]string{workspacesv1.WorkspaceLabel: strings.TrimPrefix(orphan, "ws-"), workspacesv1.WorkspaceNamespaceLabel: ns,
		routing.WorkspaceUIDLabel: "0000", routing.ManagedByLabel: routing.ManagedByValue}
	must(t, rc.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: orphan, Labels: labels}}))
	gns := gwv1.Namespace(gwNamespace)
	must(t, rc.Create(ctxT(t), &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: orphan, Name: "web", Labels: labels},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Namespace: &gns, Name: gwName}}}}}))
	must(t, rc.Create(ctxT(t), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: orphan, Name: "gone-web", Labels: labels},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}))
	return orphan
}

// waitSwept waits until an orphan's route and Service are gone and its namespace is being deleted.
func waitSwept(t *testing.T, orphan string) {
	t.Helper()
	eventually(t, "the orphan "+orphan+" swept", func() error {
		if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: orphan, Name: "web"}, &gwv1.HTTPRoute{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("route: %v", err)
		}
		if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: orphan, Name: "gone-web"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("service: %v", err)
		}
		n := &corev1.Namespace{}
		if err := rc.Get(ctxT(t), types.NamespacedName{Name: orphan}, n); err == nil && n.DeletionTimestamp.IsZero() {
			return fmt.Errorf("namespace not deleted")
		}
		return nil
	})
}

// A workspace whose regional cluster is its own cluster: the routes go into its release namespace
// and point at the release's own Service; no mirror Service and no namespace of the routing's own
// are made, and deletion removes the routes only (the namespace is the release's).
func TestRegionalIsTheWorkspaceCluster(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, []workspacesv1.AccessEndpoint{httpEP("web", 80)}, ns)
	cdName := name("cd")
	cd := &k0rdentv1.ClusterDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cdName, Labels: map[string]string{routing.RegionalClusterNameLabel: cdName}},
		Spec:       k0rdentv1.ClusterDeploymentSpec{Template: "cluster-template"},
	}
	must(t, k8s.Create(ctxT(t), cd))
	must(t, mgmt.WriteKubeconfigSecret(ctxT(t), ns, cdName, regional.Kubeconfig))
	wsName := name("self")
	// Play Sveltos and the chart: the release namespace and the release's Service.
	rns := "ws-" + wsName
	must(t, rc.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rns}}))
	must(t, rc.Create(ctxT(t), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: rns, Name: wsName + "-web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": wsName}, Ports: []corev1.ServicePort{{Port: 80}}}}))
	key := runningWorkspace(t, ns, wsName, class, cdName)
	waitWS(t, key, "routes ready", routesReady(map[string]string{"web": "https://" + wsName + "." + domain}))
	svc := &corev1.Service{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: wsName + "-web"}, svc))
	if svc.Spec.Selector["app"] != wsName || svc.Labels[routing.ManagedByLabel] != "" {
		t.Errorf("the release's Service was taken over: %+v %v", svc.Spec, svc.Labels)
	}
	n := &corev1.Namespace{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Name: rns}, n))
	if n.Labels[routing.ManagedByLabel] != "" {
		t.Errorf("the release namespace was labelled as a route namespace: %v", n.Labels)
	}
	must(t, k8s.Delete(ctxT(t), &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wsName}}))
	eventually(t, "the route gone", func() error {
		if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: "web"}, &gwv1.HTTPRoute{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("route: %v", err)
		}
		return nil
	})
	deleteWorkspace(t, key)
}
