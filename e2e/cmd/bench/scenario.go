package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

const (
	benchNamespace = "bench"
	templateName   = "bench-app-1-0-0"
	controllerName = "workspacedeployment"
)

type scenario struct {
	class    string
	clusters int
	n        int
	creators int // concurrent creators sharing one client
	idle     time.Duration
}

func (s scenario) String() string {
	return fmt.Sprintf("%s N=%d clusters=%d creators=%d", s.class, s.n, s.clusters, s.creators)
}

// result is what one scenario measured.
type result struct {
	scenario
	p50, p90, p99, max  time.Duration
	throughput          float64
	createRate          float64 // the bench's own creates per second
	mgmt, child         requests
	mgmtWrites          float64 // by the controller, per workspace
	events              float64 // Event writes per workspace
	reconciles          float64 // per workspace
	reconcileResults    map[string]float64
	logErrors           int
	idleWritesPerMinute float64 // -1 when not measured
	rssMiB, peakMiB     float64
	cpuSeconds          float64
	servers             serverCPUs // the API servers' and etcds' CPU seconds over the same span as cpuSeconds
	idleCPUSeconds      float64    // in the idle window; -1 when not measured
	ref                 rates      // the same API server's ConfigMap create rates, before the controller starts
	doubleBooked        int
	notAdmitted         int
}

func newClient(cfg *rest.Config) (client.WithWatch, error) {
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
}

