package clustercachebench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Timeouts of the phases; none is a latency assertion, each only ends a phase that would not.
const (
	syncWait     = 10 * time.Minute
	changeWait   = time.Minute
	rotationWait = 3 * time.Minute
	frozenWait   = 4 * time.Minute
	holesWait    = 5 * time.Minute
	// settle lets the caches finish what follows the first inventory and the holes' failed connects
	// before memory is read.
	settle = 5 * time.Second
	poll   = 50 * time.Millisecond
)

// cacheUnderTest is one of the two caches, driven the way its users drive it.
type cacheUnderTest interface {
	// describe names the cache and the settings it runs with.
	describe() string
	// start starts the cache, in a manager of its own, for the world's clusters; what its handlers
	// see goes to obs.
	start(ctx context.Context, w *world, obs *observer) error
	// connection returns the connection through which the cache serves the cluster's Nodes now,
	// all of them listable, as a comparable value that a reconnect changes; nil when it serves none.
	connection(ctx context.Context, key types.NamespacedName) any
	// health reports whether the cache reports a failed probe of the cluster, and whether it reports
	// the cluster unreachable (childcluster) or disconnected (ClusterCache).
	health(ctx context.Context, key types.NamespacedName) (probeFailed, down bool)
	// connectFailed reports whether a connect to the cluster has failed.
	connectFailed(ctx context.Context, key types.NamespacedName) bool
	// failedConnects returns how many connects to the clusters keys have failed so far.
	failedConnects(keys []types.NamespacedName) int
	stop()
}

// BenchmarkCaches runs the same scenario against each cache, with one identity per child API server
// (shared: the reachable clusters of a server share its admin kubeconfig) and with one per cluster
// (distinct: a client certificate each, as clusters of distinct children have):
//
//   - first inventory: from the start of the cache (and of the manager it runs in) until the Nodes
//     of every reachable cluster are listable from it;
//   - holes: the time until a connect to every black-holed cluster has failed once; the phases
//     below start then, so that no connect to a hole is under way while they run;
//   - memory and goroutines then (heap in use after a GC, the process's resident set, goroutines),
//     over the figures before the start, per reachable cluster;
//   - change latency: a label change on a Node of child 0 until a handler registered on the cache
//     has seen it for every cluster on child 0 (and for the first of them), CLUSTERCACHE_BENCH_CHANGES
//     times (default 20);
//   - a rotated credential: a cluster's Secret gets a new ServiceAccount token and the old
//     ServiceAccount is deleted; the time until the cache serves the cluster's Nodes through a new
//     connection;
//   - a frozen child: the proxy in front of a cluster stops forwarding; the time until the cache
//     reports the cluster unreachable, and the latency of changes on child 0 meanwhile.
//
// CLUSTERCACHE_BENCH_CLUSTERS (default 200, a tenth of them black-holed) and CLUSTERCACHE_BENCH_NODES
// (default 50 per child) set the size. Run one configuration per process (see the package comment).
func BenchmarkCaches(b *testing.B) {
	quietLogs()
	for _, name := range []string{"childcluster", "clustercache"} {
		b.Run(name, func(b *testing.B) {
			for _, ids := range []string{"shared", "distinct"} {
				b.Run(ids, func(b *testing.B) {
					var c cacheUnderTest = &childClusterCache{connects: envInt("CLUSTERCACHE_BENCH_CHILDCLUSTER_CONNECTS", 8)}
					if name == "clustercache" {
						c = &clusterCache{}
					}
					runScenario(b, name, c, ids == "distinct")
				})
			}
		})
	}
}

// figures are what one run measured.
type figures struct {
	firstInventory, holesFailed       time.Duration
	syncMedian                        time.Duration
	reachableFailedConnects           int
	holeFailedConnects                int
	heapMiB, rssMiB                   float64
	goroutines, reachable             int
	changesFirst, changesAll          []time.Duration
	rotation                          time.Duration
	frozenFirstFailure, frozenDown    time.Duration
	changesWhileFrozen                []time.Duration
	rotationErr, frozenErr, changeErr string
}

