package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/release"
)

const (
	waitTimeout     = 60 * time.Second
	pollInterval    = 100 * time.Millisecond
	testGracePeriod = 2 * time.Second
	// testDeleteTimeout is how long a deletion waits for an unreachable child.
	testDeleteTimeout = 3 * time.Second
	// testClusterGoneGrace is how long a workspace keeps what it holds for a ClusterDeployment that is
	// gone: long enough that a loaded machine still sees the grace before it passes.
	testClusterGoneGrace = 10 * time.Second
)

var (
	mgmt  *testenv.Management
	child *testenv.Child
	k8s   client.Client

	ctlMu sync.Mutex
	ctl   *controllers
	uniq  atomic.Int64
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(mg *testenv.Management) error {
		mgmt, k8s = mg, mg.Client
		c, err := testenv.StartChild("gpu-child")
		if err != nil {
			return err
		}
		child = c
		if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workspacesv1.DefaultServiceTemplateNamespace}}); err != nil {
			return err
		}
		return startControllers()
	})
}

// controllers is one running manager with the three controllers of the component.
type controllers struct {
	cancel context.CancelFunc
	done   chan error
}

// startControllers starts a manager wired by Setup, as main.go does, with short test timings.
func startControllers() error {
	ctlMu.Lock()
	defer ctlMu.Unlock()
	skip := true
	mgr, err := ctrl.NewManager(mgmt.Config, ctrl.Options{
		Scheme:                 mgmt.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &skip},
		Cache:                  cache.Options{ByObject: release.CacheByObject()}, // as the binary's
	})
	if err != nil {
		return err
	}
	// The component's own Setup, with short test timings and no route provider (this package's
	// tests have no regional cluster; internal/routing's suite runs with one).
	opts := DefaultOptions()
	opts.MaxConcurrentReconciles = 4
	opts.UnreachableRetry = 500 * time.Millisecond
	opts.DeployingRecheck = 2 * time.Second
	// Longer than waitTimeout: a waiter the tests see admitted was woken by an event, not a timer.
	opts.WaitingRetry = 10 * time.Minute
	opts.UnreachableDeleteTimeout = testDeleteTimeout
	opts.ChildRequestTimeout = 5 * time.Second
	opts.PrerequisiteGracePeriod = testGracePeriod
	opts.ClusterGoneGrace = testClusterGoneGrace
	opts.ChildCluster = childcluster.Options{Debounce: 100 * time.Millisecond, SyncTimeout: 5 * time.Second,
		HealthInterval: time.Second, BackoffBase: 200 * time.Millisecond, BackoffMax: 2 * time.Second}
	opts.DisableRouting = true
	if testOptions != nil {
		testOptions(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := Setup(ctx, mgr, opts); err != nil {
		cancel()
		return err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	ctl = &controllers{cancel: cancel, done: done}
	return nil
}

// testOptions, when set, adjusts the options of the controllers startControllers starts; a test that
// sets it restarts the controllers (withOptions).
var testOptions func(*Options)

// withOptions restarts the controllers with their options adjusted by f, and with the suite's own
// again when the test ends.
func withOptions(t *testing.T, f func(*Options)) {
	t.Helper()
	testOptions = f
	restartControllers(t)
	t.Cleanup(func() {
		testOptions = nil
		restartControllers(t)
	})
}

// stopControllers stops the running manager and waits for it.
func stopControllers() error {
	ctlMu.Lock()
	defer ctlMu.Unlock()
	if ctl == nil {
		return nil
	}
	ctl.cancel()
	err := <-ctl.done
	ctl = nil
	if err != nil {
		// A runnable that did not stop is a shutdown defect: show where every goroutine waits.
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
	}
	return err
}

// restartControllers stops the running manager and starts a new one, as a rollout or a crash does.
// The new one is started even when the old one did not stop cleanly, so one defect fails one test.
func restartControllers(t *testing.T) {
	t.Helper()
	stopErr := stopControllers()
	must(t, startControllers())
	if stopErr != nil {
		t.Fatalf("the controllers did not stop cleanly: %v", stopErr)
	}
}

// eventually polls f until it returns nil, failing the test with f's last error at the timeout.
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := name("t")
	if err := k8s.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// createTemplate creates a valid ServiceTemplate, as KCM would report it, in each namespace.
func createTemplate(t *testing.T, tmplName, version string, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		st := &k0rdentv1beta1.ServiceTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tmplName},
			Spec: k0rdentv1beta1.ServiceTemplateSpec{Helm: &k0rdentv1beta1.HelmSpec{ChartSpec: &k0rdentv1beta1.HelmChartSpec{
				Chart: "chart", Version: version, Interval: metav1.Duration{Duration: time.Minute},
				SourceRef: k0rdentv1beta1.LocalHelmChartSourceReference{Kind: "HelmRepository", Name: "kcm-templates"},
			}}},
		}
		err := k8s.Create(ctxT(t), st)
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		must(t, err)
		st.Status.Valid = true
		st.Status.ChartVersion = version
		must(t, k8s.Status().Update(ctxT(t), st))
	}
}

