package routing_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/routing"
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

	rns := routing.RouteNamespace(wsName, ns, false)
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
	if c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v", c)
	}

	// Deletion: hold the TCPRoute with a finalizer of the test; the ServiceSet must not be touched
	// while a route is there.
	tr := &gwv1.TCPRoute{}
	// The controller writes the route meanwhile: a conflict is retried on the route as it is now.
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: "ssh"}, tr); err != nil {
			return err
		}
		tr.Finalizers = append(tr.Finalizers, "test.example/hold")
		return rc.Update(ctxT(t), tr)
	}))
	must(t, k8s.Delete(ctxT(t), ws))
	waitWS(t, key, "waiting for routes", func(ws *workspacesv1.WorkspaceDeployment) error {
		if !strings.Contains(ws.Status.Message, "removing the routes") {
			return fmt.Errorf("message %q", ws.Status.Message)
		}
		return nil
	})
	ss := &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: owned.ServiceSetName(ws)}, ss))
	if !ss.DeletionTimestamp.IsZero() {
		t.Fatalf("the ServiceSet is being deleted while a route is still there")
	}
	if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: "web"}, &gwv1.HTTPRoute{}); !apierrors.IsNotFound(err) {
		t.Errorf("HTTPRoute web still there: %v", err)
	}
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := rc.Get(ctxT(t), client.ObjectKeyFromObject(tr), tr); err != nil {
			return err
		}
		tr.Finalizers = nil
		return rc.Update(ctxT(t), tr)
	}))
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
		c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.RoutesReadyCondition)
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
// second gets a qualified one, both serve. The two run on two clusters, each in its own namespace:
// B's cluster is the regional API server under a ClusterDeployment of its own, so B is routed like
// any other child.
func TestSameNameTwoNamespaces(t *testing.T) {
	nsA, nsB := newNamespace(t), newNamespace(t)
	class := createClass(t, []workspacesv1.AccessEndpoint{httpEP("web", 80)}, nsA, nsB)
	cdA := createCluster(t, nsA, nil)
	cdB := regionalAsCluster(t, nsB)
	wsName := name("same")
	a := runningWorkspace(t, nsA, wsName, class, cdA)
	waitWS(t, a, "short URL", routesReady(map[string]string{"web": "https://" + wsName + "." + domain}))
	b := runningWorkspace(t, nsB, wsName, class, cdB)
	qualified := wsName + "-" + routing.Qualifier(nsB)
	waitWS(t, b, "qualified URL", routesReady(map[string]string{"web": "https://" + qualified + "." + domain}))
	if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: routing.RouteNamespace(wsName, nsB, true), Name: "web"}, &gwv1.HTTPRoute{}); err != nil {
		t.Errorf("the second workspace's route namespace: %v", err)
	}
	// The first keeps its short URL.
	waitWS(t, a, "short URL kept", routesReady(map[string]string{"web": "https://" + wsName + "." + domain}))
	deleteWorkspace(t, a)
	deleteWorkspace(t, b)
}

// A team cannot take another namespace's qualified hostname by naming a workspace after it: a name
// that ends like a qualifier only ever gets the qualified form, so B's `same`, finding the short
// hostname taken by A's `same`, still gets same-<qualifier of B>.
func TestQualifiedHostnameCannotBeTaken(t *testing.T) {
	nsA, nsB := newNamespace(t), newNamespace(t)
	class := createClass(t, []workspacesv1.AccessEndpoint{httpEP("web", 80)}, nsA, nsB)
	cdA := createCluster(t, nsA, nil)
	cdB := regionalAsCluster(t, nsB)
	wsName := name("sq")
	bsQualified := wsName + "-" + routing.Qualifier(nsB)
	a := runningWorkspace(t, nsA, wsName, class, cdA)
	waitWS(t, a, "short URL", routesReady(map[string]string{"web": "https://" + wsName + "." + domain}))
	squat := runningWorkspace(t, nsA, bsQualified, class, cdA)
	waitWS(t, squat, "qualified URL for a qualifier-shaped name", routesReady(map[string]string{
		"web": "https://" + bsQualified + "-" + routing.Qualifier(nsA) + "." + domain}))
	b := runningWorkspace(t, nsB, wsName, class, cdB)
	waitWS(t, b, "B's qualified URL", routesReady(map[string]string{"web": "https://" + bsQualified + "." + domain}))
	deleteWorkspace(t, a)
	deleteWorkspace(t, squat)
	deleteWorkspace(t, b)
}