func runScenario(b *testing.B, name string, c cacheUnderTest, distinct bool) {
	n, nodes, changes := envInt("CLUSTERCACHE_BENCH_CLUSTERS", 200), envInt("CLUSTERCACHE_BENCH_NODES", 50), envInt("CLUSTERCACHE_BENCH_CHANGES", 20)
	load := loadAverage()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := startWorld(b, n, nodes, distinct)
	defer w.stop()
	reachable := w.reachable()
	obs := newObserver(reachable)
	f := figures{reachable: len(reachable)}

	before := snapshot()
	start := time.Now()
	if err := c.start(ctx, w, obs); err != nil {
		b.Fatal(err)
	}
	defer c.stop()
	select {
	case <-obs.allSynced:
		f.firstInventory = obs.syncedAt.Sub(start)
		f.syncMedian = pct(obs.syncDurations(start), 0.5)
		f.reachableFailedConnects = c.failedConnects(reachable)
	case <-time.After(syncWait):
		b.Fatalf("%s: the Nodes of %d clusters are not listable after %s", name, obs.unsynced(), syncWait)
	}
	f.holesFailed = waitHoles(ctx, b, w, c, start)
	var holes []types.NamespacedName
	for _, h := range w.withRole(roleHole) {
		holes = append(holes, h.key)
	}
	f.holeFailedConnects = c.failedConnects(holes)
	time.Sleep(settle)
	after := snapshot()
	f.heapMiB, f.rssMiB = after.heapMiB-before.heapMiB, after.rssMiB-before.rssMiB
	f.goroutines = after.goroutines - before.goroutines

	b.ResetTimer()
	round := 0
	for b.Loop() {
		round++
		for k := range changes {
			first, all, err := measureChange(ctx, w, obs, fmt.Sprintf("r%d-%d", round, k))
			if err != nil {
				f.changeErr = err.Error()
				break
			}
			f.changesFirst, f.changesAll = append(f.changesFirst, first), append(f.changesAll, all)
		}
	}
	b.StopTimer()

	f.rotation, f.rotationErr = measureRotation(ctx, w, c)
	f.frozenFirstFailure, f.frozenDown, f.changesWhileFrozen, f.frozenErr = measureFrozen(ctx, w, c, obs)
	report(b, name, c, w, n, distinct, load, f)
}

// waitHoles waits until a connect to every black-holed cluster has failed and returns the time since
// start.
func waitHoles(ctx context.Context, b *testing.B, w *world, c cacheUnderTest, start time.Time) time.Duration {
	pending := w.withRole(roleHole)
	deadline := time.Now().Add(holesWait)
	for len(pending) > 0 {
		if time.Now().After(deadline) {
			b.Fatalf("no connect to %s failed within %s", pending[0].key, holesWait)
		}
		pending = slices.DeleteFunc(pending, func(h benchCluster) bool { return c.connectFailed(ctx, h.key) })
		time.Sleep(poll)
	}
	return time.Since(start)
}

// measureChange labels changedNode with value and waits until every cluster on child 0 has seen it.
func measureChange(ctx context.Context, w *world, obs *observer, value string) (first, all time.Duration, err error) {
	done := obs.expect(value, w.onChild0())
	t0 := time.Now()
	if err := w.setChangeLabel(ctx, value); err != nil {
		return 0, 0, err
	}
	select {
	case <-done:
	case <-time.After(changeWait):
		return 0, 0, fmt.Errorf("change %s not seen by every cluster of child-0 within %s", value, changeWait)
	}
	f, l := obs.times()
	return f.Sub(t0), l.Sub(t0), nil
}

