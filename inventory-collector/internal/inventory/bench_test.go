package inventory

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// envInt reads a positive integer from the environment.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkNodeChangeToColony is the inventory scenario: N ClusterDeployments in one Colony (default
// 200), 90% of them pointing at the three test API servers (so each server is watched by many
// ClusterDeployments) with M GPU nodes each (default 50), and 10% black-holed (the address accepts TCP
// and never answers). It measures how long a node change on a child takes to reach the Colony's
// status.gpuInventory (p50, p99), the collector's RSS and heap, goroutines per connected child, and
// status writes in a quiet window after the changes (idle writes). Set INVENTORY_BENCH_CLUSTERS and
// INVENTORY_BENCH_NODES to change N and M. The reachable ClusterDeployments share the three servers'
// admin kubeconfigs, so they share three connections (common/childcluster); INVENTORY_BENCH_DISTINCT=1
// gives each its own user (its own client certificate), hence its own connection, as ClusterDeployments
// of distinct clusters have.
func BenchmarkNodeChangeToColony(b *testing.B) {
	n, m := envInt("INVENTORY_BENCH_CLUSTERS", 200), envInt("INVENTORY_BENCH_NODES", 50)
	unreachable := n / 10
	ctx := context.Background()
	runtime.GC()
	goroutinesBefore := runtime.NumGoroutine()

	for i, ch := range children {
		for j := range m {
			node := childtest.Node{Name: fmt.Sprintf("bench-%d", j), Labels: map[string]string{gpu.LabelGPUModel: "B200"}, Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, 8)}
			if err := childtest.CreateNode(ctx, ch.Client, node); err != nil {
				b.Fatalf("child-%d: %v", i, err)
			}
		}
	}
	clusters := map[string]*testenv.Child{}
	var onChild0 []string
	for i := range n - unreachable {
		suffix := fmt.Sprintf("c%03d", i)
		clusters[suffix] = children[i%len(children)]
		if i%len(children) == 0 {
			onChild0 = append(onChild0, "bench-"+suffix)
		}
	}
	var kubeconfig func(string, *testenv.Child) []byte
	if os.Getenv("INVENTORY_BENCH_DISTINCT") == "1" {
		kubeconfig = func(suffix string, ch *testenv.Child) []byte {
			user, err := ch.Env.AddUser(envtest.User{Name: "bench-" + suffix, Groups: []string{"system:masters"}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			kc, err := user.KubeConfig()
			if err != nil {
				b.Fatal(err)
			}
			return kc
		}
	}
	identities := "one identity per API server"
	if kubeconfig != nil {
		identities = "one identity per ClusterDeployment"
	}
	start := time.Now()
	colony := colonyFixtureWith(b, benchNS, "bench", clusters, kubeconfig)
	var refs []any
	for suffix := range clusters {
		refs = append(refs, map[string]any{"name": "bench-" + suffix, "namespace": benchNS})
	}
	for i := range unreachable {
		name := fmt.Sprintf("bench-hole%03d", i)
		createClusterDeployment(b, colony, name)
		if err := mgmt.WriteKubeconfigSecret(ctx, benchNS, name, kubeconfigOf(b, testenv.BlackHoleURL(b), &clientcmdapi.AuthInfo{Token: "t"})); err != nil {
			b.Fatal(err)
		}
		refs = append(refs, map[string]any{"name": name, "namespace": benchNS})
	}
	applyColonyControllerStatus(b, colony, refs)
	key := types.NamespacedName{Namespace: benchNS, Name: "bench"}
	b200 := func(e infrav1.ClusterGPUInventory) int64 {
		for _, o := range e.Offerings {
			if o.Model == "B200" {
				return o.Total
			}
		}
		return 0
	}
	waitInventory(b, key, "every cluster's inventory", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		reachable := 0
		for _, e := range inv {
			if e.Reachable && b200(e) == int64(8*m) {
				reachable++
			}
		}
		return reachable == n-unreachable
	})
	initial := time.Since(start)

	var latencies []time.Duration
	want := int64(8 * m)
	b.ResetTimer()
	// Each iteration makes 20 changes on child-0: a node added, removed, added, removed, ...; enough
	// for a p99 to mean something.
	const changesPerOp = 20
	for b.Loop() {
		for k := range changesPerOp {
			extra := "bench-extra"
			t0 := time.Now()
			if k%2 == 0 {
				want += 8
				if err := childtest.CreateNode(ctx, children[0].Client, childtest.Node{Name: extra, Labels: map[string]string{gpu.LabelGPUModel: "B200"}, Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, 8)}); err != nil {
					b.Fatal(err)
				}
			} else {
				want -= 8
				if err := childtest.DeleteNode(ctx, children[0].Client, extra); err != nil {
					b.Fatal(err)
				}
			}
			waitInventory(b, key, "the node change", func(inv map[string]infrav1.ClusterGPUInventory) bool {
				for _, cd := range onChild0 {
					if b200(inv[cd]) != want {
						return false
					}
				}
				return true
			})
			latencies = append(latencies, time.Since(t0))
		}
	}
	b.StopTimer()

	// Idle writes: status writes in a quiet window of ten debounce intervals after the last change.
	time.Sleep(3 * debounce)
	writesBefore := testutil.ToFloat64(statusWrites.WithLabelValues("success"))
	time.Sleep(10 * debounce)
	idleWrites := testutil.ToFloat64(statusWrites.WithLabelValues("success")) - writesBefore

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	goroutines := runtime.NumGoroutine()
	slices.Sort(latencies)
	p := func(q float64) time.Duration { return latencies[int(q*float64(len(latencies)-1))] }
	connected := len(collector.Clusters.Keys())
	perChild := float64(goroutines-goroutinesBefore) / float64(max(connected, 1))
	rss := rssMiB()
	b.ReportMetric(float64(p(0.5).Milliseconds()), "ms-p50/change")
	b.ReportMetric(float64(p(0.99).Milliseconds()), "ms-p99/change")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "MiB-heap")
	b.ReportMetric(rss, "MiB-rss")
	b.ReportMetric(perChild, "goroutines/child")
	b.ReportMetric(idleWrites, "idle-writes")
	fmt.Printf("inventory-collector bench: %d ClusterDeployments (%d black-holed) over %d API servers, %d GPU nodes each, %s; first full inventory after %s\n",
		n, unreachable, len(children), m, identities, initial.Round(time.Millisecond))
	fmt.Printf("  node change -> Colony status: p50 %s, p99 %s, max %s over %d changes (debounce %s)\n",
		p(0.5).Round(time.Millisecond), p(0.99).Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond), len(latencies), debounce)
	fmt.Printf("  RSS %.1f MiB (whole test process), heap in use %.1f MiB, goroutines %d (%d before), %.1f per child over %d entries\n",
		rss, float64(ms.HeapInuse)/(1<<20), goroutines, goroutinesBefore, perChild, connected)
	fmt.Printf("  status writes in a quiet window of %s: %.0f\n", 10*debounce, idleWrites)
	writeProfiles(b)

	// Leave the children as they were for a later run in the same process.
	for _, ch := range children {
		for j := range m {
			_ = childtest.DeleteNode(ctx, ch.Client, fmt.Sprintf("bench-%d", j))
		}
		_ = childtest.DeleteNode(ctx, ch.Client, "bench-extra")
	}
	_ = mgmt.Client.Delete(ctx, getColony(b, key))
}

// writeProfiles writes a goroutine dump (goroutines.txt) and a heap profile (heap.pprof) of the
// connected state into the folder INVENTORY_BENCH_PROFILE names, if set.
func writeProfiles(b *testing.B) {
	dir := os.Getenv("INVENTORY_BENCH_PROFILE")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for file, p := range map[string]struct {
		name  string
		debug int
	}{"goroutines.txt": {"goroutine", 1}, "heap.pprof": {"heap", 0}} {
		f, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.Lookup(p.name).WriteTo(f, p.debug); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	fmt.Printf("  profiles written to %s\n", dir)
}

// rssMiB returns the resident set size of this process, from /proc/self/status (0 elsewhere).
func rssMiB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}