// regionalAsCluster makes a ClusterDeployment in ns whose child is the regional API server, so that a
// workspace there is routed on its own cluster, and returns its name.
func regionalAsCluster(t *testing.T, ns string) string {
	t.Helper()
	cd := name("cd")
	must(t, k8s.Create(ctxT(t), &k0rdentv1beta1.ClusterDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cd},
		Spec:       k0rdentv1beta1.ClusterDeploymentSpec{Template: "cluster-template"},
	}))
	must(t, mgmt.WriteKubeconfigSecret(ctxT(t), ns, cd, regional.Kubeconfig))
	return cd
}

func sshPort(ws *workspacesv1.WorkspaceDeployment, ep string) string {
	a := access(ws, ep)
	if !a.Ready {
		return ""
	}
	return a.URL[strings.LastIndex(a.URL, ":")+1:]
}

// A namespace's WorkspaceQuota caps its SSH and TCP endpoints: the older workspace holds its ports,
// the newer gets none and says why (Running all the same), the quota counts the ports held, and the
// newer one gets ports once the older one is gone.
func TestPortQuota(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, []workspacesv1.AccessEndpoint{sshEP("ssh"), {Name: "db", Protocol: workspacesv1.EndpointProtocolTCP, Port: 5432}}, ns)
	cd := createCluster(t, ns, nil)
	two := int32(2)
	must(t, k8s.Create(ctxT(t), &workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ports"},
		Spec: workspacesv1.WorkspaceQuotaSpec{TCPEndpoints: &two}}))

	// Created within one second, two workspaces are ordered by name: "a-..." is the older.
	w1 := runningWorkspace(t, ns, name("a"), class, cd)
	waitWS(t, w1, "two ports", func(ws *workspacesv1.WorkspaceDeployment) error {
		if sshPort(ws, "ssh") == "" || sshPort(ws, "db") == "" {
			return fmt.Errorf("access %+v", ws.Status.Access)
		}
		return nil
	})
	w2 := runningWorkspace(t, ns, name("b"), class, cd)
	ws2 := waitWS(t, w2, "no port, saying why", func(ws *workspacesv1.WorkspaceDeployment) error {
		for _, ep := range []string{"ssh", "db"} {
			if a := access(ws, ep); a.URL != "" || !strings.Contains(a.Message, "WorkspaceQuota allows 2 SSH and TCP endpoints") {
				return fmt.Errorf("access %+v", ws.Status.Access)
			}
		}
		return nil
	})
	if ws2.Status.Phase != workspacesv1.PhaseRunning {
		t.Errorf("the cap changed the phase: %s", ws2.Status.Phase)
	}
	eventually(t, "the quota counts the ports held", func() error {
		q := &workspacesv1.WorkspaceQuota{}
		if err := k8s.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: "ports"}, q); err != nil {
			return err
		}
		if q.Status.TCPEndpoints != 2 || !strings.Contains(q.Status.Summary, "tcp endpoints 2/2") {
			return fmt.Errorf("status %+v", q.Status)
		}
		return nil
	})
	deleteWorkspace(t, w1)
	waitWS(t, w2, "the freed ports", func(ws *workspacesv1.WorkspaceDeployment) error {
		if sshPort(ws, "ssh") == "" || sshPort(ws, "db") == "" {
			return fmt.Errorf("access %+v", ws.Status.Access)
		}
		return nil
	})
	deleteWorkspace(t, w2)
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
		c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.RoutesReadyCondition)
		if sshPort(ws, "ssh") != "2203" || access(ws, "db").Ready || !strings.Contains(access(ws, "db").Message, "no free port") ||
			c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("access %+v, RoutesReady %+v", ws.Status.Access, c)
		}
		return nil
	})
	if ws2.Status.Phase != workspacesv1.PhaseRunning {
		t.Errorf("exhaustion changed the phase: %s", ws2.Status.Phase)
	}

	// Freed on deletion: w2's waiting entry gets one of w1's ports (2201 or 2202: w1's two routes go
	// one after the other, and w2's pass may come between them); its held port 2203 stays (sticky,
	// though 2201 and 2202 are lower).
	deleteWorkspace(t, w1)
	_ = ws1
	ws2 = waitWS(t, w2, "freed port taken, held port kept", func(ws *workspacesv1.WorkspaceDeployment) error {
		if db := sshPort(ws, "db"); sshPort(ws, "ssh") != "2203" || db != "2201" && db != "2202" {
			return fmt.Errorf("access %+v", ws.Status.Access)
		}
		return nil
	})
	dbPort, lastFree := sshPort(ws2, "db"), "2202"
	if dbPort == "2202" {
		lastFree = "2201"
	}

	// A restarted controller finds the allocation in the TCPRoutes.
	rns := routing.RouteNamespace(w2.Name, ns, false)
	before := tcpSection(t, rns, "ssh") + "," + tcpSection(t, rns, "db")
	must(t, stopControllers())
	must(t, startControllers())
	w3 := runningWorkspace(t, ns, name("p"), class, cd)
	waitWS(t, w3, "the last free port", func(ws *workspacesv1.WorkspaceDeployment) error {
		if p := sshPort(ws, "ssh"); p != lastFree {
			return fmt.Errorf("access %+v", ws.Status.Access)
		}
		return nil
	})
	waitWS(t, w2, "ports kept across the restart", func(ws *workspacesv1.WorkspaceDeployment) error {
		if sshPort(ws, "ssh") != "2203" || sshPort(ws, "db") != dbPort {
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
		c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.RoutesReadyCondition)
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
		c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.RoutesReadyCondition)
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
	// A release namespace of a deleted workspace on a regional cluster that also runs workspaces: it
	// carries the owner labels the controller sets, and a route of the workspace routed on its own
	// cluster, left behind. The route is swept; the namespace is the owner's and stays.
	gone := name("gone")
	release := owned.LocalReleaseNamespace(gone)
	owner := map[string]string{workspacesv1.WorkspaceLabel: gone, workspacesv1.WorkspaceNamespaceLabel: ns,
		workspacesv1.WorkspaceUIDLabel: "0001", routing.ManagedByLabel: routing.ManagedByValue}
	must(t, rc.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: release, Labels: owner}}))
	t.Cleanup(func() { _ = rc.Delete(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: release}}) })
	gns := gwv1.Namespace(gwNamespace)
	must(t, rc.Create(ctxT(t), &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: release, Name: "web", Labels: owner},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Namespace: &gns, Name: gwName}}}}}))

	waitSwept(t, orphan)
	eventually(t, "the left route in the release namespace swept", func() error {
		if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: release, Name: "web"}, &gwv1.HTTPRoute{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("route: %v", err)
		}
		return nil
	})
	n := &corev1.Namespace{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Name: release}, n))
	if !n.DeletionTimestamp.IsZero() {
		t.Errorf("the sweeper deleted the release namespace %s", release)
	}
	if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: routing.RouteNamespace(live.Name, ns, false), Name: "web"}, &gwv1.HTTPRoute{}); err != nil {
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
	gone := name("gone")
	orphan := routing.RouteNamespace(gone, ns, false)
	labels := map[string]string{workspacesv1.WorkspaceLabel: gone, workspacesv1.WorkspaceNamespaceLabel: ns,
		routing.WorkspaceUIDLabel: "0000", routing.ManagedByLabel: routing.ManagedByValue}
	nsLabels := map[string]string{routing.RouteNamespaceLabel: "true"}
	for k, v := range labels {
		nsLabels[k] = v
	}
	must(t, rc.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: orphan, Labels: nsLabels}}))
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
// are made, the release namespace is never marked as a route namespace, and deletion removes the
// routes only: the release namespace goes with the release, by its owner (step 3), not with the
// routes.
func TestRegionalIsTheWorkspaceCluster(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, []workspacesv1.AccessEndpoint{httpEP("web", 80)}, ns)
	cdName := name("cd")
	cd := &k0rdentv1beta1.ClusterDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cdName, Labels: map[string]string{routing.RegionalClusterNameLabel: cdName}},
		Spec:       k0rdentv1beta1.ClusterDeploymentSpec{Template: "cluster-template"},
	}
	must(t, k8s.Create(ctxT(t), cd))
	must(t, mgmt.WriteKubeconfigSecret(ctxT(t), ns, cdName, regional.Kubeconfig))
	wsName := name("self")
	// Play the controller, Sveltos and the chart: the release namespace as the controller makes it
	// (labelled with its workspace; an unlabelled ws-<name> is not adopted by a new workspace), and the
	// release's Services, which a chart may label with its workspace (routing must not take them for
	// mirror Services of its own, also the one no endpoint names).
	rns := owned.LocalReleaseNamespace(wsName)
	must(t, rc.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rns,
		Labels: map[string]string{workspacesv1.WorkspaceLabel: wsName, workspacesv1.WorkspaceNamespaceLabel: ns}}}))
	chartLabels := map[string]string{workspacesv1.WorkspaceLabel: wsName, workspacesv1.WorkspaceNamespaceLabel: ns, routing.ManagedByLabel: "Helm"}
	must(t, rc.Create(ctxT(t), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: rns, Name: wsName + "-headless", Labels: chartLabels},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": wsName}, Ports: []corev1.ServicePort{{Port: 80}}}}))
	must(t, rc.Create(ctxT(t), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: rns, Name: wsName + "-web", Labels: chartLabels},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": wsName}, Ports: []corev1.ServicePort{{Port: 80}}}}))
	// The chart's own route, labelled with its workspace: not the provider's, never pruned or removed.
	gns := gwv1.Namespace(gwNamespace)
	must(t, rc.Create(ctxT(t), &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: rns, Name: "chart-route", Labels: chartLabels},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Namespace: &gns, Name: gwName}}}}}))
	key := runningWorkspace(t, ns, wsName, class, cdName)
	ws := waitWS(t, key, "routes ready", routesReady(map[string]string{"web": "https://" + wsName + "." + domain}))
	svc := &corev1.Service{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: wsName + "-web"}, svc))
	if svc.Spec.Selector["app"] != wsName || svc.Labels[routing.ManagedByLabel] != "Helm" {
		t.Errorf("the release's Service was taken over: %+v %v", svc.Spec, svc.Labels)
	}
	if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: wsName + "-headless"}, &corev1.Service{}); err != nil {
		t.Errorf("the release's other Service was pruned: %v", err)
	}
	n := &corev1.Namespace{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Name: rns}, n))
	if n.Labels[routing.RouteNamespaceLabel] != "" {
		t.Errorf("the release namespace was labelled as a route namespace: %v", n.Labels)
	}
	if n.Labels[workspacesv1.WorkspaceUIDLabel] != string(ws.UID) {
		t.Errorf("the release namespace is not owned by the workspace: %v", n.Labels)
	}
	// The route namespace is only the claim of the short hostnames here: empty.
	claim := routing.RouteNamespace(wsName, ns, false)
	cn := &corev1.Namespace{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Name: claim}, cn))
	if cn.Labels[routing.RouteNamespaceLabel] != "true" {
		t.Errorf("the claim namespace %s: %v", claim, cn.Labels)
	}
	var inClaim corev1.ServiceList
	must(t, rc.List(ctxT(t), &inClaim, client.InNamespace(claim)))
	var routesInClaim gwv1.HTTPRouteList
	must(t, rc.List(ctxT(t), &routesInClaim, client.InNamespace(claim)))
	if len(inClaim.Items)+len(routesInClaim.Items) != 0 {
		t.Errorf("the claim namespace holds %d Services and %d HTTPRoutes, want none", len(inClaim.Items), len(routesInClaim.Items))
	}

	// Hold the ServiceSet as KCM does while it uninstalls: the deletion stops after the routes.
	ssKey := types.NamespacedName{Namespace: ns, Name: owned.ServiceSetName(ws)}
	ss := &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), ssKey, ss))
	ss.Finalizers = append(ss.Finalizers, "test.example/hold")
	must(t, k8s.Update(ctxT(t), ss))
	must(t, k8s.Delete(ctxT(t), &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wsName}}))
	eventually(t, "the route gone, the ServiceSet being deleted", func() error {
		if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: "web"}, &gwv1.HTTPRoute{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("route: %v", err)
		}
		ss := &k0rdentv1beta1.ServiceSet{}
		if err := k8s.Get(ctxT(t), ssKey, ss); err != nil || ss.DeletionTimestamp.IsZero() {
			return fmt.Errorf("ServiceSet not being deleted yet (%v)", err)
		}
		return nil
	})
	must(t, rc.Get(ctxT(t), types.NamespacedName{Name: rns}, n))
	if !n.DeletionTimestamp.IsZero() {
		t.Fatalf("the release namespace was deleted with the routes, before the release was uninstalled")
	}
	if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: "chart-route"}, &gwv1.HTTPRoute{}); err != nil {
		t.Errorf("the chart's own route was removed with the workspace's routes: %v", err)
	}
	must(t, k8s.Get(ctxT(t), ssKey, ss))
	ss.Finalizers = nil
	must(t, k8s.Update(ctxT(t), ss))
	deleteWorkspace(t, key)
	// Now its owner deletes it; the claim went with the routes.
	for _, name := range []string{rns, claim} {
		n := &corev1.Namespace{}
		if err := rc.Get(ctxT(t), types.NamespacedName{Name: name}, n); err == nil && n.DeletionTimestamp.IsZero() {
			t.Errorf("namespace %s was not deleted with the workspace", name)
		}
	}
}

