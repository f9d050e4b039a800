package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// The markers around the section `make bench-envelope` owns in docs/benchmarks.md.
const (
	envelopeBegin = "<!-- BEGIN scale envelope (written by make bench-envelope) -->"
	envelopeEnd   = "<!-- END scale envelope -->"
	// webhookConfigName names the webhook configurations the bench registers by URL.
	webhookConfigName = "exalsius-bench-webhook"
	webhookNamespace  = "exalsius-system"
	// loadNamespace holds the pods the bench binds to child nodes (the pod changes).
	loadNamespace = "bench-load"
)

// envelopeConfig sizes the scale envelope (`--envelope`); --clusters gives the ClusterDeployments.
type envelopeConfig struct {
	workspaces     int
	servers        int
	changes        int
	rest           time.Duration
	changeTimeout  time.Duration
	timeout        time.Duration
	webhookBin     string
	repoRoot       string
	webhookCreates int
}

func (e *envelopeConfig) bindFlags(fs *flag.FlagSet) {
	fs.IntVar(&e.workspaces, "workspaces", 10000, "--envelope: workspaces, half of them asking 1 GPU, spread round-robin over --clusters ClusterDeployments.")
	fs.IntVar(&e.servers, "child-servers", 4, "--envelope: child API servers the ClusterDeployments' kubeconfig Secrets point at, round-robin (children are shared, as in the inventory benchmark).")
	fs.IntVar(&e.changes, "changes", 100, "--envelope: child changes after the admission, alternately a node cordoned and a pod taking a node's GPUs, spread over the child servers.")
	fs.DurationVar(&e.rest, "rest", 60*time.Second, "--envelope: how long the controller's memory, CPU and writes are measured at rest.")
	fs.DurationVar(&e.changeTimeout, "change-timeout", 60*time.Second, "--envelope: how long one child change may take to reach the affected workspaces' status.")
	fs.DurationVar(&e.timeout, "envelope-timeout", 3*time.Hour, "--envelope: how long the whole envelope may take.")
	fs.StringVar(&e.webhookBin, "webhook-bin", "", "--envelope: the built webhook binary; empty measures no webhook latency.")
	fs.StringVar(&e.repoRoot, "repo-root", "..", "--envelope: the repository (the webhook's configurations are read from webhook/config/webhook).")
	fs.IntVar(&e.webhookCreates, "webhook-creates", 100, "--envelope: creates, one at a time, timed through the webhook once every workspace is admitted.")
}

// envelopeResult is what the scale envelope measured.
type envelopeResult struct {
	workspaces, clusters, servers, nodesPerServer, creators int
	ref                                                     rates
	admitWall                                               time.Duration
	throughput                                              float64
	p50, p99                                                time.Duration
	rssMiB, peakMiB, restCPUSeconds, restWritesPerMinute    float64
	changes                                                 []changeResult
	webhook                                                 string // why no webhook figures, when there are none
	webhookP50, webhookP99, refCreateP50, refCreateP99      time.Duration
	webhookServerMean                                       time.Duration
	webhookServerP99                                        float64 // the histogram bucket bound, s; -1 above the largest
	rssAfterChangesMiB                                      float64
}

// changeResult is one child change: its kind, the workspaces whose admission named the changed node,
// the time until each one's status no longer did, and the reconciles the change caused.
type changeResult struct {
	kind       string
	server     int
	node       string
	affected   int
	peers      int // ClusterDeployments on the changed child server
	latencies  []time.Duration
	reconciles float64 // beyond the rate at rest
	restRate   float64 // reconciles per second at rest, measured before the change
	timedOut   int
}

