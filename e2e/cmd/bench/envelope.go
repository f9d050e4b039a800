package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/e2e/internal/stack"
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
	reconciles float64
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
	if res.ref, err = reference(ctx, cl, "bench-reference", c.refFor); err != nil {
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
	w, err := cl.Watch(ctx, &workspacesv1.WorkspaceDeploymentList{}, client.InNamespace(benchNamespace))
	if err != nil {
		return err
	}
	defer w.Stop()
	go tr.follow(w)

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
	recBefore, _, err := reconciles(ctx, metricsAddr, controllerName)
	if err != nil {
		return cr, err
	}
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
	// The reconciles the change caused: until the count stays the same for 2 s.
	var recAfter float64
	quiet(ctx, 2*time.Second, e.changeTimeout, func() float64 {
		n, _, err := reconciles(ctx, metricsAddr, controllerName)
		if err != nil {
			return -1
		}
		recAfter = n
		return n
	})
	cr.reconciles = recAfter - recBefore
	return cr, nil
}

// tracker follows every workspace's admission through a watch, and times the changes.
type tracker struct {
	mu        sync.Mutex
	admission map[string]*workspacesv1.Admission
	admitted  map[string]time.Time // when the workspace's ServiceSet name was first seen in its status
	pending   map[string]bool      // the workspaces a change waits for
	node      string               // the node they must leave
	moved     map[string]time.Time
	done      chan struct{}
}

func newTracker() *tracker {
	return &tracker{admission: map[string]*workspacesv1.Admission{}, admitted: map[string]time.Time{}}
}

func (t *tracker) follow(w watch.Interface) {
	for ev := range w.ResultChan() {
		ws, ok := ev.Object.(*workspacesv1.WorkspaceDeployment)
		if !ok || ev.Type == watch.Deleted {
			continue
		}
		now := time.Now()
		t.mu.Lock()
		t.admission[ws.Name] = ws.Status.Admission
		if _, ok := t.admitted[ws.Name]; !ok && ws.Status.ServiceSetName != "" {
			t.admitted[ws.Name] = now
		}
		if t.pending[ws.Name] && !admittedOn(ws.Status.Admission, t.node) {
			delete(t.pending, ws.Name)
			t.moved[ws.Name] = now
			if len(t.pending) == 0 && t.done != nil {
				close(t.done)
				t.done = nil
			}
		}
		t.mu.Unlock()
	}
}

func admittedOn(ad *workspacesv1.Admission, node string) bool {
	if ad == nil {
		return false
	}
	for _, n := range ad.Nodes {
		if n.Name == node {
			return true
		}
	}
	return false
}

func (t *tracker) admittedCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.admitted)
}

func (t *tracker) allAdmitted(n int) bool { return t.admittedCount() >= n }

// admissionLatencies returns the sorted create → ServiceSet-in-status times and the last admission.
func (t *tracker) admissionLatencies(created []time.Time) ([]time.Duration, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lat []time.Duration
	var last time.Time
	for name, at := range t.admitted {
		i, err := strconv.Atoi(strings.TrimPrefix(name, "ws-"))
		if err != nil || i >= len(created) {
			continue
		}
		lat = append(lat, max(at.Sub(created[i]), 0))
		if at.After(last) {
			last = at
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat, last
}

// busiestNode returns the node of a child server holding the most admissions, leaving out changed.
func (t *tracker) busiestNode(server int, serverOf map[string]int, changed map[string]bool) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	count := map[string]int{}
	for _, ad := range t.admission {
		if s, ok := serverOf[clusterOf(ad)]; !ok || s != server {
			continue
		}
		for _, n := range ad.Nodes {
			if !changed[fmt.Sprint(server, "/", n.Name)] {
				count[n.Name]++
			}
		}
	}
	best := ""
	for n, k := range count {
		if best == "" || k > count[best] || (k == count[best] && n < best) {
			best = n
		}
	}
	return best
}

// onNode returns the workspaces admitted on node of a child server.
func (t *tracker) onNode(server int, node string, serverOf map[string]int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for name, ad := range t.admission {
		if s, ok := serverOf[clusterOf(ad)]; ok && s == server && admittedOn(ad, node) {
			out = append(out, name)
		}
	}
	return out
}

func clusterOf(ad *workspacesv1.Admission) string {
	if ad == nil {
		return ""
	}
	return ad.Cluster
}

// expect starts timing a change: the returned channel closes once none of names is admitted on node.
func (t *tracker) expect(names []string, node string) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending, t.node, t.moved = map[string]bool{}, node, map[string]time.Time{}
	done := make(chan struct{})
	for _, n := range names {
		t.pending[n] = true
	}
	if len(t.pending) == 0 {
		close(done)
		return done
	}
	t.done = done
	return done
}

