package routing_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/routing"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspace"
)

// The suite runs three separate API servers: the management cluster, a child cluster (where the
// releases would run) and a regional cluster with the Gateway API CRDs and a tenant Gateway. The
// test plays the Gateway controller (gatewayController) and KCM (setServiceState).

const (
	waitTimeout  = 60 * time.Second
	pollInterval = 100 * time.Millisecond
	domain       = "tenant.example.test"
	gwNamespace  = "gw-system"
	gwName       = "tenant"
	regionalNS   = "kcm-system" // the default regional ClusterDeployment lives here
	regionalCD   = "regional"
)

var (
	mgmt     *testenv.Management
	child    *testenv.Child
	regional *testenv.Child
	k8s      client.Client
	rc       client.Client // the regional cluster

	ctlMu sync.Mutex
	ctl   *controllers
	// sweepEvery is the sweeper's interval of the next startControllers.
	sweepEvery = time.Second
	// meshMode is the --workspace-mesh-mode of the next startControllers (withMesh).
	meshMode = "none"
	uniq     atomic.Int64
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(mg *testenv.Management) error {
		mgmt, k8s = mg, mg.Client
		cs, err := testenv.StartChildren("route-child", "regional")
		if err != nil {
			return err
		}
		child, regional = cs[0], cs[1]
		dir, err := gatewayCRDDir()
		if err != nil {
			return err
		}
		if _, err := envtest.InstallCRDs(regional.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true}); err != nil {
			return fmt.Errorf("installing the Gateway API CRDs on the regional cluster: %w", err)
		}
		rc, err = client.New(regional.Config, client.Options{Scheme: routing.Scheme()})
		if err != nil {
			return err
		}
		ctx := context.Background()
		for _, ns := range []string{workspacesv1.DefaultServiceTemplateNamespace, regionalNS} {
			if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		if err := rc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gwNamespace}}); err != nil {
			return err
		}
		if err := createGateway(ctx); err != nil {
			return err
		}
		if err := mgmt.WriteKubeconfigSecret(ctx, regionalNS, regionalCD, regional.Kubeconfig); err != nil {
			return err
		}
		go gatewayController(context.Background())
		return startControllers()
	})
}

// gatewayCRDDir is the experimental channel (standard plus TCPRoute and the rest) of the Gateway API
// module this module builds against, read from the module cache.
func gatewayCRDDir() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		return "", fmt.Errorf("finding the sigs.k8s.io/gateway-api module: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "experimental"), nil
}

// tenantGateway is a Gateway with a wildcard HTTPS listener and a pool of three TCP listeners.
func tenantGateway() *gwv1.Gateway {
	host := gwv1.Hostname("*." + domain)
	mode := gwv1.TLSModeTerminate
	all := gwv1.NamespacesFromAll
	allowed := &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}
	ls := []gwv1.Listener{{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: &host, AllowedRoutes: allowed,
		TLS: &gwv1.ListenerTLSConfig{Mode: &mode, CertificateRefs: []gwv1.SecretObjectReference{{Name: "wildcard"}}}}}
	for i := 1; i <= 3; i++ {
		ls = append(ls, gwv1.Listener{Name: gwv1.SectionName(fmt.Sprintf("ssh-%d", i)), Protocol: gwv1.TCPProtocolType, Port: gwv1.PortNumber(2200 + i), AllowedRoutes: allowed})
	}
	return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gwNamespace, Name: gwName}, Spec: gwv1.GatewaySpec{GatewayClassName: "test", Listeners: ls}}
}

func createGateway(ctx context.Context) error { return rc.Create(ctx, tenantGateway()) }

// gatewayController plays the Gateway implementation: every route attached to the tenant Gateway is
// Accepted, with ResolvedRefs true when its backend Service exists in its namespace.
func gatewayController(ctx context.Context) {
	for ctx.Err() == nil {
		var hr gwv1.HTTPRouteList
		if err := rc.List(ctx, &hr); err == nil {
			for i := range hr.Items {
				r := &hr.Items[i]
				var refs []gwv1.BackendRef
				for _, rule := range r.Spec.Rules {
					for _, b := range rule.BackendRefs {
						refs = append(refs, b.BackendRef)
					}
				}
				if st, changed := routeStatus(ctx, r.Namespace, r.Generation, r.Spec.ParentRefs, refs, r.Status.Parents); changed {
					r.Status.Parents = st
					_ = rc.Status().Update(ctx, r)
				}
			}
		}
		var tr gwv1.TCPRouteList
		if err := rc.List(ctx, &tr); err == nil {
			for i := range tr.Items {
				r := &tr.Items[i]
				var refs []gwv1.BackendRef
				for _, rule := range r.Spec.Rules {
					refs = append(refs, rule.BackendRefs...)
				}
				if st, changed := routeStatus(ctx, r.Namespace, r.Generation, r.Spec.ParentRefs, refs, r.Status.Parents); changed {
					r.Status.Parents = st
					_ = rc.Status().Update(ctx, r)
				}
			}
		}
		time.Sleep(pollInterval)
	}
}