// measureRotation rotates the rotated cluster's credential and revokes the old one, and returns the
// time until the cache serves its Nodes through a new connection.
func measureRotation(ctx context.Context, w *world, c cacheUnderTest) (time.Duration, string) {
	key := w.withRole(roleRotated)[0].key
	old := c.connection(ctx, key)
	if old == nil {
		return 0, "the rotated cluster was not served before the rotation"
	}
	t0 := time.Now()
	if err := w.rotate(ctx, w.withRole(roleRotated)[0], "bench-rotated-b"); err != nil {
		return 0, err.Error()
	}
	for time.Since(t0) < rotationWait {
		if cn := c.connection(ctx, key); cn != nil && cn != old {
			return time.Since(t0), ""
		}
		time.Sleep(poll)
	}
	return 0, fmt.Sprintf("not served through a new connection within %s", rotationWait)
}

// measureFrozen freezes the frozen cluster's proxy and returns the times until the cache reports a
// failed probe and the cluster down, and the latencies of changes on child 0 made meanwhile (one
// every 2s).
func measureFrozen(ctx context.Context, w *world, c cacheUnderTest, obs *observer) (firstFailure, down time.Duration, changes []time.Duration, problem string) {
	key := w.withRole(roleFrozen)[0].key
	if c.connection(ctx, key) == nil {
		return 0, 0, nil, "the frozen cluster was not served before the freeze"
	}
	t0 := time.Now()
	w.proxy.freeze()
	var mu sync.Mutex
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for time.Since(t0) < frozenWait {
			failed, isDown := c.health(ctx, key)
			mu.Lock()
			if failed && firstFailure == 0 {
				firstFailure = time.Since(t0)
			}
			if isDown {
				down = time.Since(t0)
				if firstFailure == 0 {
					firstFailure = down
				}
				mu.Unlock()
				return
			}
			mu.Unlock()
			time.Sleep(poll)
		}
	}()
	for k := 0; ; k++ {
		select {
		case <-stopped:
			mu.Lock()
			defer mu.Unlock()
			if down == 0 {
				problem = fmt.Sprintf("not reported down within %s", frozenWait)
			}
			return firstFailure, down, changes, problem
		case <-time.After(2 * time.Second):
		}
		_, all, err := measureChange(ctx, w, obs, fmt.Sprintf("frozen-%d", k))
		if err != nil {
			problem = "while frozen: " + err.Error()
			<-stopped
			mu.Lock()
			defer mu.Unlock()
			return firstFailure, down, changes, problem
		}
		changes = append(changes, all)
	}
}