// classSpec returns a minimal class spec using template tmpl.
func classSpec(tmpl string) workspacesv1.WorkspaceClassSpec {
	return workspacesv1.WorkspaceClassSpec{
		DisplayName:     "Test",
		ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: tmpl},
		AccessEndpoints: []workspacesv1.AccessEndpoint{
			{Name: "web", Protocol: workspacesv1.EndpointProtocolHTTP, Port: 8888},
			{Name: "api", Protocol: workspacesv1.EndpointProtocolHTTP, Port: 8000},
			{Name: "ssh", Protocol: workspacesv1.EndpointProtocolSSH, Port: 22},
		},
	}
}

// createClass creates a class (and its templates in kcm-system and the extra namespaces) and waits
// until it is valid.
func createClass(t *testing.T, spec workspacesv1.WorkspaceClassSpec, templateNamespaces ...string) string {
	t.Helper()
	nss := append([]string{workspacesv1.DefaultServiceTemplateNamespace}, templateNamespaces...)
	createTemplate(t, spec.ServiceTemplate.Name, "1.2.3", nss...)
	for _, p := range spec.Prerequisites {
		createTemplate(t, p.ServiceTemplate.Name, "1.0.0", nss...)
	}
	c := &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: name("class")}, Spec: spec}
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
func createCluster(t *testing.T, ns string, kubeconfig []byte, mutate ...func(*k0rdentv1beta1.ClusterDeployment)) *k0rdentv1beta1.ClusterDeployment {
	t.Helper()
	cd := &k0rdentv1beta1.ClusterDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name("cd")},
		Spec:       k0rdentv1beta1.ClusterDeploymentSpec{Template: "cluster-template", Config: &apiextensionsv1.JSON{Raw: []byte("{}")}},
	}
	for _, m := range mutate {
		m(cd)
	}
	status := cd.Status
	must(t, k8s.Create(ctxT(t), cd))
	if len(status.Services) > 0 {
		cd.Status = status
		must(t, k8s.Status().Update(ctxT(t), cd))
	}
	if kubeconfig != nil {
		must(t, mgmt.WriteKubeconfigSecret(ctxT(t), ns, cd.Name, kubeconfig))
	}
	return cd
}

// gpuNode creates a Ready node with n GPUs of the resource and the labels.
func gpuNode(t *testing.T, c client.Client, res corev1.ResourceName, n int64, labels map[string]string) string {
	t.Helper()
	nodeName := name("node")
	must(t, childtest.CreateNode(ctxT(t), c, childtest.Node{Name: nodeName, Labels: labels, Allocatable: childtest.GPUs(res, n)}))
	return nodeName
}

// gpuPod binds a pod that holds n GPUs to a node. A create the child's quota admission refuses is
// tried again: after syncQuota the API server's quota evaluator may still count from its cached copy
// of the quota (the pods a stop deleted are not subtracted yet), and a loaded run read "exceeded
// quota" a moment after the sync. Tests that expect a refusal create their pods directly.
func gpuPod(t *testing.T, c client.Client, ns, node string, res corev1.ResourceName, n int64) string {
	t.Helper()
	podName := name("pod")
	eventually(t, "creating pod "+ns+"/"+podName, func() error {
		err := childtest.CreatePod(ctxT(t), c, childtest.Pod{Namespace: ns, Name: podName, Node: node, Requests: childtest.Requests(res, n)})
		quotaRefusal := apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota")
		if err != nil && !quotaRefusal {
			t.Fatal(err)
		}
		return err
	})
	return podName
}

func gpuResources(count int32, gpuType string) *workspacesv1.ResourceOverrides {
	return &workspacesv1.ResourceOverrides{PerReplica: &workspacesv1.PerReplicaResources{GPUCount: &count, GPUType: gpuType}}
}

// createWorkspace creates a workspace; mutate adjusts it first.
func createWorkspace(t *testing.T, ns, class, cd string, mutate ...func(*workspacesv1.WorkspaceDeployment)) types.NamespacedName {
	t.Helper()
	ws := &workspacesv1.WorkspaceDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name("ws")},
		Spec: workspacesv1.WorkspaceDeploymentSpec{
			WorkspaceClassRef:    class,
			ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: cd},
		},
	}
	for _, m := range mutate {
		m(ws)
	}
	must(t, k8s.Create(ctxT(t), ws))
	return client.ObjectKeyFromObject(ws)
}

