package bootstrap

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

var mgmt *testenv.Management

func TestMain(m *testing.M) {
	testenv.Main(m, func(mg *testenv.Management) error { mgmt = mg; return nil })
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// waitFor polls cond until it holds; the bound only guards against a hung test.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s (last error: %v)", what, lastErr)
}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := mgmt.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}

// startManager starts mgr and returns a function that stops it and returns Start's error.
func startManager(t *testing.T, mgr ctrl.Manager) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func TestNewManagerRejectsInvalidOptions(t *testing.T) {
	o := NewOptions("webhook")
	o.LogFormat = "yaml"
	o.RestConfig = mgmt.Config
	if _, err := NewManager(o, mgmt.Scheme); err == nil || !strings.Contains(err.Error(), "--log-format") {
		t.Errorf("NewManager accepted an invalid log format: %v", err)
	}
	if _, err := NewManager(nil, mgmt.Scheme); err == nil {
		t.Errorf("nil options accepted")
	}
	if _, err := NewManager(NewOptions("webhook"), nil); err == nil {
		t.Errorf("nil scheme accepted")
	}
}

func TestManagerServesProbesSecureMetricsAndElectsALeader(t *testing.T) {
	ctx := context.Background()
	const ns = "bootstrap-leader"
	createNamespace(t, ns)

	logs := &syncBuffer{}
	o := NewOptions("bootstrap-test")
	o.RestConfig = mgmt.Config
	o.MetricsBindAddress = freeAddr(t)
	o.HealthProbeBindAddress = freeAddr(t)
	o.PprofBindAddress = freeAddr(t)
	o.LeaderElectionNamespace = ns
	o.LogWriter = logs

	counter := prometheus.NewCounter(prometheus.CounterOpts{Name: MetricName(o.Component, "widgets_total"), Help: "test"})
	if err := RegisterMetrics(counter); err != nil {
		t.Fatal(err)
	}
	if err := RegisterMetrics(counter); err != nil {
		t.Fatalf("registering twice must be harmless: %v", err)
	}
	mutated := false
	mgr, err := NewManager(o, mgmt.Scheme, func(mo *ctrl.Options) { mutated = mo.LeaderElectionID == o.LeaderElectionID() })
	if err != nil {
		t.Fatal(err)
	}
	if !mutated {
		t.Errorf("mutate function not called with the prepared options")
	}
	stop := startManager(t, mgr)

	probe := "http://" + o.HealthProbeBindAddress
	for _, path := range []string{"/healthz", "/readyz"} {
		waitFor(t, path, func() (bool, error) {
			resp, err := http.Get(probe + path)
			if err != nil {
				return false, err
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK, fmt.Errorf("status %d", resp.StatusCode)
		})
	}

	waitFor(t, "the profiler", func() (bool, error) {
		resp, err := http.Get("http://" + o.PprofBindAddress + "/debug/pprof/cmdline")
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("status %d", resp.StatusCode)
	})

	lease := &coordinationv1.Lease{}
	waitFor(t, "the leader-election lease", func() (bool, error) {
		err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bootstrap-test.exalsius.ai"}, lease)
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", err
	})
	<-mgr.Elected()

	checkSecureMetrics(t, "https://"+o.MetricsBindAddress+"/metrics", ns)

	if err := stop(); err != nil {
		t.Fatalf("manager stopped with %v", err)
	}
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Errorf("lease not released on shutdown: holder %q", *lease.Spec.HolderIdentity)
	}
	if out := logs.String(); !strings.Contains(out, `"logger":"bootstrap-test`) {
		t.Errorf("manager logs are not JSON named after the component:\n%s", out)
	}
}

