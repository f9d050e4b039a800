package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/release"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspace"
)

var mgmt *testenv.Management

func TestMain(m *testing.M) {
	out := io.Discard
	if v := os.Getenv(testenv.EnvVerbose); v == "1" || v == "true" {
		out = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(out)))
	testenv.Main(m, func(mg *testenv.Management) error {
		mgmt = mg
		return nil
	})
}

// TestChildCacheReadsSecretDataOnlyOnChange: the child cluster cache as workspace.Setup wires it reads a
// kubeconfig Secret's data once, then only after the Secret changed, however often a workspace
// asks for the child.
func TestChildCacheReadsSecretDataOnlyOnChange(t *testing.T) {
	child, err := testenv.StartChild("child")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Stop() })
	// The deadline is for the test, not for starting its API servers, which can take most of it on a
	// loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("wiring-%d", time.Now().UnixNano()%100000)
	if err := mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.WriteKubeconfigSecret(ctx, ns, "cd", child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(mgmt.Config, ctrl.Options{Scheme: mgmt.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := childcluster.New(workspace.SecretReaders(mgr, childcluster.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(cache); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the manager stopped with an error: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("manager cache did not sync")
	}
	for i := 0; i < 5; i++ {
		if _, err := cache.Get(ctx, ns, "cd"); err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
	}
	if n := cache.SecretReads(); n != 1 {
		t.Fatalf("%d reads of the Secret's data for 5 gets of an unchanged Secret, want 1", n)
	}
}

// TestServiceSetsCachedWithoutValues: the manager as this binary makes it (bootstrapOptions) keeps a
// ServiceSet's inline values out of its cache, a digest in their place, and the API server keeps the
// values as they were written.
func TestServiceSetsCachedWithoutValues(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := bootstrapOptions()
	opts.RestConfig, opts.MetricsBindAddress, opts.HealthProbeBindAddress = mgmt.Config, "0", "0"
	opts.LeaderElect, opts.LogWriter = false, io.Discard
	mgr, err := bootstrap.NewManager(opts, mgmt.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the manager stopped with an error: %v", err)
		}
	})

	ns := fmt.Sprintf("cache-%d", time.Now().UnixNano()%100000)
	if err := mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	values := strings.Repeat("password: not-in-the-cache\n", 1000)
	ss := &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ss"},
		Spec: k0rdentv1beta1.ServiceSetSpec{Cluster: "cd",
			Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: []k0rdentv1beta1.ServiceWithValues{{Name: "app", Namespace: "ws-app", Template: "app-1-0-0", Values: values}}}}
	if err := mgmt.Client.Create(ctx, ss); err != nil {
		t.Fatal(err)
	}
	cached := &k0rdentv1beta1.ServiceSet{}
	for {
		err := mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(ss), cached)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the ServiceSet never reached the cache: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := cached.Spec.Services[0].Values; got != release.ValuesDigest(values) {
		t.Fatalf("the cache holds %d bytes of values (%.40q...), want their digest", len(got), got)
	}
	live := &k0rdentv1beta1.ServiceSet{}
	if err := mgr.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(ss), live); err != nil {
		t.Fatal(err)
	}
	if live.Spec.Services[0].Values != values {
		t.Fatal("the API server's ServiceSet lost its values")
	}
}