// runScenario starts a fresh management server, the controller binary on it, and admits sc.n
// workspaces spread over the children.
func runScenario(ctx context.Context, c config, sc scenario, children []*testenv.Child) (result, error) {
	res := result{scenario: sc, idleWritesPerMinute: -1, idleCPUSeconds: -1}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	progress("%s: starting the management API server", sc)
	m, err := testenv.StartManagement()
	if err != nil {
		return res, err
	}
	defer func() { _ = m.Stop() }()
	cfg := unthrottled(m.Config)
	cl, err := newClient(cfg)
	if err != nil {
		return res, err
	}
	// The reference: this server's own create rate, with the same client, before the controller runs
	// (its ConfigMaps are deleted again, so the controller never caches them).
	if res.ref, err = reference(ctx, cl, "bench-reference", c.refFor, func() (serverCPUs, error) { return readServerCPUs(ctx, m, nil) }); err != nil {
		return res, fmt.Errorf("measuring the reference: %w", err)
	}
	progress("%s: reference: %.0f ConfigMap creates/s from 1 client, %.0f/s from 8; %.0f WorkspaceDeployment creates/s from 8",
		sc, res.ref.one, res.ref.eight, res.ref.workspaces)
	kubeconfigs := make([][]byte, len(children))
	for i, ch := range children {
		kubeconfigs[i] = ch.Kubeconfig
	}
	classRefs, cds, err := setupManagement(ctx, cl, m, []string{sc.class}, kubeconfigs)
	if err != nil {
		return res, err
	}
	classRef := classRefs[sc.class]

	dir := filepath.Join(c.logDir, fmt.Sprintf("%s-%d-%d", sc.class, sc.clusters, sc.n))
	if err := os.RemoveAll(dir); err != nil { // an earlier run's log
		return res, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, m.Kubeconfig, 0o600); err != nil {
		return res, err
	}
	metricsAddr, err := world.FreeAddr()
	if err != nil {
		return res, err
	}
	healthAddr, err := world.FreeAddr()
	if err != nil {
		return res, err
	}
	args := append([]string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--metrics-secure=false",
		"--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=" + healthAddr, "--log-level=error",
		// The bench has no regional cluster: routing would poll for the missing infrastructure every
		// 15 s, passes that are no part of an admission.
		"--routing-retry=10m"}, c.extraArgs...)
	proc := &world.Process{Name: "workspace-controller", Path: c.bin, Args: args, LogPath: filepath.Join(dir, "controller.log")}
	if err := proc.Start(); err != nil {
		return res, err
	}
	defer func() { _ = proc.Stop(world.StopGrace) }()
	if err := waitClassValid(ctx, cl, classRef, proc); err != nil {
		return res, err
	}

	// Each ServiceSet, when it is first seen (listed or on a watch).
	seen := map[string]time.Time{}
	var seenMu sync.Mutex
	allSeen := make(chan struct{})
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	err = followList(followCtx, cl, func() client.ObjectList { return &k0rdentv1beta1.ServiceSetList{} }, benchNamespace, func(ev watch.Event) {
		ss, ok := ev.Object.(*k0rdentv1beta1.ServiceSet)
		if !ok || ev.Type == watch.Deleted {
			return
		}
		name := ss.Labels[workspacesv1.WorkspaceLabel]
		if name == "" {
			return
		}
		seenMu.Lock()
		defer seenMu.Unlock()
		if _, dup := seen[name]; !dup {
			seen[name] = time.Now()
			if len(seen) == sc.n {
				close(allSeen)
			}
		}
	})
	if err != nil {
		return res, err
	}

	mgmtBefore, err := scrapeRequests(ctx, m.Config)
	if err != nil {
		return res, err
	}
	childBefore, err := scrapeChildren(ctx, children)
	if err != nil {
		return res, err
	}
	procBefore, err := readProc(proc.Pid())
	if err != nil {
		return res, err
	}
	serversBefore, err := readServerCPUs(ctx, m, children)
	if err != nil {
		return res, err
	}

	created := make(map[string]time.Time, sc.n)
	start := time.Now()
	stopProgress := make(chan struct{})
	var progressDone sync.WaitGroup
	progressDone.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-t.C:
				seenMu.Lock()
				n := len(seen)
				seenMu.Unlock()
				st, _ := readProc(proc.Pid())
				progress("%s: %d/%d admitted after %s (RSS %.0f MiB)", sc, n, sc.n, time.Since(start).Round(time.Second), st.rssMiB)
			}
		}
	})
	var createdMu sync.Mutex
	err = createConcurrently(ctx, sc.n, sc.creators, func(i int) error {
		ws := &workspacesv1.WorkspaceDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: fmt.Sprintf("ws-%05d", i)},
			Spec: workspacesv1.WorkspaceDeploymentSpec{
				WorkspaceClassRef:    classRef,
				ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: cds[i%len(cds)]},
			},
		}
		if err := cl.Create(ctx, ws); err != nil {
			return fmt.Errorf("creating workspace %d: %w", i, err)
		}
		createdMu.Lock()
		created[ws.Name] = time.Now()
		createdMu.Unlock()
		return nil
	})
	if err != nil {
		close(stopProgress)
		return res, err
	}
	res.createRate = float64(sc.n) / time.Since(start).Seconds()
	select {
	case <-allSeen:
	case <-ctx.Done():
		close(stopProgress)
		seenMu.Lock()
		n := len(seen)
		seenMu.Unlock()
		return res, fmt.Errorf("%d of %d ServiceSets seen when the scenario timed out; controller log:\n%s", n, sc.n, proc.Tail(20))
	case <-proc.Exited():
		close(stopProgress)
		return res, fmt.Errorf("the controller exited: %v; log:\n%s", proc.ExitError(), proc.Tail(30))
	}
	close(stopProgress)
	progressDone.Wait()

	var lat []time.Duration
	var last time.Time
	seenMu.Lock()
	for name, t := range seen {
		lat = append(lat, max(t.Sub(created[name]), 0))
		if t.After(last) {
			last = t
		}
	}
	seenMu.Unlock()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	res.p50, res.p90, res.p99, res.max = pct(lat, 50), pct(lat, 90), pct(lat, 99), lat[len(lat)-1]
	res.throughput = float64(sc.n) / last.Sub(start).Seconds()

	// The admission ends when the controller stops writing (its status write after the ServiceSet).
	progress("%s: all admitted; waiting for the controller to settle", sc)
	quiet(ctx, 3*time.Second, 2*time.Minute, func() float64 {
		r, err := scrapeRequests(ctx, m.Config)
		if err != nil {
			return -1
		}
		return r.writes(nil)
	})
	mgmtAfter, err := scrapeRequests(ctx, m.Config)
	if err != nil {
		return res, err
	}
	childAfter, err := scrapeChildren(ctx, children)
	if err != nil {
		return res, err
	}
	res.mgmt = mgmtAfter.minus(mgmtBefore)
	// The bench's own requests: the N creates and its metrics reads; the rest are the controller's.
	res.mgmt["workspacedeployments POST"] -= float64(sc.n)
	res.child = childAfter.minus(childBefore)
	res.mgmtWrites = res.mgmt.writes(apiServerOwn) / float64(sc.n)
	res.events = (res.mgmt["events POST"] + res.mgmt["events PATCH"]) / float64(sc.n)
	if rec, by, err := reconciles(ctx, metricsAddr, controllerName); err == nil {
		res.reconciles = rec / float64(sc.n)
		res.reconcileResults = by
	}
	procAfter, err := readProc(proc.Pid())
	if err != nil {
		return res, err
	}
	res.rssMiB, res.peakMiB = procAfter.rssMiB, procAfter.peakMiB
	res.cpuSeconds = procAfter.cpuSeconds - procBefore.cpuSeconds
	serversAfter, err := readServerCPUs(ctx, m, children)
	if err != nil {
		return res, err
	}
	res.servers = serversAfter.minus(serversBefore)
	if b, err := os.ReadFile(filepath.Join(dir, "controller.log")); err == nil {
		res.logErrors = strings.Count(string(b), `"level":"error"`) + strings.Count(string(b), "\tERROR\t")
	}

	if gpuClass(sc.class) {
		res.doubleBooked, res.notAdmitted, err = checkGPUs(ctx, cl, children, cds, sc.n)
		if err != nil {
			return res, err
		}
	}
	if sc.idle > 0 {
		progress("%s: counting idle writes and CPU for %s", sc, sc.idle)
		before, err := scrapeRequests(ctx, m.Config)
		if err != nil {
			return res, err
		}
		cpuBefore, err := readProc(proc.Pid())
		if err != nil {
			return res, err
		}
		select {
		case <-time.After(sc.idle):
		case <-ctx.Done():
			return res, ctx.Err()
		}
		after, err := scrapeRequests(ctx, m.Config)
		if err != nil {
			return res, err
		}
		res.idleWritesPerMinute = after.minus(before).writes(apiServerOwn) / sc.idle.Minutes()
		cpuAfter, err := readProc(proc.Pid())
		if err != nil {
			return res, err
		}
		res.idleCPUSeconds = cpuAfter.cpuSeconds - cpuBefore.cpuSeconds
	}
	return res, nil
}

