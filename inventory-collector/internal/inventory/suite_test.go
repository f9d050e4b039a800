package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/inventory-collector/internal/sharding"
)

// Namespaces: the main collector serves mainNS and benchNS; the sharded pair serves shardNS.
const (
	mainNS  = "inventory"
	benchNS = "inventory-bench"
	shardNS = "inventory-sharded"

	// debounce is the child-cluster cache's notification window in these tests.
	debounce = 500 * time.Millisecond
	// wait bounds how long a test waits for something that should happen; it is not a latency
	// assertion.
	wait = 90 * time.Second
)

var (
	mgmt     *testenv.Management
	children []*testenv.Child
	// collector is the unsharded reconciler serving mainNS and benchNS.
	collector *Reconciler
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

// runTests starts the management server, three separate child API servers and the unsharded
// collector, runs the tests and stops everything. A missing KUBEBUILDER_ASSETS fails loudly.
func runTests(m *testing.M) int {
	mg, err := testenv.StartManagement()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	defer func() { _ = mg.Stop() }()
	mgmt = mg
	for _, name := range []string{"child-0", "child-1", "child-2"} {
		ch, err := testenv.StartChild(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
			return 1
		}
		defer func() { _ = ch.Stop() }()
		children = append(children, ch)
	}
	r, stop, err := startCollector([]string{mainNS, benchNS}, sharding.Shard{Count: 1})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the collector: %v\n", err)
		return 1
	}
	defer stop()
	collector = r
	return m.Run()
}

// startCollector runs a manager with the inventory reconciler for the given namespaces and shard.
func startCollector(namespaces []string, shard sharding.Shard) (*Reconciler, context.CancelFunc, error) {
	return startCollectorWith(namespaces, shard, nil)
}

// startCollectorWith is startCollector with the options adjusted by tune before Setup wires the
// collector, as main.go does.
func startCollectorWith(namespaces []string, shard sharding.Shard, tune func(*Options)) (*Reconciler, context.CancelFunc, error) {
	for _, ns := range namespaces {
		if err := mgmt.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, nil, err
		}
	}
	defaults := map[string]cache.Config{}
	for _, ns := range namespaces {
		defaults[ns] = cache.Config{}
	}
	skip := true
	mgr, err := ctrl.NewManager(mgmt.Config, ctrl.Options{
		Scheme:                 mgmt.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: defaults},
		Controller:             config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return nil, nil, err
	}
	opts := DefaultOptions()
	opts.ShardIndex, opts.ShardCount = shard.Index, shard.Count
	opts.MaxConcurrentReconciles = 2
	opts.Debounce = debounce
	opts.ChildHealthInterval = time.Second
	opts.ChildCluster.BackoffBase, opts.ChildCluster.BackoffMax = time.Second, 2*time.Second
	if tune != nil {
		tune(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, err := setup(ctx, mgr, opts)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		}
	}()
	return r, cancel, nil
}

// colonyFixture creates a Colony whose ClusterDeployments (named <colony>-<suffix>) reach the given
// children, and writes the status fields the colony-controller would: phase, counts, conditions and
// clusterDeploymentRefs, under the colony-controller's field manager.
func colonyFixture(t testing.TB, ns, name string, clusters map[string]*testenv.Child) *infrav1.Colony {
	t.Helper()
	return colonyFixtureWith(t, ns, name, clusters, nil)
}

// colonyFixtureWith is colonyFixture with each ClusterDeployment's kubeconfig from kubeconfig (nil:
// the child's admin kubeconfig).
func colonyFixtureWith(t testing.TB, ns, name string, clusters map[string]*testenv.Child, kubeconfig func(suffix string, child *testenv.Child) []byte) *infrav1.Colony {
	t.Helper()
	ctx := context.Background()
	colony := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := mgmt.Client.Create(ctx, colony); err != nil {
		t.Fatalf("creating Colony: %v", err)
	}
	var refs []any
	for suffix, child := range clusters {
		cdName := name + "-" + suffix
		createClusterDeployment(t, colony, cdName)
		kc := child.Kubeconfig
		if kubeconfig != nil {
			kc = kubeconfig(suffix, child)
		}
		if err := mgmt.WriteKubeconfigSecret(ctx, ns, cdName, kc); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, map[string]any{"name": cdName, "namespace": ns})
	}
	applyColonyControllerStatus(t, colony, refs)
	return colony
}