// report prints the run's figures and reports the main ones as benchmark metrics.
func report(b *testing.B, name string, c cacheUnderTest, w *world, n int, distinct bool, load string, f figures) {
	identities := "one identity per child API server"
	if distinct {
		identities = "one identity per cluster"
	}
	per := func(v float64) float64 { return v / float64(max(f.reachable, 1)) }
	fmt.Printf("clustercachebench %s: %d clusters (%d black-holed) over %d child API servers, %d nodes each, %s; load average at the start %s\n",
		name, n, n-f.reachable, len(w.children), w.nodes, identities, load)
	fmt.Printf("  settings: %s\n", c.describe())
	fmt.Printf("  first inventory: the Nodes of all %d reachable clusters listable after %s (half of them after %s); %d failed connects of reachable clusters before\n",
		f.reachable, f.firstInventory.Round(time.Millisecond), f.syncMedian, f.reachableFailedConnects)
	fmt.Printf("  black holes: a connect to each of the %d failed %s after the start (%d failed connects by then)\n",
		n-f.reachable, f.holesFailed.Round(time.Millisecond), f.holeFailedConnects)
	fmt.Printf("  connected: heap in use +%.1f MiB (%.3f MiB per cluster), RSS +%.1f MiB (%.3f per cluster), goroutines +%d (%.1f per cluster)\n",
		f.heapMiB, per(f.heapMiB), f.rssMiB, per(f.rssMiB), f.goroutines, per(float64(f.goroutines)))
	if len(f.changesAll) > 0 {
		fmt.Printf("  node label change on child-0 seen for all %d of its clusters: p50 %s, p99 %s, max %s; for the first: p50 %s (%d changes)\n",
			len(w.onChild0()), pct(f.changesAll, 0.5), pct(f.changesAll, 0.99), pct(f.changesAll, 1), pct(f.changesFirst, 0.5), len(f.changesAll))
	}
	if f.changeErr != "" {
		fmt.Printf("  changes: %s\n", f.changeErr)
	}
	if f.rotationErr != "" {
		fmt.Printf("  rotated credential: %s\n", f.rotationErr)
	} else {
		fmt.Printf("  rotated credential (new token in the Secret, old ServiceAccount deleted): served through the new connection after %s\n", f.rotation.Round(time.Millisecond))
	}
	fmt.Printf("  frozen child: first failed probe reported after %s, unreachable/disconnected after %s; %d changes on child-0 meanwhile: p50 %s, max %s\n",
		f.frozenFirstFailure.Round(time.Millisecond), f.frozenDown.Round(time.Millisecond), len(f.changesWhileFrozen), pct(f.changesWhileFrozen, 0.5), pct(f.changesWhileFrozen, 1))
	if f.frozenErr != "" {
		fmt.Printf("  frozen child: %s\n", f.frozenErr)
	}
	b.ReportMetric(f.firstInventory.Seconds(), "s-first-inventory")
	b.ReportMetric(per(f.heapMiB), "MiB-heap/cluster")
	b.ReportMetric(per(f.rssMiB), "MiB-rss/cluster")
	b.ReportMetric(per(float64(f.goroutines)), "goroutines/cluster")
	if len(f.changesAll) > 0 {
		b.ReportMetric(float64(pct(f.changesAll, 0.5).Milliseconds()), "ms-p50/change")
		b.ReportMetric(float64(pct(f.changesAll, 0.99).Milliseconds()), "ms-p99/change")
	}
	b.ReportMetric(f.rotation.Seconds(), "s-rotation")
	b.ReportMetric(f.frozenDown.Seconds(), "s-frozen-down")
}

// pct returns the q-quantile of ds (1 is the maximum), 0 for none.
func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))].Round(time.Millisecond)
}

// usage is the process's footprint at one moment.
type usage struct {
	heapMiB, rssMiB float64
	goroutines      int
}

// snapshot collects garbage and reads the heap in use, the resident set and the goroutines. (Open
// sockets would say little: the black holes and the frozen child's proxy run in this process.)
func snapshot() usage {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return usage{heapMiB: float64(ms.HeapInuse) / (1 << 20), rssMiB: rssMiB(), goroutines: runtime.NumGoroutine()}
}

// rssMiB returns the resident set size of this process, from /proc/self/status (0 elsewhere).
func rssMiB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

// loadAverage returns the machine's 1, 5 and 15 minute load averages, from /proc/loadavg.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(data))
	if len(fields) < 3 {
		return "unknown"
	}
	return strings.Join(fields[:3], " ")
}

var quietOnce sync.Once

// quietLogs discards controller-runtime's and client-go's logs (the black holes and the frozen child
// make the reflectors log every retry), but for the ClusterCache's failed connects, which
// failureSink counts.
func quietLogs() {
	quietOnce.Do(func() {
		ctrllog.SetLogger(logr.New(failureSink{}))
		klog.SetLogger(logr.Discard())
	})
}

// newManager returns a manager on the management server that caches the benchmark's namespace only.
func newManager(w *world) (manager.Manager, error) {
	skip := true
	mgr, err := ctrl.NewManager(w.mgmt.Config, ctrl.Options{
		Scheme:                 w.mgmt.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  ctrlcache.Options{DefaultNamespaces: map[string]ctrlcache.Config{benchNS: {}}},
		Controller:             config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	return mgr, nil
}

// startManager starts mgr, waits for its cache and returns a function that stops it and waits.
func startManager(ctx context.Context, mgr manager.Manager) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		<-done
		return nil, fmt.Errorf("the manager's cache did not sync")
	}
	return func() {
		cancel()
		<-done
	}, nil
}