// createConcurrently calls create for 0..n-1 from the given number of goroutines, each taking the
// next index, and returns the first error (the others stop taking indexes then).
func createConcurrently(ctx context.Context, n, creators int, create func(i int) error) error {
	var next atomic.Int64
	var failed atomic.Bool
	errs := make([]error, creators)
	var wg sync.WaitGroup
	for w := range max(creators, 1) {
		wg.Go(func() {
			for !failed.Load() && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := create(i); err != nil {
					errs[w] = err
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}

func scrapeChildren(ctx context.Context, children []*testenv.Child) (requests, error) {
	out := requests{}
	for _, ch := range children {
		r, err := scrapeRequests(ctx, ch.Config)
		if err != nil {
			return nil, fmt.Errorf("child %s: %w", ch.Name, err)
		}
		out.add(r)
	}
	return out, nil
}

// setupManagement creates the template, a class per class name ("cpu", "gpu", "cohort"; the cohort
// class puts the namespace into a cohort, setupCohort), the namespace and one
// ClusterDeployment per kubeconfig (with its kubeconfig Secret); it returns the classes' names by
// class and the ClusterDeployments' names.
// benchDeployTimeout is the benchmark classes' deployTimeout: longer than any run.
const benchDeployTimeout = 24 * time.Hour

func setupManagement(ctx context.Context, cl client.Client, m *testenv.Management, classes []string, kubeconfigs [][]byte) (map[string]string, []string, error) {
	for _, ns := range []string{workspacesv1.DefaultServiceTemplateNamespace, benchNamespace} {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, nil, err
		}
	}
	for _, ns := range []string{workspacesv1.DefaultServiceTemplateNamespace, benchNamespace} {
		st := &k0rdentv1beta1.ServiceTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: templateName},
			Spec: k0rdentv1beta1.ServiceTemplateSpec{Helm: &k0rdentv1beta1.HelmSpec{ChartSpec: &k0rdentv1beta1.HelmChartSpec{
				Chart: "bench-app", Version: "1.0.0", Interval: metav1.Duration{Duration: time.Minute},
				SourceRef: k0rdentv1beta1.LocalHelmChartSourceReference{Kind: "HelmRepository", Name: "kcm-templates"},
			}}},
		}
		if err := cl.Create(ctx, st); err != nil {
			return nil, nil, err
		}
		st.Status.Valid, st.Status.ChartVersion = true, "1.0.0"
		if err := cl.Status().Update(ctx, st); err != nil {
			return nil, nil, err
		}
	}
	names := map[string]string{}
	for _, cls := range classes {
		spec := workspacesv1.WorkspaceClassSpec{
			DisplayName:     "Bench",
			ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: templateName},
			AccessEndpoints: []workspacesv1.AccessEndpoint{{Name: "web", Protocol: workspacesv1.EndpointProtocolHTTP, Port: 8888}},
			// No k0rdent runs here, so no release ever deploys: with the default 15m every workspace
			// would turn Failed during a long run (the envelope's changes come 10 to 20 minutes after
			// the first create), a wave of status writes and Events that is no part of what is measured.
			DeployTimeout: &metav1.Duration{Duration: benchDeployTimeout},
		}
		if cls == "cohort" {
			if err := setupCohort(ctx, cl); err != nil {
				return nil, nil, err
			}
		}
		if gpuClass(cls) {
			one := int32(1)
			spec.DefaultResources.PerReplica = &workspacesv1.PerReplicaResources{GPUCount: &one, GPUVendor: workspacesv1.GPUVendorNVIDIA}
		}
		class := &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: "bench-" + cls}, Spec: spec}
		if err := cl.Create(ctx, class); err != nil {
			return nil, nil, err
		}
		names[cls] = class.Name
	}
	cds := make([]string, len(kubeconfigs))
	for i, kc := range kubeconfigs {
		cd := &k0rdentv1beta1.ClusterDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: fmt.Sprintf("cd-%03d", i)},
			Spec:       k0rdentv1beta1.ClusterDeploymentSpec{Template: "cluster-template", Config: &apiextensionsv1.JSON{Raw: []byte("{}")}},
		}
		if err := cl.Create(ctx, cd); err != nil {
			return nil, nil, err
		}
		if err := m.WriteKubeconfigSecret(ctx, benchNamespace, cd.Name, kc); err != nil {
			return nil, nil, err
		}
		cds[i] = cd.Name
	}
	return names, cds, nil
}

