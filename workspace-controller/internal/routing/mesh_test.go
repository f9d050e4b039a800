package routing_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/routing"
)

// withMesh runs the controllers in mesh mode m for the rest of the test, and in none after it.
func withMesh(t *testing.T, m string) {
	t.Helper()
	must(t, stopControllers())
	meshMode = m
	must(t, startControllers())
	t.Cleanup(func() {
		if err := stopControllers(); err != nil {
			t.Errorf("stopping the controllers: %v", err)
		}
		meshMode = "none"
		if err := startControllers(); err != nil {
			t.Errorf("starting the controllers: %v", err)
		}
	})
}

// childClient is a client of the child with the Gateway API in its scheme.
func childClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(child.Config, client.Options{Scheme: routing.Scheme()})
	must(t, err)
	return c
}

// istioLabels are the istio labels of an object (istio.io/* and istio-injection).
func istioLabels(o metav1.Object) map[string]string {
	out := map[string]string{}
	for k, v := range o.GetLabels() {
		if strings.HasPrefix(k, "istio.io/") || k == "istio-injection" {
			out[k] = v
		}
	}
	return out
}

// meshWorkspace makes a running workspace with an HTTP and an SSH endpoint, and the release's Service
// of the HTTP endpoint on the child (the chart's); the SSH endpoint's Service is missing, which the
// mesh modes tolerate.
func meshWorkspace(t *testing.T) (ns, wsName, cd string, key types.NamespacedName) {
	t.Helper()
	ns = newNamespace(t)
	class := createClass(t, []workspacesv1.AccessEndpoint{httpEP("web", 8888), sshEP("ssh")}, ns)
	cd = createCluster(t, ns, nil)
	wsName = name("mesh")
	key = runningWorkspace(t, ns, wsName, class, cd)
	must(t, childClient(t).Create(ctxT(t), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: owned.LocalReleaseNamespace(wsName), Name: wsName + "-web", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "web", Port: 8888}}, Selector: map[string]string{"app": "web"}},
	}))
	return ns, wsName, cd, key
}

// checkMeshObjects checks the names and labels of one mode: the child's release namespace carries
// release; the mirror Services, the routes and the mirror namespace (mirror labels only) are named
// like the release namespace on the regional cluster; the mirror Service and the child's Service
// carry istio.io/global; the wsr- claim stays empty.
func checkMeshObjects(t *testing.T, ns, wsName string, release, mirror map[string]string) {
	t.Helper()
	cc := childClient(t)
	rel := owned.LocalReleaseNamespace(wsName)
	eventually(t, "labels of "+rel+" on the child", func() error {
		n := &corev1.Namespace{}
		if err := cc.Get(ctxT(t), types.NamespacedName{Name: rel}, n); err != nil {
			return err
		}
		if got := istioLabels(n); !maps.Equal(got, release) {
			return fmt.Errorf("istio labels %v, want %v", got, release)
		}
		return nil
	})
	n := &corev1.Namespace{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Name: rel}, n))
	if got := istioLabels(n); !maps.Equal(got, mirror) || n.Labels[routing.RouteNamespaceLabel] != "true" || n.Labels[workspacesv1.WorkspaceLabel] != wsName {
		t.Errorf("mirror namespace %s on the regional cluster: labels %v, want the istio labels %v and the owner labels", rel, n.Labels, mirror)
	}
	global := map[string]string{"istio.io/global": "true"}
	svc := &corev1.Service{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Namespace: rel, Name: wsName + "-web"}, svc))
	if got := istioLabels(svc); !maps.Equal(got, global) {
		t.Errorf("mirror Service %s/%s: istio labels %v", rel, svc.Name, got)
	}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Namespace: rel, Name: "web"}, &gwv1.HTTPRoute{}))
	must(t, rc.Get(ctxT(t), types.NamespacedName{Namespace: rel, Name: "ssh"}, &gwv1.TCPRoute{}))
	eventually(t, "istio.io/global on the child's Service", func() error {
		s := &corev1.Service{}
		if err := cc.Get(ctxT(t), types.NamespacedName{Namespace: rel, Name: wsName + "-web"}, s); err != nil {
			return err
		}
		if got := istioLabels(s); !maps.Equal(got, global) || s.Labels["app"] != "web" {
			return fmt.Errorf("labels %v", s.Labels)
		}
		return nil
	})
	claim := routing.RouteNamespace(wsName, ns, false)
	var hr gwv1.HTTPRouteList
	must(t, rc.List(ctxT(t), &hr, client.InNamespace(claim)))
	if len(hr.Items) != 0 {
		t.Errorf("the claim %s holds routes: %d", claim, len(hr.Items))
	}
}