func runEnvelope(ctx context.Context, c config) error {
	e := c.envelope
	nc := c.clusters[0]
	creators := c.creators[len(c.creators)-1]
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	if e.servers < 1 || e.servers > nc || e.workspaces < 2 {
		return fmt.Errorf("--envelope needs 1 <= --child-servers <= --clusters and --workspaces >= 2")
	}
	res := envelopeResult{workspaces: e.workspaces, clusters: nc, servers: e.servers, creators: creators}
	started := time.Now()

	// Child servers with GPU nodes: the GPU workspaces of a server's ClusterDeployments with 25% to
	// spare, plus a node for each change on it (a change takes a node's GPUs away).
	gpuPerServer := (e.workspaces/2 + e.servers - 1) / e.servers
	res.nodesPerServer = int((int64(gpuPerServer)*5/4+7)/8) + (e.changes+e.servers-1)/e.servers
	progress("envelope: starting %d child API servers with %d 8-GPU nodes each", e.servers, res.nodesPerServer)
	names := make([]string, e.servers)
	for i := range names {
		names[i] = fmt.Sprintf("envelope-child-%02d", i)
	}
	children, err := testenv.StartChildren(names...)
	if err != nil {
		return err
	}
	defer func() {
		for _, ch := range children {
			_ = ch.Stop()
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, len(children))
	for i, ch := range children {
		wg.Go(func() {
			if err := ch.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: loadNamespace}}); err != nil {
				errs[i] = err
				return
			}
			for j := range res.nodesPerServer {
				name := fmt.Sprintf("gpu-%04d", j)
				if err := childtest.CreateNode(ctx, ch.Client, childtest.Node{Name: name,
					Labels:      map[string]string{gpu.LabelGPUModel: "B200", corev1.LabelHostname: name},
					Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, 8)}); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	progress("envelope: starting the management API server")
	m, err := testenv.StartManagement()
	if err != nil {
		return err
	}
	defer func() { _ = m.Stop() }()
	cl, err := newClient(unthrottled(m.Config))
	if err != nil {
		return err
	}
	if res.ref, err = reference(ctx, cl, "bench-reference", c.refFor, func() (serverCPUs, error) { return readServerCPUs(ctx, m, nil) }); err != nil {
		return err
	}
	progress("envelope: reference: %.0f ConfigMap creates/s from 1 client, %.0f/s from 8", res.ref.one, res.ref.eight)
	kubeconfigs := make([][]byte, nc)
	peers := make([]int, e.servers) // ClusterDeployments per child server
	for i := range kubeconfigs {
		kubeconfigs[i] = children[i%e.servers].Kubeconfig
		peers[i%e.servers]++
	}
	classes, cds, err := setupManagement(ctx, cl, m, []string{"cpu", "gpu"}, kubeconfigs)
	if err != nil {
		return err
	}
	serverOf := map[string]int{} // "<namespace>/<cd>" -> child server
	for i, cd := range cds {
		serverOf[benchNamespace+"/"+cd] = i % e.servers
	}

	dir := filepath.Join(c.logDir, fmt.Sprintf("envelope-%d-%d", e.workspaces, nc))
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, m.Kubeconfig, 0o600); err != nil {
		return err
	}
	var webhookMetrics string
	if e.webhookBin == "" {
		res.webhook = "not measured: no --webhook-bin"
	} else {
		wh, addr, err := startWebhook(ctx, cl, e, kubeconfig, dir)
		if err != nil {
			return fmt.Errorf("starting the webhook: %w", err)
		}
		defer func() { _ = wh.Stop(world.StopGrace) }()
		webhookMetrics = addr
	}
	metricsAddr, err := world.FreeAddr()
	if err != nil {
		return err
	}
	healthAddr, err := world.FreeAddr()
	if err != nil {
		return err
	}
	args := append([]string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--metrics-secure=false",
		"--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=" + healthAddr, "--log-level=error",
		"--routing-retry=10m"}, c.extraArgs...)
	proc := &world.Process{Name: "workspace-controller", Path: c.bin, Args: args, LogPath: filepath.Join(dir, "controller.log")}
	if err := proc.Start(); err != nil {
		return err
	}
	defer func() { _ = proc.Stop(world.StopGrace) }()
	for _, name := range classes {
		if err := waitClassValid(ctx, cl, name, proc); err != nil {
			return err
		}
	}

	// Every workspace's status, as the watch last saw it.
	tr := newTracker()
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	if err := followList(followCtx, cl, func() client.ObjectList { return &workspacesv1.WorkspaceDeploymentList{} },
		benchNamespace, tr.observe); err != nil {
		return err
	}

	progress("envelope: creating %d workspaces over %d ClusterDeployments from %d creators", e.workspaces, nc, creators)
	created := make([]time.Time, e.workspaces)
	start := time.Now()
	err = createConcurrently(ctx, e.workspaces, creators, func(i int) error {
		class := classes["cpu"]
		if i%2 == 1 {
			class = classes["gpu"]
		}
		ws := &workspacesv1.WorkspaceDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: fmt.Sprintf("ws-%05d", i)},
			Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: class,
				ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: cds[(i/2)%nc]}},
		}
		if err := cl.Create(ctx, ws); err != nil {
			return fmt.Errorf("creating workspace %d: %w", i, err)
		}
		created[i] = time.Now()
		return nil
	})
	if err != nil {
		return err
	}
	for !tr.allAdmitted(e.workspaces) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d workspaces admitted when the envelope timed out; controller log:\n%s", tr.admittedCount(), e.workspaces, proc.Tail(20))
		case <-proc.Exited():
			return fmt.Errorf("the controller exited: %v; log:\n%s", proc.ExitError(), proc.Tail(30))
		case <-time.After(time.Second):
			st, _ := readProc(proc.Pid())
			progress("envelope: %d/%d admitted after %s (RSS %.0f MiB)", tr.admittedCount(), e.workspaces, time.Since(start).Round(time.Second), st.rssMiB)
		}
	}
	lat, last := tr.admissionLatencies(created)
	res.admitWall = last.Sub(start)
	res.throughput = float64(e.workspaces) / res.admitWall.Seconds()
	res.p50, res.p99 = pct(lat, 50), pct(lat, 99)
	progress("envelope: all admitted in %s (%.1f/s, p50 %s, p99 %s); settling", res.admitWall.Round(time.Second), res.throughput, ms(res.p50), ms(res.p99))

	// At rest: the controller's memory, CPU and writes once it stopped writing.
	quiet(ctx, 5*time.Second, 5*time.Minute, func() float64 {
		r, err := scrapeRequests(ctx, m.Config)
		if err != nil {
			return -1
		}
		return r.writes(apiServerOwn)
	})
	before, err := scrapeRequests(ctx, m.Config)
	if err != nil {
		return err
	}
	cpuBefore, err := readProc(proc.Pid())
	if err != nil {
		return err
	}
	progress("envelope: measuring the controller at rest for %s", e.rest)
	select {
	case <-time.After(e.rest):
	case <-ctx.Done():
		return ctx.Err()
	}
	after, err := scrapeRequests(ctx, m.Config)
	if err != nil {
		return err
	}
	cpuAfter, err := readProc(proc.Pid())
	if err != nil {
		return err
	}
	res.rssMiB, res.peakMiB = cpuAfter.rssMiB, cpuAfter.peakMiB
	res.restCPUSeconds = cpuAfter.cpuSeconds - cpuBefore.cpuSeconds
	res.restWritesPerMinute = after.minus(before).writes(apiServerOwn) / e.rest.Minutes()

	// Child changes, one at a time, alternately a node cordoned and a pod taking a node's GPUs, on the
	// child servers in turn; each on a node that holds admissions and was not changed before.
	changed := map[string]bool{}
	for k := range e.changes {
		server := k % e.servers
		node := tr.busiestNode(server, serverOf, changed)
		if node == "" {
			progress("envelope: no admitted node left on child server %d; stopping the changes", server)
			break
		}
		changed[fmt.Sprint(server, "/", node)] = true
		kind := "node cordoned"
		if k%2 == 1 {
			kind = "pod takes the node's GPUs"
		}
		cr, err := oneChange(ctx, e, tr, children[server], server, node, kind, serverOf, metricsAddr)
		if err != nil {
			return fmt.Errorf("change %d: %w", k, err)
		}
		cr.peers = peers[server]
		res.changes = append(res.changes, cr)
		progress("envelope: change %d (%s, %s on server %d): %d affected, p99 %s, %d timed out, %.0f reconciles",
			k, kind, node, server, cr.affected, ms(pct(sortedCopy(cr.latencies), 99)), cr.timedOut, cr.reconciles)
	}
	if st, err := readProc(proc.Pid()); err == nil {
		res.rssAfterChangesMiB = st.rssMiB
		res.peakMiB = st.peakMiB
	}

	if webhookMetrics != "" {
		if err := webhookLatency(ctx, cl, e, classes["cpu"], cds, webhookMetrics, &res); err != nil {
			return err
		}
	}
	section := renderEnvelope(res, c, time.Since(started))
	fmt.Print(section)
	if c.doc != "" {
		if err := replaceSection(c.doc, envelopeBegin, envelopeEnd, section); err != nil {
			return err
		}
		progress("wrote %s", c.doc)
	}
	return nil
}

