// Command bench measures workspace admission: it starts real API servers (a management server with
// the project's CRDs, or k0rdent's real ones from K0RDENT_CRDS, and separate child servers with GPU
// nodes), runs the built workspace-controller binary as a separate process against them, creates N
// WorkspaceDeployments from one or more concurrent creators and measures how long each takes until
// its ServiceSet is seen on a watch, and what the admission cost in requests, Events, reconciles,
// memory and CPU, next to the same API server's own ConfigMap create rate (the reference). `make
// bench` runs it and rewrites its section of docs/benchmarks.md; with --envelope it runs the scale
// envelope instead (`make bench-envelope`, envelope.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type config struct {
	bin        string
	doc        string
	goBench    string
	sizes      []int
	clusters   []int
	classes    []string
	idle       time.Duration
	gpuNodes   int
	gpusByNode int64
	timeout    time.Duration
	extraArgs  []string
	logDir     string
	creators   []int
	load       string // the load average when the run started
	refFor     time.Duration
	envelope   envelopeConfig
}

func run() error {
	var c config
	var sizes, clusters, classes, extra, creators, startLoad string
	var envelope bool
	flag.StringVar(&c.bin, "bin", "", "The built workspace-controller binary.")
	flag.StringVar(&c.doc, "doc", "", "docs/benchmarks.md to rewrite the admission section of; empty prints only.")
	flag.StringVar(&c.goBench, "go-bench-output", "", "A file with the output of the modules' Go benchmarks (the inventory benchmark), quoted in the section.")
	flag.StringVar(&sizes, "sizes", "1,100,1000", "Numbers of workspaces per scenario.")
	flag.StringVar(&clusters, "clusters", "1,20", "Numbers of child clusters per scenario.")
	flag.StringVar(&classes, "classes", "cpu,gpu,cohort", "Workspace classes: cpu (CPU-only), gpu (1 GPU per workspace), and cohort (gpu in a namespace of a cohort whose every admission borrows another member's guarantee).")
	flag.DurationVar(&c.idle, "idle", 60*time.Second, "How long idle writes are counted after the largest admission of each class and cluster count.")
	flag.IntVar(&c.gpuNodes, "gpu-nodes", 0, "8-GPU nodes per child; 0 sizes them to the largest scenario with room to spare.")
	flag.DurationVar(&c.timeout, "timeout", 15*time.Minute, "How long one scenario may take.")
	flag.StringVar(&extra, "controller-args", "", "Extra flags for the workspace-controller, space-separated.")
	flag.StringVar(&c.logDir, "log-dir", filepath.Join(os.TempDir(), "exalsius-bench"), "Where the controller's log of each scenario is kept.")
	flag.StringVar(&creators, "creators", "1,8", "Concurrent creators at the largest N, one scenario each; the smaller N use the first.")
	flag.DurationVar(&c.refFor, "reference-time", 3*time.Second, "How long the reference (ConfigMap creates on the scenario's own API server, from 1 and from 8 clients) runs, each.")
	flag.BoolVar(&envelope, "envelope", false, "Run the scale envelope instead of the admission scenarios (`make bench-envelope`).")
	flag.StringVar(&startLoad, "start-load", "", "The machine's 1, 5 and 15 minute load averages when the run started, as /proc/loadavg's first three fields (`make bench` reads them before its Go benchmarks, which run first); empty reads them now.")
	c.envelope.bindFlags(flag.CommandLine)
	flag.Parse()
	var err error
	c.load = loadAverage()
	if startLoad != "" {
		if c.load, err = parseLoad(startLoad); err != nil {
			return fmt.Errorf("--start-load: %w", err)
		}
	}
	c.gpusByNode = 8
	if c.sizes, err = ints(sizes); err != nil {
		return fmt.Errorf("--sizes: %w", err)
	}
	if c.clusters, err = ints(clusters); err != nil {
		return fmt.Errorf("--clusters: %w", err)
	}
	if c.creators, err = ints(creators); err != nil {
		return fmt.Errorf("--creators: %w", err)
	}
	c.classes = strings.Split(classes, ",")
	c.extraArgs = strings.Fields(extra)
	if c.bin == "" {
		return errors.New("--bin is required (the built workspace-controller)")
	}
	if c.bin, err = filepath.Abs(c.bin); err != nil {
		return err
	}
	if _, err := os.Stat(c.bin); err != nil {
		return fmt.Errorf("--bin: %w (run `make build`)", err)
	}
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if envelope {
		if len(c.clusters) != 1 {
			return errors.New("--envelope takes one --clusters count")
		}
		return runEnvelope(ctx, c)
	}

	maxClusters, maxN := 0, 0
	for _, n := range c.clusters {
		maxClusters = max(maxClusters, n)
	}
	for _, n := range c.sizes {
		maxN = max(maxN, n)
	}
	started := time.Now()
	// GPU nodes: every workspace of the GPU class asks 1 GPU, so the first child holds the largest
	// scenario on one cluster, the others their share of it on 20, each with 25% to spare.
	nodesFirst := c.gpuNodes
	if nodesFirst == 0 {
		nodesFirst = int((int64(maxN)*5/4 + c.gpusByNode - 1) / c.gpusByNode)
	}
	nodesOther := c.gpuNodes
	if nodesOther == 0 && maxClusters > 1 {
		nodesOther = int((int64(maxN)*5/4/int64(maxClusters) + c.gpusByNode) / c.gpusByNode)
	}
	// Only the children of the scenario's cluster count run while it does: an idle child API server
	// and its etcd cost a few percent of a core each, and the 19 a one-cluster scenario does not use
	// took half of a 2-core machine.
	fleet := &childFleet{gpusByNode: c.gpusByNode, nodesFirst: nodesFirst, nodesOther: nodesOther}
	defer fleet.stop(0)

	var results []result
	for _, nc := range c.clusters {
		children, err := fleet.resize(ctx, nc)
		if err != nil {
			return err
		}
		for _, class := range c.classes {
			for _, n := range c.sizes {
				creators := c.creators[:1]
				if n == maxN {
					creators = c.creators
				}
				for _, k := range creators {
					sc := scenario{class: class, clusters: nc, n: n, creators: k}
					if n == maxN {
						sc.idle = c.idle
					}
					r, err := runScenario(ctx, c, sc, children)
					if err != nil {
						return fmt.Errorf("%s: %w", sc, err)
					}
					results = append(results, r)
					fmt.Println(r.line())
				}
			}
		}
	}
	// The table keeps its order by class, then cluster count, whatever order the scenarios ran in.
	classOrder := map[string]int{}
	for i, class := range c.classes {
		classOrder[class] = i
	}
	sort.SliceStable(results, func(i, j int) bool {
		return classOrder[results[i].class] < classOrder[results[j].class]
	})
	fmt.Println()
	table := renderTable(results)
	fmt.Print(table)
	if c.doc != "" {
		if err := writeDoc(c, results, table, time.Since(started)); err != nil {
			return err
		}
		progress("wrote %s", c.doc)
	}
	return nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// rates are an API server's own ConfigMap create rates from 1 and 8 concurrent clients: the
// reference each scenario's figures are compared with.
type rates struct {
	one, eight float64
	// The management API server's CPU seconds per ConfigMap create from 8 clients; 0 when not
	// measured.
	apiPerCreate float64
	// The same server's WorkspaceDeployment creates per second from 8 clients, with no controller
	// running, and its CPU seconds per such create: what the tenants' own creates cost before the
	// controller does anything. 0 when not measured.
	workspaces, apiPerWorkspace float64
}

// reference measures how fast the API server behind cl creates ConfigMaps from 1 and from 8
// concurrent creators sharing cl (the bench's creators share their client the same way), d each, in
// namespace ns, then WorkspaceDeployments (the bench's own, with no controller to act on them) from 8,
// and deletes them again. cpu reads the server's CPU seconds (with its etcd's, unused here), around
// each 8-client run.
func reference(ctx context.Context, cl client.Client, ns string, d time.Duration, cpu func() (serverCPUs, error)) (rates, error) {
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return rates{}, err
	}
	configMap := func(name string) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": "v"}}
	}
	// The bench's workspace, as its creators write it (no such class or cluster exists: nothing reads it).
	workspace := func(name string) client.Object {
		return &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: "reference",
				ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "reference"}}}
	}
	var out rates
	var err error
	if out.one, _, err = createRate(ctx, cl, 1, d, "c1", configMap, nil); err != nil {
		return out, err
	}
	if out.eight, out.apiPerCreate, err = createRate(ctx, cl, 8, d, "c8", configMap, cpu); err != nil {
		return out, err
	}
	if out.workspaces, out.apiPerWorkspace, err = createRate(ctx, cl, 8, d, "w8", workspace, cpu); err != nil {
		return out, err
	}
	if err := cl.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns)); err != nil {
		return out, err
	}
	if err := cl.DeleteAllOf(ctx, &workspacesv1.WorkspaceDeployment{}, client.InNamespace(ns)); err != nil {
		return out, err
	}
	return out, ctx.Err()
}