func routeStatus(ctx context.Context, ns string, gen int64, parents []gwv1.ParentReference, refs []gwv1.BackendRef, have []gwv1.RouteParentStatus) ([]gwv1.RouteParentStatus, bool) {
	resolved, reason := metav1.ConditionTrue, "ResolvedRefs"
	for _, b := range refs {
		if err := rc.Get(ctx, types.NamespacedName{Namespace: ns, Name: string(b.Name)}, &corev1.Service{}); err != nil {
			resolved, reason = metav1.ConditionFalse, "BackendNotFound"
		}
	}
	var out []gwv1.RouteParentStatus
	for _, p := range parents {
		if string(p.Name) != gwName {
			continue
		}
		out = append(out, gwv1.RouteParentStatus{ParentRef: p, ControllerName: "example.test/gateway", Conditions: []metav1.Condition{
			{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: gen, LastTransitionTime: metav1.Now()},
			{Type: "ResolvedRefs", Status: resolved, Reason: reason, ObservedGeneration: gen, LastTransitionTime: metav1.Now()},
		}})
	}
	if len(out) == len(have) {
		same := true
		for i := range out {
			for _, t := range []string{"Accepted", "ResolvedRefs"} {
				a, b := meta.FindStatusCondition(out[i].Conditions, t), meta.FindStatusCondition(have[i].Conditions, t)
				same = same && b != nil && a.Status == b.Status && a.ObservedGeneration == b.ObservedGeneration
			}
		}
		if same {
			return nil, false
		}
	}
	return out, true
}

type controllers struct {
	cancel context.CancelFunc
	done   chan error
}

// startControllers starts a manager wired by workspace.Setup, as main.go does, with short test timings.
func startControllers() error {
	ctlMu.Lock()
	defer ctlMu.Unlock()
	skip := true
	mgr, err := ctrl.NewManager(mgmt.Config, ctrl.Options{
		Scheme: mgmt.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return err
	}
	// The component's own Setup, with short test timings.
	opts := workspace.DefaultOptions()
	opts.MaxConcurrentReconciles = 4
	opts.UnreachableRetry = 500 * time.Millisecond
	opts.RoutingRetry, opts.RoutingResync, opts.RouteSweepInterval = 300*time.Millisecond, time.Second, sweepEvery
	opts.GatewayNamespace, opts.GatewayName = gwNamespace, gwName
	opts.DefaultRegionalCluster = regionalNS + "/" + regionalCD
	opts.MeshMode = meshMode
	opts.ChildCluster = childcluster.Options{Debounce: 100 * time.Millisecond, SyncTimeout: 5 * time.Second,
		HealthInterval: time.Second, BackoffBase: 200 * time.Millisecond, BackoffMax: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	if err := workspace.Setup(ctx, mgr, opts); err != nil {
		cancel()
		return err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	ctl = &controllers{cancel: cancel, done: done}
	return nil
}

func stopControllers() error {
	ctlMu.Lock()
	defer ctlMu.Unlock()
	if ctl == nil {
		return nil
	}
	ctl.cancel()
	err := <-ctl.done
	ctl = nil
	return err
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(pollInterval)
	}
	t.Fatalf("timed out waiting for %s: %v", what, err)
}

func name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, uniq.Add(1)) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := name("t")
	must(t, k8s.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	return ns
}

func httpEP(n string, port int32) workspacesv1.AccessEndpoint {
	return workspacesv1.AccessEndpoint{Name: n, Protocol: workspacesv1.EndpointProtocolHTTP, Port: port}
}

func sshEP(n string) workspacesv1.AccessEndpoint {
	return workspacesv1.AccessEndpoint{Name: n, Protocol: workspacesv1.EndpointProtocolSSH, Port: 22}
}

// createClass creates a valid class with the endpoints, its template in kcm-system and in the
// ClusterDeployments' namespaces.
func createClass(t *testing.T, eps []workspacesv1.AccessEndpoint, nss ...string) string {
	t.Helper()
	tmpl := "routing-app"
	for _, ns := range append([]string{workspacesv1.DefaultServiceTemplateNamespace}, nss...) {
		st := &k0rdentv1beta1.ServiceTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tmpl},
			Spec: k0rdentv1beta1.ServiceTemplateSpec{Helm: &k0rdentv1beta1.HelmSpec{ChartSpec: &k0rdentv1beta1.HelmChartSpec{
				Chart: "chart", Version: "1.0.0", Interval: metav1.Duration{Duration: time.Minute},
				SourceRef: k0rdentv1beta1.LocalHelmChartSourceReference{Kind: "HelmRepository", Name: "kcm-templates"},
			}}},
		}
		err := k8s.Create(ctxT(t), st)
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		must(t, err)
		st.Status.Valid, st.Status.ChartVersion = true, "1.0.0"
		must(t, k8s.Status().Update(ctxT(t), st))
	}
	c := &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: name("class")}, Spec: workspacesv1.WorkspaceClassSpec{
		DisplayName: "Routing", ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: tmpl}, AccessEndpoints: eps,
	}}
	must(t, k8s.Create(ctxT(t), c))
	eventually(t, "class valid", func() error {
		got := &workspacesv1.WorkspaceClass{}
		if err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(c), got); err != nil {
			return err
		}
		if !got.Status.Valid {
			return fmt.Errorf("class not valid: %q", got.Status.ValidationError)
		}
		return nil
	})
	return c.Name
}