func getWS(t *testing.T, key types.NamespacedName) *workspacesv1.WorkspaceDeployment {
	t.Helper()
	ws := &workspacesv1.WorkspaceDeployment{}
	must(t, k8s.Get(ctxT(t), key, ws))
	return ws
}

// waitPhase waits until the workspace is in the phase and, when reason is set, its Ready condition
// has that reason.
func waitPhase(t *testing.T, key types.NamespacedName, phase workspacesv1.WorkspacePhase, reason string) *workspacesv1.WorkspaceDeployment {
	t.Helper()
	var ws *workspacesv1.WorkspaceDeployment
	eventually(t, fmt.Sprintf("%s in phase %s (%s)", key, phase, reason), func() error {
		ws = &workspacesv1.WorkspaceDeployment{}
		if err := k8s.Get(ctxT(t), key, ws); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReadyCondition)
		if ws.Status.Phase != phase || (reason != "" && (ready == nil || ready.Reason != reason)) {
			r := ""
			if ready != nil {
				r = ready.Reason
			}
			return fmt.Errorf("phase %s, Ready reason %q, message %q", ws.Status.Phase, r, ws.Status.Message)
		}
		return nil
	})
	return ws
}

// waitServiceSet waits for the workspace's ServiceSet.
func waitServiceSet(t *testing.T, ws *workspacesv1.WorkspaceDeployment) *k0rdentv1beta1.ServiceSet {
	t.Helper()
	ss := &k0rdentv1beta1.ServiceSet{}
	key := types.NamespacedName{Namespace: owned.ClusterKey(ws).Namespace, Name: owned.ServiceSetName(ws)}
	eventually(t, "ServiceSet "+key.String(), func() error { return k8s.Get(ctxT(t), key, ss) })
	return ss
}

// setServiceState plays KCM: it writes the ServiceSet's per-service state through the status
// subresource.
func setServiceState(t *testing.T, key types.NamespacedName, state k0rdentv1beta1.ServiceDeploymentState, failure string) {
	t.Helper()
	eventually(t, "writing ServiceSet status", func() error {
		ss := &k0rdentv1beta1.ServiceSet{}
		if err := k8s.Get(ctxT(t), key, ss); err != nil {
			return err
		}
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		ss.Status.Services = nil
		for _, svc := range ss.Spec.Services {
			ss.Status.Services = append(ss.Status.Services, k0rdentv1beta1.ServiceState{
				Type: k0rdentv1beta1.ServiceTypeHelm, Name: svc.Name, Namespace: svc.Namespace, Template: svc.Template,
				State: state, FailureMessage: failure, LastStateTransitionTime: &now,
			})
		}
		ss.Status.Deployed = state == k0rdentv1beta1.ServiceStateDeployed
		return k8s.Status().Update(ctxT(t), ss)
	})
}

// serviceSetValues decodes the values of the ServiceSet's only service.
func serviceSetValues(t *testing.T, ss *k0rdentv1beta1.ServiceSet) map[string]any {
	t.Helper()
	if len(ss.Spec.Services) != 1 {
		t.Fatalf("ServiceSet has %d services, want 1", len(ss.Spec.Services))
	}
	out := map[string]any{}
	must(t, yaml.Unmarshal([]byte(ss.Spec.Services[0].Values), &out))
	return out
}

func condition(ws *workspacesv1.WorkspaceDeployment, condType string) metav1.Condition {
	if c := meta.FindStatusCondition(ws.Status.Conditions, condType); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func jsonRaw(t *testing.T, v any) *apiextensionsv1.JSON {
	t.Helper()
	raw, err := json.Marshal(v)
	must(t, err)
	return &apiextensionsv1.JSON{Raw: raw}
}

func qty(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func modelLabels(model string) map[string]string {
	return map[string]string{gpu.LabelGPUModel: model}
}

func contains(s, sub string) error {
	if !strings.Contains(s, sub) {
		return fmt.Errorf("%q does not contain %q", s, sub)
	}
	return nil
}

// workspaceServiceSets lists the ServiceSets labelled for a workspace.
func workspaceServiceSets(t *testing.T, ws *workspacesv1.WorkspaceDeployment) []k0rdentv1beta1.ServiceSet {
	t.Helper()
	var list k0rdentv1beta1.ServiceSetList
	must(t, k8s.List(ctxT(t), &list, client.MatchingLabels{
		workspacesv1.WorkspaceLabel: ws.Name, workspacesv1.WorkspaceNamespaceLabel: ws.Namespace,
	}))
	return list.Items
}