// oneChange makes one change on a child server's node and measures it.
func oneChange(ctx context.Context, e envelopeConfig, tr *tracker, ch *testenv.Child, server int, node, kind string,
	serverOf map[string]int, metricsAddr string) (changeResult, error) {
	cr := changeResult{kind: kind, server: server, node: node}
	affected := tr.onNode(server, node, serverOf)
	cr.affected = len(affected)
	// The controller reconciles at rest too (it looks at each Deploying workspace again every 2
	// minutes): its rate over a few seconds before the change is taken out of the count after it.
	rest0, _, err := reconciles(ctx, metricsAddr, controllerName)
	if err != nil {
		return cr, err
	}
	restFrom := time.Now()
	time.Sleep(restWindow)
	recBefore, _, err := reconciles(ctx, metricsAddr, controllerName)
	if err != nil {
		return cr, err
	}
	restRate := (recBefore - rest0) / time.Since(restFrom).Seconds()
	cr.restRate = restRate
	done := tr.expect(affected, node)
	at := time.Now()
	if kind == "node cordoned" {
		n := &corev1.Node{}
		if err := ch.Client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return cr, err
		}
		n.Spec.Unschedulable = true
		if err := ch.Client.Update(ctx, n); err != nil {
			return cr, err
		}
	} else {
		gpus := resource.MustParse("8")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: loadNamespace, Name: "takes-" + node},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu.ResourceNVIDIA: gpus},
					Limits: corev1.ResourceList{gpu.ResourceNVIDIA: gpus}}}}},
		}
		if err := ch.Client.Create(ctx, pod); err != nil {
			return cr, err
		}
	}
	select {
	case <-done:
	case <-time.After(e.changeTimeout):
	case <-ctx.Done():
		return cr, ctx.Err()
	}
	cr.latencies, cr.timedOut = tr.collect(at)
	// The reconciles the change caused: the count's growth beyond the rate at rest, until that excess
	// stays within one second's worth of the rate at rest for 2 s.
	var excess float64
	bucket := max(1, restRate)
	quiet(ctx, 2*time.Second, e.changeTimeout, func() float64 {
		n, _, err := reconciles(ctx, metricsAddr, controllerName)
		if err != nil {
			return -1
		}
		excess = n - recBefore - restRate*time.Since(at).Seconds()
		return math.Round(excess / bucket)
	})
	cr.reconciles = max(0, excess)
	return cr, nil
}

// restWindow is how long the reconcile rate at rest is measured before each change.
const restWindow = 5 * time.Second