// createCluster creates a ClusterDeployment whose kubeconfig Secret reaches the child.
func createCluster(t *testing.T, ns string, labels map[string]string) string {
	t.Helper()
	cd := &k0rdentv1beta1.ClusterDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name("cd"), Labels: labels},
		Spec:       k0rdentv1beta1.ClusterDeploymentSpec{Template: "cluster-template", Config: &apiextensionsv1.JSON{Raw: []byte("{}")}},
	}
	must(t, k8s.Create(ctxT(t), cd))
	must(t, mgmt.WriteKubeconfigSecret(ctxT(t), ns, cd.Name, child.Kubeconfig))
	return cd.Name
}

// runningWorkspace creates a workspace and plays KCM until it is Running.
func runningWorkspace(t *testing.T, ns, wsName, class, cd string) types.NamespacedName {
	t.Helper()
	ws := &workspacesv1.WorkspaceDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wsName},
		Spec:       workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: class, ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: cd}},
	}
	must(t, k8s.Create(ctxT(t), ws))
	key := client.ObjectKeyFromObject(ws)
	ssKey := types.NamespacedName{Namespace: ns, Name: owned.ServiceSetName(ws)}
	eventually(t, "ServiceSet "+ssKey.String(), func() error { return k8s.Get(ctxT(t), ssKey, &k0rdentv1beta1.ServiceSet{}) })
	eventually(t, "ServiceSet deployed", func() error {
		ss := &k0rdentv1beta1.ServiceSet{}
		if err := k8s.Get(ctxT(t), ssKey, ss); err != nil {
			return err
		}
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		ss.Status.Services = nil
		for _, svc := range ss.Spec.Services {
			ss.Status.Services = append(ss.Status.Services, k0rdentv1beta1.ServiceState{Type: k0rdentv1beta1.ServiceTypeHelm, Name: svc.Name,
				Namespace: svc.Namespace, Template: svc.Template, State: k0rdentv1beta1.ServiceStateDeployed, LastStateTransitionTime: &now})
		}
		ss.Status.Deployed = true
		return k8s.Status().Update(ctxT(t), ss)
	})
	waitWS(t, key, "Running", func(ws *workspacesv1.WorkspaceDeployment) error {
		if ws.Status.Phase != workspacesv1.PhaseRunning {
			return fmt.Errorf("phase %s: %s", ws.Status.Phase, ws.Status.Message)
		}
		return nil
	})
	return key
}

// waitWS waits until check accepts the workspace and returns it.
func waitWS(t *testing.T, key types.NamespacedName, what string, check func(*workspacesv1.WorkspaceDeployment) error) *workspacesv1.WorkspaceDeployment {
	t.Helper()
	var ws *workspacesv1.WorkspaceDeployment
	eventually(t, key.String()+": "+what, func() error {
		ws = &workspacesv1.WorkspaceDeployment{}
		if err := k8s.Get(ctxT(t), key, ws); err != nil {
			return err
		}
		return check(ws)
	})
	return ws
}

// routesReady checks RoutesReady and the access entries: want maps endpoint name to URL ("" = any)
// for entries that must be ready.
func routesReady(want map[string]string) func(*workspacesv1.WorkspaceDeployment) error {
	return func(ws *workspacesv1.WorkspaceDeployment) error {
		c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.RoutesReadyCondition)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != workspacesv1.ReasonRoutesReady {
			return fmt.Errorf("RoutesReady %+v; access %+v", c, ws.Status.Access)
		}
		if ws.Status.Phase != workspacesv1.PhaseRunning {
			return fmt.Errorf("phase %s", ws.Status.Phase)
		}
		for _, a := range ws.Status.Access {
			u, ok := want[a.Name]
			if !ok {
				continue
			}
			if !a.Ready || (u != "" && a.URL != u) {
				return fmt.Errorf("access %s = %+v, want ready with URL %q", a.Name, a, u)
			}
		}
		return nil
	}
}

func access(ws *workspacesv1.WorkspaceDeployment, ep string) workspacesv1.AccessStatus {
	for _, a := range ws.Status.Access {
		if a.Name == ep {
			return a
		}
	}
	return workspacesv1.AccessStatus{}
}

// deleteWorkspace deletes a workspace and waits until it is gone.
func deleteWorkspace(t *testing.T, key types.NamespacedName) {
	t.Helper()
	must(t, client.IgnoreNotFound(k8s.Delete(ctxT(t), &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})))
	eventually(t, key.String()+" gone", func() error {
		err := k8s.Get(ctxT(t), key, &workspacesv1.WorkspaceDeployment{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

func tcpSection(t *testing.T, ns, n string) string {
	t.Helper()
	r := &gwv1.TCPRoute{}
	must(t, rc.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: n}, r))
	return string(*r.Spec.ParentRefs[0].SectionName)
}