func createClusterDeployment(t testing.TB, colony *infrav1.Colony, name string) {
	t.Helper()
	yes := true
	cd := &k0rdentv1beta1.ClusterDeployment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: colony.Namespace, Name: name,
			Labels: map[string]string{infrav1.ColonyLabel: colony.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: infrav1.GroupVersion.String(), Kind: "Colony", Name: colony.Name, UID: colony.UID, Controller: &yes,
			}},
		},
		Spec: k0rdentv1beta1.ClusterDeploymentSpec{Template: "test-template"},
	}
	if err := mgmt.Client.Create(context.Background(), cd); err != nil {
		t.Fatalf("creating ClusterDeployment %s: %v", name, err)
	}
}

// colonyControllerStatus is what the fake colony-controller writes.
func applyColonyControllerStatus(t testing.TB, colony *infrav1.Colony, refs []any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": infrav1.GroupVersion.String(),
		"kind":       "Colony",
		"metadata":   map[string]any{"name": colony.Name, "namespace": colony.Namespace},
		"status": map[string]any{
			"phase":                 "Ready",
			"totalClusters":         int64(len(refs)),
			"readyClusters":         int64(len(refs)),
			"observedGeneration":    int64(1),
			"kubeconfigSecretName":  colony.Name + "-kubeconfig",
			"clusterDeploymentRefs": refs,
			"conditions": []any{map[string]any{
				"type": "Ready", "status": "True", "reason": "AllClustersReady", "message": "all ready",
				"lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": int64(1),
			}},
		},
	}}
	if err := mgmt.Client.Status().Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner("colony-controller"), client.ForceOwnership); err != nil {
		t.Fatalf("writing the colony-controller's status: %v", err)
	}
}

// getColony reads a Colony from the API server.
func getColony(t testing.TB, key types.NamespacedName) *infrav1.Colony {
	t.Helper()
	c := &infrav1.Colony{}
	if err := mgmt.Client.Get(context.Background(), key, c); err != nil {
		t.Fatalf("reading Colony %s: %v", key, err)
	}
	return c
}

// waitInventory polls the Colony until cond holds for its gpuInventory.
func waitInventory(t testing.TB, key types.NamespacedName, what string, cond func(map[string]infrav1.ClusterGPUInventory) bool) map[string]infrav1.ClusterGPUInventory {
	t.Helper()
	deadline := time.Now().Add(wait)
	var last map[string]infrav1.ClusterGPUInventory
	for time.Now().Before(deadline) {
		c := &infrav1.Colony{}
		if err := mgmt.Client.Get(context.Background(), key, c); err == nil {
			last = c.Status.GPUInventory
			if cond(last) {
				return last
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := json.MarshalIndent(last, "", "  ")
	t.Fatalf("%s: not reached within %s; last gpuInventory:\n%s", what, wait, b)
	return nil
}

// waitColony polls the Colony until cond holds for it.
func waitColony(t testing.TB, key types.NamespacedName, what string, cond func(*infrav1.Colony) bool) *infrav1.Colony {
	t.Helper()
	deadline := time.Now().Add(wait)
	var last *infrav1.Colony
	for time.Now().Before(deadline) {
		c := &infrav1.Colony{}
		if err := mgmt.Client.Get(context.Background(), key, c); err == nil {
			last = c
			if cond(c) {
				return c
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	var st any
	if last != nil {
		st = last.Status
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	t.Fatalf("%s: not reached within %s; last status:\n%s", what, wait, b)
	return nil
}
