package childcluster

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

var mgmt *testenv.Management

func TestMain(m *testing.M) {
	testenv.Main(m, func(mg *testenv.Management) error { mgmt = mg; return nil })
}

// wait is how long a test waits for something that should happen promptly; it bounds a hang, it is
// not a latency assertion.
const wait = 60 * time.Second

func startChild(t *testing.T, name string) *testenv.Child {
	t.Helper()
	ch, err := testenv.StartChild(name)
	if err != nil {
		t.Fatalf("StartChild(%q): %v", name, err)
	}
	t.Cleanup(func() { _ = ch.Stop() })
	return ch
}

func newCache(t *testing.T, opts Options) *Cache {
	t.Helper()
	opts.Reader = mgmt.Client
	if opts.Debounce == 0 {
		opts.Debounce = 50 * time.Millisecond
	}
	if opts.HealthInterval == 0 {
		opts.HealthInterval = 300 * time.Millisecond
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// eventually polls cond until it holds or wait passes.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(wait)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: still not true after %s: %s", what, wait, last)
}

// expectKey waits for key on ch, skipping others.
func expectKey(t *testing.T, ch <-chan Change, key types.NamespacedName) Change {
	t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case k := <-ch:
			if k.Cluster == key {
				return k
			}
		case <-timeout:
			t.Fatalf("no notification for %s", key)
		}
	}
}

// expectChange waits for a notification of key whose Change satisfies ok.
func expectChange(t *testing.T, ch <-chan Change, key types.NamespacedName, what string, ok func(Change) bool) {
	t.Helper()
	timeout := time.After(wait)
	var seen []Change
	for {
		select {
		case k := <-ch:
			if k.Cluster == key && ok(k) {
				return
			}
			seen = append(seen, k)
		case <-timeout:
			t.Fatalf("no notification of %s saying %s; got %+v", key, what, seen)
		}
	}
}

func gpuNode(name string, n int64) childtest.Node {
	return childtest.Node{Name: name, Labels: map[string]string{gpu.LabelGPUModel: "A100"}, Allocatable: childtest.GPUs("nvidia.com/gpu", n)}
}

func TestGetWatchesNodesAndPods(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "watch")
	key := types.NamespacedName{Namespace: "watch", Name: "alpha"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := childtest.CreateNode(ctx, child.Client, gpuNode("gpu-1", 8)); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Options{})
	events, cancel := c.subscribe()
	defer cancel()

	cl, err := c.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	nodes := cl.Nodes()
	if len(nodes) != 1 || nodes[0].Name != "gpu-1" || nodes[0].ManagedFields != nil || len(nodes[0].Status.Conditions) != 1 {
		t.Fatalf("want the trimmed node gpu-1, got %+v", nodes)
	}
	if again, err := c.Get(ctx, key.Namespace, key.Name); err != nil || again != cl {
		t.Fatalf("a second Get must return the same connection: %p vs %p, %v", again, cl, err)
	}

	// A node added, a pod bound, a pod finished: each is seen and notified.
	if err := childtest.CreateNode(ctx, child.Client, gpuNode("gpu-2", 4)); err != nil {
		t.Fatal(err)
	}
	// Each notification says what changed: the Nodes, or the Pods of a namespace and no other. The
	// connect's notification (anything changed) comes first; the changes after it are told apart.
	expectChange(t, events, key, "anything changed", func(c Change) bool { return c.All })
	if err := childtest.CreateNode(ctx, child.Client, gpuNode("gpu-3", 4)); err != nil {
		t.Fatal(err)
	}
	expectChange(t, events, key, "the Nodes changed", func(c Change) bool { return c.Nodes && !c.All && len(c.Namespaces) == 0 })
	eventually(t, "three nodes", func() (bool, string) { return len(cl.Nodes()) == 3, fmt.Sprint(len(cl.Nodes())) })

	pod := childtest.Pod{Namespace: "work", Name: "train", Node: "gpu-1", Requests: childtest.Requests("nvidia.com/gpu", 2)}
	if err := childtest.CreatePod(ctx, child.Client, pod); err != nil {
		t.Fatal(err)
	}
	expectChange(t, events, key, "the Pods of namespace work changed, and no other's", func(c Change) bool {
		return !c.All && c.PodsOf("work") && !c.PodsOf("other")
	})
	eventually(t, "the pod running on gpu-1", func() (bool, string) {
		pods := cl.Pods()
		return len(pods) == 1 && pods[0].Spec.NodeName == "gpu-1" && pods[0].Status.Phase == corev1.PodRunning, fmt.Sprintf("%+v", pods)
	})
	if err := childtest.SetPodPhase(ctx, child.Client, "work", "train", corev1.PodSucceeded); err != nil {
		t.Fatal(err)
	}
	expectKey(t, events, key)
	eventually(t, "the finished pod gone from the cache", func() (bool, string) { return len(cl.Pods()) == 0, fmt.Sprint(len(cl.Pods())) })

	// The direct client reaches the child.
	var nsList corev1.NamespaceList
	if err := cl.Client().List(ctx, &nsList); err != nil || len(nsList.Items) == 0 {
		t.Fatalf("direct client: %v, %d namespaces", err, len(nsList.Items))
	}
}