// mirrorDeleted waits until the mirror namespace is gone or being deleted (envtest runs no namespace
// controller).
func mirrorDeleted(t *testing.T, rel string) {
	t.Helper()
	eventually(t, "mirror namespace "+rel+" deleted", func() error {
		n := &corev1.Namespace{}
		err := rc.Get(ctxT(t), types.NamespacedName{Name: rel}, n)
		if apierrors.IsNotFound(err) || err == nil && !n.DeletionTimestamp.IsZero() {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

// TestMeshNoneAddsNoLabels: mesh mode none (the default) keeps the wsr- route namespace as the home
// of routes and mirrors, and labels nothing for a mesh.
func TestMeshNoneAddsNoLabels(t *testing.T) {
	ns, wsName, _, key := meshWorkspace(t)
	waitWS(t, key, "routes ready", routesReady(map[string]string{"web": "", "ssh": ""}))
	rns := routing.RouteNamespace(wsName, ns, false)
	svc := &corev1.Service{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Namespace: rns, Name: wsName + "-web"}, svc))
	if got := istioLabels(svc); len(got) != 0 {
		t.Errorf("mirror Service in none: %v", got)
	}
	rel := owned.LocalReleaseNamespace(wsName)
	if err := rc.Get(ctxT(t), types.NamespacedName{Name: rel}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s on the regional cluster in none: %v", rel, err)
	}
	n := &corev1.Namespace{}
	must(t, childClient(t).Get(ctxT(t), types.NamespacedName{Name: rel}, n))
	if got := istioLabels(n); len(got) != 0 {
		t.Errorf("release namespace in none: %v", got)
	}
	s := &corev1.Service{}
	must(t, childClient(t).Get(ctxT(t), types.NamespacedName{Namespace: rel, Name: wsName + "-web"}, s))
	if got := istioLabels(s); len(got) != 0 {
		t.Errorf("child Service in none: %v", got)
	}
	deleteWorkspace(t, key)
}

// TestMeshAmbientAndSidecar: per mode, the labels and names of the release namespace, the mirror
// namespace named like it, and the Services; a same-named namespace that is not the workspace's is
// never shared; deleting the workspace deletes the mirror namespace.
func TestMeshAmbientAndSidecar(t *testing.T) {
	for _, tc := range []struct {
		mode            string
		release, mirror map[string]string
	}{
		{"ambient", map[string]string{"istio.io/dataplane-mode": "ambient"}, map[string]string{"istio.io/dataplane-mode": "ambient"}},
		{"sidecar", map[string]string{"istio-injection": "enabled"}, map[string]string{"istio-injection": "enabled"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			withMesh(t, tc.mode)
			ns, wsName, _, key := meshWorkspace(t)
			waitWS(t, key, "routes ready", routesReady(map[string]string{"web": "https://" + wsName + "." + domain, "ssh": ""}))
			checkMeshObjects(t, ns, wsName, tc.release, tc.mirror)
			deleteWorkspace(t, key)
			mirrorDeleted(t, owned.LocalReleaseNamespace(wsName))
		})
	}
}

// TestMeshMirrorNamespaceNotShared: a namespace on the regional cluster named like the release
// namespace that is not the workspace's mirror namespace (here one without owner labels: another
// tenant's same-named workspace behind this regional cluster looks the same) is not used: the routes
// are not ready and say why.
func TestMeshMirrorNamespaceNotShared(t *testing.T) {
	withMesh(t, "ambient")
	ns := newNamespace(t)
	class := createClass(t, []workspacesv1.AccessEndpoint{httpEP("web", 8888)}, ns)
	cd := createCluster(t, ns, nil)
	wsName := name("taken")
	rel := owned.LocalReleaseNamespace(wsName)
	must(t, rc.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rel, Labels: map[string]string{"team": "other"}}}))
	key := runningWorkspace(t, ns, wsName, class, cd)
	waitWS(t, key, "routes refused", func(ws *workspacesv1.WorkspaceDeployment) error {
		c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.RoutesReadyCondition)
		want := "namespace " + rel + " on regional cluster " + regionalNS + "/" + regionalCD + " is not this workspace's mirror namespace and is not shared"
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, want) || access(ws, "web").Ready {
			return fmt.Errorf("RoutesReady %+v", c)
		}
		return nil
	})
	var svcs corev1.ServiceList
	must(t, rc.List(ctxT(t), &svcs, client.InNamespace(rel)))
	if len(svcs.Items) != 0 {
		t.Errorf("mirror Services in another's namespace: %d", len(svcs.Items))
	}
	deleteWorkspace(t, key)
	n := &corev1.Namespace{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Name: rel}, n))
	if !n.DeletionTimestamp.IsZero() {
		t.Errorf("another's namespace %s is being deleted", rel)
	}
}

// waypointGateway is a per-child waypoint as the onboarding makes it.
func waypointGateway(name string) *gwv1.Gateway {
	return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: name}, Spec: gwv1.GatewaySpec{
		GatewayClassName: "istio-waypoint",
		Listeners:        []gwv1.Listener{{Name: "mesh", Port: 15008, Protocol: "HBONE"}},
	}}
}

