package inventory

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster/childtest"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testenv"
)

// envInt reads a positive integer from the environment.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkNodeChangeToColony measures how long a node change on a child takes to reach the Colony's
// status.gpuInventory, with N ClusterDeployments whose kubeconfigs point at the three test API servers
// (so each server is watched N/3 times) and M GPU nodes per server. Set INVENTORY_BENCH_CLUSTERS and
// INVENTORY_BENCH_NODES to change N and M. It prints latency percentiles, heap and goroutines.
func BenchmarkNodeChangeToColony(b *testing.B) {
	n, m := envInt("INVENTORY_BENCH_CLUSTERS", 30), envInt("INVENTORY_BENCH_NODES", 50)
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
	for i := range n {
		suffix := fmt.Sprintf("c%03d", i)
		clusters[suffix] = children[i%len(children)]
		if i%len(children) == 0 {
			onChild0 = append(onChild0, "bench-"+suffix)
		}
	}
	start := time.Now()
	colonyFixture(b, benchNS, "bench", clusters)
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
		if len(inv) != n {
			return false
		}
		for _, e := range inv {
			if !e.Reachable || b200(e) != int64(8*m) {
				return false
			}
		}
		return true
	})
	initial := time.Since(start)

	var latencies []time.Duration
	want := int64(8 * m)
	b.ResetTimer()
	// Each iteration makes four changes on child-0: a node added, removed, added, removed.
	const changesPerOp = 4
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

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	goroutines := runtime.NumGoroutine()
	slices.Sort(latencies)
	p := func(q float64) time.Duration { return latencies[int(q*float64(len(latencies)-1))] }
	b.ReportMetric(float64(p(0.5).Milliseconds()), "ms-p50/change")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "MiB-heap")
	b.ReportMetric(float64(goroutines), "goroutines")
	fmt.Printf("inventory-collector bench: %d ClusterDeployments over %d API servers, %d GPU nodes each; first full inventory after %s\n",
		n, len(children), m, initial.Round(time.Millisecond))
	fmt.Printf("  node change -> Colony status: p50 %s, p90 %s, max %s over %d changes (debounce %s)\n",
		p(0.5).Round(time.Millisecond), p(0.9).Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond), len(latencies), debounce)
	fmt.Printf("  heap in use %.1f MiB, goroutines %d (%d before the bench Colony), connections %d\n",
		float64(ms.HeapInuse)/(1<<20), goroutines, goroutinesBefore, len(collector.Clusters.Keys()))

	// Leave the children as they were for a later run in the same process.
	for _, ch := range children {
		for j := range m {
			_ = childtest.DeleteNode(ctx, ch.Client, fmt.Sprintf("bench-%d", j))
		}
		_ = childtest.DeleteNode(ctx, ch.Client, "bench-extra")
	}
	colony := getColony(b, key)
	_ = mgmt.Client.Delete(ctx, colony)
}