func TestSecretRotationRebuilds(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "rotate")
	key := types.NamespacedName{Namespace: "rotate", Name: "beta"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Options{})
	first, err := c.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		t.Fatal(err)
	}

	// A label edit moves the resourceVersion but not the data: no rebuild.
	secret := &corev1.Secret{}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: k0rdentv1beta1.KubeconfigSecretName(key.Name)}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Labels["touched"] = "yes"
	if err := mgmt.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if same, err := c.Get(ctx, key.Namespace, key.Name); err != nil || same != first {
		t.Fatalf("a label edit must not rebuild: %v", err)
	}

	// New credentials: a new connection, and the old one stops.
	user, err := child.Env.AddUser(envtest.User{Name: "rotated", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, kc); err != nil {
		t.Fatal(err)
	}
	second, err := c.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatal("a rotated kubeconfig must give a new connection")
	}
	eventually(t, "the old informers stopped", func() (bool, string) {
		return first.nodes.IsStopped() && first.pods.IsStopped(), "still running"
	})
	if len(second.Nodes()) != 0 || second.nodes.IsStopped() {
		t.Fatal("the new connection must be live")
	}
}

func TestForgetStopsWithoutLeaks(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "forget")
	keys := []types.NamespacedName{{Namespace: "forget", Name: "a"}, {Namespace: "forget", Name: "b"}, {Namespace: "forget", Name: "c"}}
	for _, k := range keys {
		// A user each: one connection each (one kubeconfig content would share one connection).
		user, err := child.Env.AddUser(envtest.User{Name: "forget-" + k.Name, Groups: []string{"system:masters"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		kc, err := user.KubeConfig()
		if err != nil {
			t.Fatal(err)
		}
		if err := mgmt.WriteKubeconfigSecret(ctx, k.Namespace, k.Name, kc); err != nil {
			t.Fatal(err)
		}
	}
	// Warm the management client's connections and the runtime before counting.
	warm := newCache(t, Options{})
	if _, err := warm.Get(ctx, keys[0].Namespace, keys[0].Name); err != nil {
		t.Fatal(err)
	}
	warm.Stop()
	runtime.GC()
	before := runtime.NumGoroutine()

	c := newCache(t, Options{})
	_, cancel := c.subscribe()
	defer cancel()
	var clusters []*Cluster
	for _, k := range keys {
		cl, err := c.Get(ctx, k.Namespace, k.Name)
		if err != nil {
			t.Fatal(err)
		}
		clusters = append(clusters, cl)
	}
	during := runtime.NumGoroutine()
	for _, k := range keys[:2] {
		c.Forget(k)
	}
	if !clusters[0].nodes.IsStopped() || !clusters[1].pods.IsStopped() || clusters[2].nodes.IsStopped() {
		t.Fatal("Forget must stop exactly the forgotten connections")
	}
	if got := len(c.Keys()); got != 1 {
		t.Fatalf("want 1 entry left, got %d", got)
	}
	cancel()
	c.Stop()
	if !clusters[2].nodes.IsStopped() {
		t.Fatal("Stop must stop every connection")
	}
	if _, err := c.Get(ctx, keys[2].Namespace, keys[2].Name); err != ErrStopped {
		t.Fatalf("Get after Stop: want ErrStopped, got %v", err)
	}
	const slack = 3
	deadline := time.Now().Add(wait)
	for runtime.NumGoroutine() > before+slack && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before+slack {
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
		t.Fatalf("goroutines: %d before, %d with 3 connections, %d after stopping (slack %d)\n%s", before, during, after, slack, buf.String())
	}
	t.Logf("goroutines: %d before, %d with 3 connections, %d after", before, during, runtime.NumGoroutine())
}

func TestUnreachable(t *testing.T) {
	ctx := context.Background()
	ns := "unreachable"
	var connects atomic.Int32
	c := newCache(t, Options{SyncTimeout: 2 * time.Second, BackoffBase: time.Hour, OnConnect: func(types.NamespacedName, time.Duration, error) { connects.Add(1) }})

	// No Secret.
	_, err := c.Get(ctx, ns, "missing")
	if !IsUnreachable(err) || UnreachableReason(err) != ReasonKubeconfigMissing {
		t.Fatalf("missing Secret: want KubeconfigMissing, got %v", err)
	}

	// A Secret that holds no kubeconfig; the error never quotes it.
	if err := mgmt.WriteKubeconfigSecret(ctx, ns, "garbage", []byte("token: hunter2-secret\n{{{")); err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(ctx, ns, "garbage")
	if UnreachableReason(err) != ReasonKubeconfigInvalid || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("garbage: want KubeconfigInvalid without the content, got %v", err)
	}

	// A kubeconfig for a server that is not there: ConnectFailed, then backoff without a new attempt.
	data, err := clientcmd.Write(kubeconfigFor("https://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := mgmt.WriteKubeconfigSecret(ctx, ns, "nowhere", data); err != nil {
		t.Fatal(err)
	}
	before := connects.Load()
	_, err = c.Get(ctx, ns, "nowhere")
	if UnreachableReason(err) != ReasonConnectFailed {
		t.Fatalf("closed port: want ConnectFailed, got %v", err)
	}
	_, err2 := c.Get(ctx, ns, "nowhere")
	if UnreachableReason(err2) != ReasonConnectFailed || RetryAfter(err2) <= 0 {
		t.Fatalf("within backoff: want the same error with a retry time, got %v", err2)
	}
	if got := connects.Load() - before; got != 1 {
		t.Fatalf("backoff: want 1 connect attempt, got %d", got)
	}
}

func TestChildGoingAwayAndBack(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "flaky")
	key := types.NamespacedName{Namespace: "flaky", Name: "gamma"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := childtest.CreateNode(ctx, child.Client, gpuNode("gpu-1", 8)); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Options{})
	events, cancel := c.subscribe()
	defer cancel()
	cl, err := c.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		t.Fatal(err)
	}
	// The connect says anything changed, but not the child's reachability; going away and coming
	// back do.
	if got := expectKey(t, events, key); !got.All || got.Reach {
		t.Fatalf("the connect told %+v, want All without Reach", got)
	}
	if err := child.Pause(); err != nil {
		t.Fatal(err)
	}
	expectChange(t, events, key, "the child unreachable", func(c Change) bool { return c.All && c.Reach })
	eventually(t, "Get reports the child unhealthy", func() (bool, string) {
		_, err := c.Get(ctx, key.Namespace, key.Name)
		return UnreachableReason(err) == ReasonUnhealthy, fmt.Sprint(err)
	})
	if len(cl.Nodes()) != 1 {
		t.Fatal("the last seen nodes stay while the child is away")
	}
	if err := child.Resume(); err != nil {
		t.Fatal(err)
	}
	expectChange(t, events, key, "the child reachable again", func(c Change) bool { return c.All && c.Reach })
	eventually(t, "Get returns the same connection again", func() (bool, string) {
		got, err := c.Get(ctx, key.Namespace, key.Name)
		return err == nil && got == cl, fmt.Sprint(err)
	})
	// The watches work again.
	if err := childtest.CreateNode(ctx, child.Client, gpuNode("gpu-2", 8)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new node seen after recovery", func() (bool, string) { return len(cl.Nodes()) == 2, fmt.Sprint(len(cl.Nodes())) })
}

func TestConnectsAreBounded(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "bounded")
	c := newCache(t, Options{MaxConcurrentConnects: 2})
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		name := fmt.Sprintf("cd-%d", i)
		if err := mgmt.WriteKubeconfigSecret(ctx, "bounded", name, child.Kubeconfig); err != nil {
			t.Fatal(err)
		}
		go func() { _, err := c.Get(ctx, "bounded", name); errs <- err }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if peak := c.peakInFlight.Load(); peak > 2 || peak < 1 {
		t.Fatalf("want at most 2 connects at once, saw %d", peak)
	}
	if got := len(c.Keys()); got != n {
		t.Fatalf("want %d connections, got %d", n, got)
	}
}

func TestIdleConnectionsStop(t *testing.T) {
	ctx, cancelCtx := context.WithCancel(context.Background())
	defer cancelCtx()
	child := startChild(t, "idle")
	key := types.NamespacedName{Namespace: "idle", Name: "delta"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Options{IdleTimeout: 500 * time.Millisecond})
	go func() { _ = c.Start(ctx) }()
	cl, err := c.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the idle connection stopped", func() (bool, string) {
		return cl.nodes.IsStopped() && len(c.Keys()) == 0, fmt.Sprint(c.Keys())
	})
}

func TestNewNeedsReader(t *testing.T) {
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "Reader") {
		t.Fatalf("want an error naming Reader, got %v", err)
	}
}

// kubeconfigFor returns a kubeconfig for server with a dummy token, trusting the management API
// server's CA (any valid CA: the servers it is used for never finish a TLS handshake).
func kubeconfigFor(server string) clientcmdapi.Config {
	return clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: server, CertificateAuthorityData: mgmt.Config.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {Token: "dummy"}},
		Contexts:       map[string]*clientcmdapi.Context{"x": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "x",
	}
}