func programWaypoint(t *testing.T, c client.Client, name string) {
	t.Helper()
	gw := &gwv1.Gateway{}
	must(t, c.Get(ctxT(t), types.NamespacedName{Namespace: "istio-system", Name: name}, gw))
	meta.SetStatusCondition(&gw.Status.Conditions, metav1.Condition{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", ObservedGeneration: gw.Generation})
	must(t, c.Status().Update(ctxT(t), gw))
}

// TestMeshWaypoint: the waypoint mode labels the release namespace with the per-child waypoint and
// the mirror namespace with the data plane only; the routes serve only once the waypoint
// <cd>-waypoint exists and is Programmed on the regional cluster and on the child, and until then
// say which is missing where.
func TestMeshWaypoint(t *testing.T) {
	dir, err := gatewayCRDDir()
	must(t, err)
	_, err = envtest.InstallCRDs(child.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true})
	must(t, err)
	cc := childClient(t)
	for _, c := range []client.Client{rc, cc} {
		if err := c.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	withMesh(t, "waypoint")
	ns, wsName, cd, key := meshWorkspace(t)
	wp := cd + "-waypoint"
	notReady := func(msg string) {
		t.Helper()
		waitWS(t, key, msg, func(ws *workspacesv1.WorkspaceDeployment) error {
			c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.RoutesReadyCondition)
			if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, msg) || access(ws, "web").Ready || !strings.Contains(access(ws, "web").Message, msg) {
				return fmt.Errorf("RoutesReady %+v, access %+v", c, ws.Status.Access)
			}
			return nil
		})
	}
	notReady("per-child waypoint istio-system/" + wp + " not found on the regional cluster " + regionalNS + "/" + regionalCD)
	must(t, rc.Create(ctxT(t), waypointGateway(wp)))
	notReady("per-child waypoint istio-system/" + wp + " on the regional cluster " + regionalNS + "/" + regionalCD + " is not programmed yet")
	programWaypoint(t, rc, wp)
	onChild := "child cluster (ClusterDeployment " + ns + "/" + cd + ")"
	notReady("per-child waypoint istio-system/" + wp + " not found on the " + onChild)
	must(t, cc.Create(ctxT(t), waypointGateway(wp)))
	notReady("per-child waypoint istio-system/" + wp + " on the " + onChild + " is not programmed yet")
	programWaypoint(t, cc, wp)
	waitWS(t, key, "routes ready", routesReady(map[string]string{"web": "", "ssh": ""}))
	checkMeshObjects(t, ns, wsName, map[string]string{
		"istio.io/dataplane-mode": "ambient", "istio.io/use-waypoint": wp,
		"istio.io/use-waypoint-namespace": "istio-system", "istio.io/ingress-use-waypoint": "true",
	}, map[string]string{"istio.io/dataplane-mode": "ambient"})
	deleteWorkspace(t, key)
	mirrorDeleted(t, owned.LocalReleaseNamespace(wsName))
}

// TestMeshModeSwitch: a workspace routed in none keeps its URLs when the controller switches to a
// mesh mode (its routes and mirrors move to the mirror namespace, the wsr- claim is emptied), and
// back in none the mirror namespace goes and the routes return to the claim.
func TestMeshModeSwitch(t *testing.T) {
	ns, wsName, _, key := meshWorkspace(t)
	url := "https://" + wsName + "." + domain
	waitWS(t, key, "routes ready in none", routesReady(map[string]string{"web": url, "ssh": ""}))
	claim := routing.RouteNamespace(wsName, ns, false)
	rel := owned.LocalReleaseNamespace(wsName)
	routesIn := func(n string) (int, error) {
		var hr gwv1.HTTPRouteList
		var tr gwv1.TCPRouteList
		if err := rc.List(ctxT(t), &hr, client.InNamespace(n)); err != nil {
			return 0, err
		}
		if err := rc.List(ctxT(t), &tr, client.InNamespace(n)); err != nil {
			return 0, err
		}
		return len(hr.Items) + len(tr.Items), nil
	}
	func() {
		withMesh(t, "ambient")
		eventually(t, "routes moved to "+rel, func() error {
			inClaim, err := routesIn(claim)
			if err != nil {
				return err
			}
			inMirror, err := routesIn(rel)
			if err != nil {
				return err
			}
			if inClaim != 0 || inMirror != 2 {
				return fmt.Errorf("%d routes in %s, %d in %s", inClaim, claim, inMirror, rel)
			}
			var svcs corev1.ServiceList
			if err := rc.List(ctxT(t), &svcs, client.InNamespace(claim)); err != nil || len(svcs.Items) != 0 {
				return fmt.Errorf("mirror Services left in %s: %d (%v)", claim, len(svcs.Items), err)
			}
			return nil
		})
		waitWS(t, key, "routes ready in ambient", routesReady(map[string]string{"web": url, "ssh": ""}))
		// Back to none: the cleanup of withMesh restarts the controllers in none.
		must(t, stopControllers())
		meshMode = "none"
		must(t, startControllers())
	}()
	mirrorDeleted(t, rel)
	eventually(t, "routes back in "+claim, func() error {
		n, err := routesIn(claim)
		if err != nil || n != 2 {
			return fmt.Errorf("%d routes in %s (%v)", n, claim, err)
		}
		return nil
	})
	waitWS(t, key, "routes ready in none again", routesReady(map[string]string{"web": url, "ssh": ""}))
	deleteWorkspace(t, key)
}