// createRate creates the objects obj makes from the given number of concurrent clients for d, and
// returns the creates per second and, when cpu is set, the API server's CPU seconds per create.
// Names are prefix-client-i.
func createRate(ctx context.Context, cl client.Client, clients int, d time.Duration, prefix string, obj func(name string) client.Object,
	cpu func() (serverCPUs, error)) (rate, perCreate float64, err error) {
	var before serverCPUs
	if cpu != nil {
		if before, err = cpu(); err != nil {
			return 0, 0, err
		}
	}
	var total atomic.Int64
	var firstErr atomic.Pointer[error] // the first failed create's error, of whatever type
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				if err := cl.Create(ctx, obj(fmt.Sprintf("%s-%d-%d", prefix, w, i))); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				total.Add(1)
			}
		})
	}
	wg.Wait()
	n := float64(total.Load())
	if n == 0 {
		if e := firstErr.Load(); e != nil {
			return 0, 0, fmt.Errorf("no %s create succeeded: %w", prefix, *e)
		}
		return 0, 0, fmt.Errorf("no %s create in %s", prefix, d)
	}
	rate = n / time.Since(start).Seconds()
	if cpu != nil {
		after, err := cpu()
		if err != nil {
			return 0, 0, err
		}
		perCreate = (after.api - before.api) / n
	}
	return rate, perCreate, nil
}