// collect ends a change: the times from at to each workspace leaving the node, and those still on it.
func (t *tracker) collect(at time.Time) ([]time.Duration, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	for _, m := range t.moved {
		out = append(out, m.Sub(at))
	}
	timedOut := len(t.pending)
	t.pending, t.done = nil, nil
	return out, timedOut
}

func sortedCopy(d []time.Duration) []time.Duration {
	out := append([]time.Duration(nil), d...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	if len(out) == 0 {
		return []time.Duration{0}
	}
	return out
}

// startWebhook registers the webhook's configurations (webhook/config/webhook) by URL on a loopback
// port and runs the webhook binary there with its own CA, as the local world does; it returns once
// the CA is injected, with the webhook's metrics address.
func startWebhook(ctx context.Context, cl client.Client, e envelopeConfig, kubeconfig, dir string) (*world.Process, string, error) {
	progress("envelope: starting the webhook")
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: webhookNamespace}}); err != nil {
		return nil, "", err
	}
	port, err := world.FreePort()
	if err != nil {
		return nil, "", err
	}
	objs, err := stack.ReadManifests(filepath.Join(e.repoRoot, "webhook", "config", "webhook"))
	if err != nil {
		return nil, "", err
	}
	if len(objs) == 0 {
		return nil, "", errors.New("no webhook configurations in webhook/config/webhook")
	}
	for _, o := range objs {
		o.SetName(webhookConfigName)
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for i, h := range hooks {
			hm, ok := h.(map[string]interface{})
			if !ok {
				continue
			}
			path, _, _ := unstructured.NestedString(hm, "clientConfig", "service", "path")
			hm["clientConfig"] = map[string]interface{}{"url": fmt.Sprintf("https://127.0.0.1:%d%s", port, path)}
			hooks[i] = hm
		}
		if err := unstructured.SetNestedSlice(o.Object, hooks, "webhooks"); err != nil {
			return nil, "", err
		}
	}
	if err := stack.Apply(ctx, cl, objs); err != nil {
		return nil, "", err
	}
	metricsAddr, err := world.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	healthAddr, err := world.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	certDir := filepath.Join(dir, "webhook-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, "", err
	}
	bin, err := filepath.Abs(e.webhookBin)
	if err != nil {
		return nil, "", err
	}
	proc := &world.Process{Name: "webhook", Path: bin, LogPath: filepath.Join(dir, "webhook.log"), Args: []string{
		"--kubeconfig=" + kubeconfig, "--metrics-secure=false", "--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=" + healthAddr, "--log-level=error",
		"--host=127.0.0.1", fmt.Sprintf("--port=%d", port), "--cert-mode=self", "--cert-dir=" + certDir,
		"--service-namespace=" + webhookNamespace, "--cert-ip-addresses=127.0.0.1", "--cert-extra-dns-names=localhost",
		"--webhook-config-name=" + webhookConfigName, "--ca-bundle-file=" + filepath.Join(certDir, "ca-bundle.crt")}}
	if err := proc.Start(); err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		injected := true
		for _, o := range objs {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(o.GroupVersionKind())
			if err := cl.Get(ctx, client.ObjectKey{Name: o.GetName()}, u); err != nil {
				injected = false
				break
			}
			hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
			for _, h := range hooks {
				hm, _ := h.(map[string]interface{})
				if b, _, _ := unstructured.NestedString(hm, "clientConfig", "caBundle"); b == "" {
					injected = false
				}
			}
		}
		if injected {
			return proc, metricsAddr, nil
		}
		if time.Now().After(deadline) {
			_ = proc.Stop(world.StopGrace)
			return nil, "", errors.New("the webhook did not inject its CA within 2 minutes; log:\n" + proc.Tail(20))
		}
		select {
		case <-proc.Exited():
			return nil, "", fmt.Errorf("the webhook exited: %v; log:\n%s", proc.ExitError(), proc.Tail(20))
		case <-ctx.Done():
			_ = proc.Stop(world.StopGrace)
			return nil, "", ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// webhookLatency times creates one at a time at the envelope's size: WorkspaceDeployments (through
// the webhook) and, for reference, ConfigMaps on the same server; and reads the webhook's own
// latency histogram over the WorkspaceDeployment creates.
func webhookLatency(ctx context.Context, cl client.Client, e envelopeConfig, class string, cds []string, metricsAddr string, res *envelopeResult) error {
	progress("envelope: timing %d creates through the webhook", e.webhookCreates)
	before, err := webhookHistogram(ctx, metricsAddr)
	if err != nil {
		return err
	}
	var ws, cm []time.Duration
	for i := range e.webhookCreates {
		w := &workspacesv1.WorkspaceDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: fmt.Sprintf("webhook-%04d", i)},
			Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: class,
				ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: cds[i%len(cds)]}},
		}
		t := time.Now()
		if err := cl.Create(ctx, w); err != nil {
			return fmt.Errorf("create through the webhook: %w", err)
		}
		ws = append(ws, time.Since(t))
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "bench-reference", Name: fmt.Sprintf("latency-%04d", i)}}
		t = time.Now()
		if err := cl.Create(ctx, c); err != nil {
			return err
		}
		cm = append(cm, time.Since(t))
	}
	after, err := webhookHistogram(ctx, metricsAddr)
	if err != nil {
		return err
	}
	ws, cm = sortedCopy(ws), sortedCopy(cm)
	res.webhookP50, res.webhookP99 = pct(ws, 50), pct(ws, 99)
	res.refCreateP50, res.refCreateP99 = pct(cm, 50), pct(cm, 99)
	if n := after.count - before.count; n > 0 {
		res.webhookServerMean = time.Duration((after.sum - before.sum) / n * float64(time.Second))
		res.webhookServerP99 = -1
		for _, le := range after.les {
			if (after.buckets[le]-before.buckets[le])/n >= 0.99 {
				res.webhookServerP99 = le
				break
			}
		}
	}
	return nil
}

// histogram is controller_runtime_webhook_latency_seconds summed over the webhook's paths.
type histogram struct {
	sum, count float64
	buckets    map[float64]float64
	les        []float64 // sorted
}

func webhookHistogram(ctx context.Context, addr string) (histogram, error) {
	h := histogram{buckets: map[float64]float64{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return h, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return h, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return h, err
	}
	const name = "controller_runtime_webhook_latency_seconds"
	for _, line := range strings.Split(string(body), "\n") {
		switch {
		case strings.HasPrefix(line, name+"_bucket{"):
			labels, v, ok := parseSample(line)
			if le, err := strconv.ParseFloat(labels["le"], 64); ok && err == nil {
				h.buckets[le] += v
			}
		case strings.HasPrefix(line, name+"_sum"):
			if f := strings.Fields(line); len(f) == 2 {
				v, _ := strconv.ParseFloat(f[1], 64)
				h.sum += v
			}
		case strings.HasPrefix(line, name+"_count"):
			if f := strings.Fields(line); len(f) == 2 {
				v, _ := strconv.ParseFloat(f[1], 64)
				h.count += v
			}
		}
	}
	for le := range h.buckets {
		h.les = append(h.les, le)
	}
	sort.Float64s(h.les)
	return h, nil
}