// checkSecureMetrics asserts that the metrics endpoint speaks HTTPS over HTTP/1.1, turns away
// anonymous callers and callers without RBAC, and serves a caller allowed to GET /metrics.
func checkSecureMetrics(t *testing.T, url, ns string) {
	t.Helper()
	ctx := context.Background()
	httpClient := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed test certificate
		ForceAttemptHTTP2: true,
	}}
	get := func(token string) (int, string, string, error) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return 0, "", "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Proto, string(body), nil
	}

	var code int
	var proto string
	waitFor(t, "the metrics server", func() (bool, error) {
		var err error
		code, proto, _, err = get("")
		return err == nil, err
	})
	if code != http.StatusUnauthorized {
		t.Errorf("anonymous /metrics: status %d, want 401", code)
	}
	if proto != "HTTP/1.1" {
		t.Errorf("metrics negotiated %s; HTTP/2 must be off by default", proto)
	}

	cs := kubernetes.NewForConfigOrDie(mgmt.Config)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper", Namespace: ns}}
	if err := mgmt.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := tr.Status.Token
	if code, _, _, err = get(token); err != nil || code != http.StatusForbidden {
		t.Errorf("/metrics without RBAC: status %d (%v), want 403", code, err)
	}

	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := mgmt.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	var body string
	// The authorizer caches the earlier denial for a short while.
	waitFor(t, "an authorized /metrics scrape", func() (bool, error) {
		var err error
		code, _, body, err = get(token)
		return err == nil && code == http.StatusOK, fmt.Errorf("status %d: %v", code, err)
	})
	if !strings.Contains(body, "bootstrap_test_widgets_total") {
		t.Errorf("registered collector missing from /metrics")
	}
}

func TestWatchNamespaceLimitsTheCache(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"watched", "unwatched"} {
		createNamespace(t, ns)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: ns}}
		if err := mgmt.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	o := NewOptions("bootstrap-watch")
	o.RestConfig = mgmt.Config
	o.MetricsBindAddress, o.HealthProbeBindAddress, o.LeaderElect = "0", "0", false
	o.WatchNamespace = "watched"
	o.LogWriter = io.Discard
	mgr, err := NewManager(o, mgmt.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	var list corev1.ConfigMapList
	if err := mgr.GetClient().List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if cm.Namespace != "watched" {
			t.Errorf("cache holds %s/%s outside the watch namespace", cm.Namespace, cm.Name)
		}
	}
	found := false
	for _, cm := range list.Items {
		found = found || (cm.Namespace == "watched" && cm.Name == "cm")
	}
	if !found {
		t.Errorf("cache misses the watched namespace's ConfigMap")
	}
	for _, cm := range list.Items {
		if len(cm.ManagedFields) > 0 {
			t.Errorf("cached %s/%s keeps %d managedFields entries; the cache strips them", cm.Namespace, cm.Name, len(cm.ManagedFields))
		}
	}
	if err := mgr.GetClient().List(ctx, &list, client.InNamespace("unwatched")); err == nil {
		t.Errorf("listing an unwatched namespace from the cache succeeded")
	}
	// Cluster-scoped objects stay visible.
	var nss corev1.NamespaceList
	if err := mgr.GetClient().List(ctx, &nss); err != nil || len(nss.Items) == 0 {
		t.Errorf("namespaces (cluster-scoped) not listable: %v", err)
	}
}

func TestTransitionEventsReachTheEventsAPI(t *testing.T) {
	ctx := context.Background()
	const ns = "bootstrap-events"
	createNamespace(t, ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "subject", Namespace: ns}}
	if err := mgmt.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	o := NewOptions("bootstrap-events")
	o.RestConfig = mgmt.Config
	o.MetricsBindAddress, o.HealthProbeBindAddress, o.LeaderElect = "0", "0", false
	o.LogWriter = io.Discard
	mgr, err := NewManager(o, mgmt.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)

	var conds []metav1.Condition
	meta.SetStatusCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Waiting", Message: "waiting for the cluster"})
	conditions.RecordTransitions(mgr.GetEventRecorder(o.Component), cm, nil, conds)

	var list eventsv1.EventList
	waitFor(t, "the transition event", func() (bool, error) {
		err := mgmt.Client.List(ctx, &list, client.InNamespace(ns))
		return err == nil && len(list.Items) > 0, err
	})
	e := list.Items[0]
	if e.Regarding.Name != "subject" || e.Type != corev1.EventTypeWarning || e.Reason != "Waiting" || e.Action != "Ready" ||
		e.Note != "waiting for the cluster" || e.ReportingController != "bootstrap-events" {
		t.Errorf("unexpected event %+v", e)
	}
}