// unthrottled is cfg without a client-side rate limit.
func unthrottled(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0
	return c
}

func init() {
	// The bench's own client work (watch decoding, creates) must not starve on a small machine.
	runtime.GOMAXPROCS(max(runtime.NumCPU(), 2))
}

// childFleet holds the child API servers the scenarios run on, each with its GPU nodes: the first
// nodesFirst of them, the others nodesOther.
type childFleet struct {
	gpusByNode             int64
	nodesFirst, nodesOther int
	children               []*testenv.Child
}

// resize starts or stops children until n run, and returns them.
func (f *childFleet) resize(ctx context.Context, n int) ([]*testenv.Child, error) {
	f.stop(n)
	if len(f.children) == n {
		return f.children, nil
	}
	from := len(f.children)
	progress("starting %d child API servers", n-from)
	names := make([]string, 0, n-from)
	for i := from; i < n; i++ {
		names = append(names, fmt.Sprintf("bench-child-%02d", i))
	}
	started, err := testenv.StartChildren(names...)
	if err != nil {
		return nil, err
	}
	f.children = append(f.children, started...)
	progress("creating GPU nodes (%d on the first child, %d on each other, %d GPUs each)", f.nodesFirst, f.nodesOther, f.gpusByNode)
	var wg sync.WaitGroup
	errs := make([]error, len(started))
	for i, ch := range started {
		count := f.nodesOther
		if from+i == 0 {
			count = f.nodesFirst
		}
		wg.Go(func() {
			for j := range count {
				name := fmt.Sprintf("gpu-%03d", j)
				if err := childtest.CreateNode(ctx, ch.Client, childtest.Node{Name: name,
					Labels:      map[string]string{gpu.LabelGPUModel: "B200", corev1.LabelHostname: name},
					Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, f.gpusByNode)}); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return f.children, errors.Join(errs...)
}

// stop stops the children past the first n.
func (f *childFleet) stop(n int) {
	for len(f.children) > n {
		last := f.children[len(f.children)-1]
		_ = last.Stop()
		f.children = f.children[:len(f.children)-1]
	}
}
