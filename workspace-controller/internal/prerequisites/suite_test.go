package prerequisites

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/release"
)

// The installer and the collector run against a real management API server with the project's CRDs
// and k0rdent's (ServiceSet, ClusterDeployment, ServiceTemplate, ...). They read through a cache as
// the workspace-controller's manager does (the ServiceSet values transform of release.CacheByObject,
// the owned.IndexCluster index of workspaces) and write to the server; tests assert on the server
// (mgmt.Client) and wait for the cache where the next call reads what the previous one wrote.

const (
	waitTimeout  = 60 * time.Second
	pollInterval = 50 * time.Millisecond
)

var (
	mgmt   *testenv.Management
	cached client.Client // reads from the cache, writes to the server
	uniq   atomic.Int64
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

// runTests starts the management API server and the cache, runs the tests and stops both. A missing
// KUBEBUILDER_ASSETS fails loudly.
func runTests(m *testing.M) int {
	if !ctrllog.Log.Enabled() {
		ctrllog.SetLogger(logr.Discard())
	}
	mg, err := testenv.StartManagement()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	defer func() { _ = mg.Stop() }()
	mgmt = mg
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before the server stops (deferred calls run last first)
	if cached, err = startCache(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "the management cache: %v\n", err)
		return 1
	}
	return m.Run()
}

// startCache starts a cache of the management server configured as the workspace-controller's, and
// returns a client that reads through it.
func startCache(ctx context.Context) (client.Client, error) {
	c, err := cache.New(mgmt.Config, cache.Options{Scheme: mgmt.Scheme, ByObject: release.CacheByObject()})
	if err != nil {
		return nil, err
	}
	if err := c.IndexField(ctx, &workspacesv1.WorkspaceDeployment{}, owned.IndexCluster, func(o client.Object) []string {
		return []string{owned.ClusterKey(o.(*workspacesv1.WorkspaceDeployment)).String()}
	}); err != nil {
		return nil, err
	}
	if err := c.IndexField(ctx, &k0rdentv1beta1.ServiceSet{}, owned.IndexServiceSetCluster, func(o client.Object) []string {
		return owned.ServiceSetClusterKeys(o)
	}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, errors.New("the cache did not sync")
	}
	return client.New(mgmt.Config, client.Options{Scheme: mgmt.Scheme, Cache: &client.CacheOptions{Reader: c}})
}

// unique returns base with a suffix no other call returns.
func unique(base string) string { return fmt.Sprintf("%s-%d", base, uniq.Add(1)) }

// eventually polls f until it returns nil, failing the test with f's last error at the timeout.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(pollInterval)
	}
}

// testEnv is one test's part of the management server: the namespace of its workspaces (team) and
// of its ClusterDeployment "cd" (kcm), so that each test has its own cluster and ServiceSets.
type testEnv struct{ team, kcm string }

func newEnv(t *testing.T) testEnv {
	t.Helper()
	e := testEnv{team: unique("team"), kcm: unique("kcm")}
	for _, ns := range []string{e.team, e.kcm} {
		if err := mgmt.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// waitCached waits until the cache holds obj's key and check passes on the cached object (a
// NotFound from the cache is passed to check as well).
func waitCached[T client.Object](t *testing.T, what string, obj T, check func(T, error) error) {
	t.Helper()
	eventually(t, what, func() error {
		return check(obj, cached.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	})
}