// A regional cluster that also runs workspaces: workspace B runs on it (release namespace ws-<name>
// there), and a same-named workspace A of another namespace, on another child, routes through it.
// A's route namespace never takes B's release namespace: both install, A's mirror Service is in its
// own route namespace, B's namespace stays B's, and B (routed on its own cluster) follows the same
// short/qualified rule.
func TestRouteNamespaceNeverAReleaseNamespace(t *testing.T) {
	nsA, nsB := newNamespace(t), newNamespace(t)
	class := createClass(t, []workspacesv1.AccessEndpoint{httpEP("web", 80)}, nsA, nsB)
	cdA := createCluster(t, nsA, nil)
	cdB := name("cd")
	must(t, k8s.Create(ctxT(t), &k0rdentv1beta1.ClusterDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: cdB, Labels: map[string]string{routing.RegionalClusterNameLabel: cdB}},
		Spec:       k0rdentv1beta1.ClusterDeploymentSpec{Template: "cluster-template"},
	}))
	must(t, mgmt.WriteKubeconfigSecret(ctxT(t), nsB, cdB, regional.Kubeconfig))
	wsName := name("shared")

	a := runningWorkspace(t, nsA, wsName, class, cdA)
	waitWS(t, a, "A routed", routesReady(map[string]string{"web": "https://" + wsName + "." + domain}))
	b := runningWorkspace(t, nsB, wsName, class, cdB)
	wsB := waitWS(t, b, "B's release namespace ready", func(ws *workspacesv1.WorkspaceDeployment) error {
		c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReleaseNamespaceReadyCondition)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("ReleaseNamespaceReady %+v", c)
		}
		return nil
	})
	release := &corev1.Namespace{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Name: owned.LocalReleaseNamespace(wsName)}, release))
	if release.Labels[workspacesv1.WorkspaceUIDLabel] != string(wsB.UID) || release.Labels[routing.RouteNamespaceLabel] != "" {
		t.Errorf("B's release namespace: %v", release.Labels)
	}
	if err := rc.Get(ctxT(t), types.NamespacedName{Namespace: routing.RouteNamespace(wsName, nsA, false), Name: wsName + "-web"}, &corev1.Service{}); err != nil {
		t.Errorf("A's mirror Service: %v", err)
	}
	// B, routed on its own cluster, finds the short name claimed by A and takes the qualified URL.
	waitWS(t, b, "B qualified", func(ws *workspacesv1.WorkspaceDeployment) error {
		a := access(ws, "web")
		if want := "https://" + wsName + "-" + routing.Qualifier(nsB) + "." + domain; a.URL != want {
			return fmt.Errorf("access %+v, want URL %s", a, want)
		}
		return nil
	})
	// Deleting A removes its route namespace and leaves B's release namespace alone.
	deleteWorkspace(t, a)
	must(t, rc.Get(ctxT(t), types.NamespacedName{Name: owned.LocalReleaseNamespace(wsName)}, release))
	if !release.DeletionTimestamp.IsZero() {
		t.Errorf("deleting A deleted B's release namespace")
	}
	deleteWorkspace(t, b)
}