func waitClassValid(ctx context.Context, cl client.Client, name string, proc *world.Process) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		c := &workspacesv1.WorkspaceClass{}
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, c); err == nil && c.Status.Valid {
			return nil
		}
		select {
		case <-proc.Exited():
			return fmt.Errorf("the controller exited: %v; log:\n%s", proc.ExitError(), proc.Tail(30))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return errors.New("the class did not turn valid within 2 minutes; controller log:\n" + proc.Tail(30))
}

// checkGPUs adds up the admitted GPUs per node of each child and compares them with the node's GPUs;
// it returns the nodes over capacity and the workspaces without an admission.
func checkGPUs(ctx context.Context, cl client.Client, children []*testenv.Child, cds []string, n int) (int, int, error) {
	var list workspacesv1.WorkspaceDeploymentList
	if err := cl.List(ctx, &list, client.InNamespace(benchNamespace)); err != nil {
		return 0, 0, err
	}
	used := map[string]int64{} // cluster/node
	notAdmitted := n - len(list.Items)
	for _, ws := range list.Items {
		ad := ws.Status.Admission
		if ad == nil || ad.GPUs == 0 {
			notAdmitted++
			continue
		}
		for _, node := range ad.Nodes {
			used[ad.Cluster+"/"+node.Name] += int64(node.Replicas) * ad.GPUsPerReplica
		}
	}
	over := 0
	for i, ch := range children {
		var nodes corev1.NodeList
		if err := ch.Client.List(ctx, &nodes); err != nil {
			return 0, 0, err
		}
		for _, node := range nodes.Items {
			q := node.Status.Allocatable[gpu.ResourceNVIDIA]
			if used[benchNamespace+"/"+cds[i]+"/"+node.Name] > q.Value() {
				over++
			}
		}
	}
	return over, notAdmitted, nil
}

// gpuClass reports whether a scenario's class asks for GPUs (gpu, and cohort, which is gpu borrowing).
func gpuClass(class string) bool { return class == "gpu" || class == "cohort" }

// cohortLender is the namespace whose unused guarantee the cohort scenario's workspaces borrow.
const cohortLender = "bench-lender"

// setupCohort puts the bench namespace into a cohort with a lender namespace: the bench namespace is
// guaranteed no GPU and may borrow every GPU the lender's guarantee leaves unused (all of them), so
// each admission borrows, and the gate weighs the cohort's quotas and usage in each decision: the
// cost of fair sharing against the gpu scenario.
func setupCohort(ctx context.Context, cl client.Client) error {
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cohortLender}}); err != nil {
		return err
	}
	for _, ns := range []string{benchNamespace, cohortLender} {
		var n corev1.Namespace
		if err := cl.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
			return err
		}
		patch := client.MergeFrom(n.DeepCopy())
		n.Labels = map[string]string{workspacesv1.CohortLabel: "bench"}
		if err := cl.Patch(ctx, &n, patch); err != nil {
			return err
		}
	}
	const fleet = int64(1 << 20)
	zero, all := int64(0), fleet
	for _, q := range []*workspacesv1.WorkspaceQuota{
		{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: "borrower"}, Spec: workspacesv1.WorkspaceQuotaSpec{
			GPUs: []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: fleet, Guaranteed: &zero, BorrowingLimit: &all}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: cohortLender, Name: "lender"}, Spec: workspacesv1.WorkspaceQuotaSpec{
			GPUs: []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: fleet, Guaranteed: &all}}}},
	} {
		if err := cl.Create(ctx, q); err != nil {
			return err
		}
	}
	return nil
}
