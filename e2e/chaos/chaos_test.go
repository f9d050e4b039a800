// Package chaos is the chaos suite: rollouts of many workspaces on the local world while faults are
// injected at moments drawn from a seeded random source, with checks after every round that can
// fail, and figures of what survived.
//
// It runs only when CHAOS is set: `make test-chaos-short` (CHAOS=short, part of `make test`) and
// `make chaos` (CHAOS=full, which also writes the figures into docs/benchmarks.md). CHAOS_SEED
// replays a run; CHAOS_ROUNDS and CHAOS_WORKSPACES override the size, CHAOS_FAULTS (comma-separated:
// kill-<component>, child-stop, credential, mgmt-restart, webhook-outage, cordon, node-replaced,
// stop-start, cd-recreated, reclaim) the faults and their order.
package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	chaoslib "github.com/exalsius/exalsius-operator/e2e/internal/chaos"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
	"github.com/exalsius/exalsius-operator/e2e/internal/stack"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// Fault kinds, one per round in this order (cycling).
const (
	faultKill       = "kill -9 "
	faultChildStop  = "child API server stopped"
	faultCredential = "child credential revoked then rotated"
	faultMgmt       = "management API server restarted"
	faultWebhook    = "webhook outage during deletions"
	faultCordon     = "GPU nodes cordoned then uncordoned"
	faultReplace    = "GPU node replaced under a new name"
	faultStopStart  = "workspaces of a fixed-replica chart stopped then started"
	faultRecreate   = "ClusterDeployment deleted and re-created by its Colony"
	faultReclaim    = "borrowed GPUs reclaimed by stop, the workspace controller killed between notice and stop"
)

const (
	colonyName = "chaos"
	template   = "chaos-notebook-0-3-0"
	// fixedTemplate is the chart of the published catalog's shape (examples/charts/fixed-replicas):
	// one replica whatever the operator says, and a claim of its own, so a stop is made on the child.
	fixedTemplate = "chaos-fixed-replicas-0-1-0"
)

// settings are the sizes and bounds of a run.
type settings struct {
	mode        string
	rounds      int
	n           int           // workspaces per rollout
	childOutage time.Duration // how long a child API server stays stopped
	hold        time.Duration // how long the webhook stays down, and the revoked credential stays
	converge    time.Duration // bound on convergence after a fault
	gpusA       int64         // GPUs of the node of cluster a
	gpusB       int64         // GPUs of the node of cluster b
	faults      []string
}

func kills() []string {
	var ks []string
	for _, c := range stack.Components {
		ks = append(ks, faultKill+c)
	}
	return ks
}

// faultKeys names the faults for CHAOS_FAULTS.
func faultKeys() map[string]string {
	m := map[string]string{"child-stop": faultChildStop, "credential": faultCredential, "mgmt-restart": faultMgmt, "webhook-outage": faultWebhook,
		"cordon": faultCordon, "node-replaced": faultReplace, "stop-start": faultStopStart, "cd-recreated": faultRecreate, "reclaim": faultReclaim}
	for _, c := range stack.Components {
		m["kill-"+c] = faultKill + c
	}
	return m
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func loadSettings(t *testing.T) settings {
	var s settings
	switch mode := os.Getenv("CHAOS"); mode {
	case "":
		t.Skip("the chaos suite runs with CHAOS=short (make test-chaos-short) or CHAOS=full (make chaos)")
	case "short":
		// The child outage outlasts the inventory's documented worst case for noticing a stopped
		// child (two failed probes 15 s apart, each bounded by 10 s).
		s = settings{mode: mode, rounds: 4, n: 15, childOutage: 45 * time.Second, hold: 15 * time.Second, converge: 6 * time.Minute, gpusA: 2, gpusB: 2,
			faults: []string{faultKill + "workspace-controller", faultChildStop, faultMgmt, faultWebhook}}
	case "full":
		s = settings{mode: mode, rounds: 20, n: 200, childOutage: 60 * time.Second, hold: 30 * time.Second, converge: 20 * time.Minute, gpusA: 8, gpusB: 4,
			faults: append(kills(), faultChildStop, faultCredential, faultMgmt, faultWebhook, faultCordon, faultReplace, faultStopStart, faultRecreate, faultReclaim)}
	default:
		t.Fatalf("CHAOS=%q: want short or full", mode)
	}
	if v := os.Getenv("CHAOS_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CHAOS_ROUNDS=%q: want a positive number", v)
		}
		s.rounds = n
	}
	if v := os.Getenv("CHAOS_FAULTS"); v != "" {
		s.faults = nil
		for _, key := range strings.Split(v, ",") {
			f, ok := faultKeys()[strings.TrimSpace(key)]
			if !ok {
				t.Fatalf("CHAOS_FAULTS: unknown fault %q; known: %v", key, sortedKeys(faultKeys()))
			}
			s.faults = append(s.faults, f)
		}
	}
	if v := os.Getenv("CHAOS_WORKSPACES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 3 {
			t.Fatalf("CHAOS_WORKSPACES=%q: want a number of at least 3", v)
		}
		s.n = n
	}
	return s
}

func seed(t *testing.T) int64 {
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: want an integer", v)
		}
		return n
	}
	return time.Now().UnixNano()
}

// suite is one chaos run.
type suite struct {
	t     *testing.T
	set   settings
	st    *stack.Stack
	c     client.Client
	ns    string
	sched *chaoslib.Schedule
	fig   chaoslib.Figures
	// gpus is the GPUs each cluster has (by ClusterDeployment name).
	gpus map[string]int64

	mu sync.Mutex
	// restarts are the windows of the management API server's restarts.
	restarts [][2]time.Time
	// queues are the GPU queues of a round taken by its fault while it held (queue.go); the round
	// takes them after its fault otherwise.
	queues map[int]queueSnapshot
}

// restartSettle is how long after a restart of the management API server its authorizer may still
// refuse requests while its caches fill.
const restartSettle = 30 * time.Second

// outsideRestarts drops the log lines stamped (first field, RFC 3339) inside a restart window.
func (s *suite) outsideRestarts(lines []string) []string {
	var out []string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > 0 {
			if at, err := time.Parse(time.RFC3339Nano, f[0]); err == nil && s.inRestart(at) {
				continue
			}
		}
		out = append(out, l)
	}
	return out
}

func (s *suite) inRestart(at time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.restarts {
		if !at.Before(w[0]) && !at.After(w[1]) {
			return true
		}
	}
	return false
}

// finding records a failed check: the test fails and the figures list it.
func (s *suite) finding(round int, format string, args ...any) {
	s.t.Helper()
	msg := fmt.Sprintf("round %d (seed %d): ", round, s.fig.Seed) + fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.fig.Findings = append(s.fig.Findings, msg)
	s.mu.Unlock()
	s.t.Error(msg)
}

func (s *suite) progress(format string, args ...any) {
	fmt.Printf("[chaos %s] %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func TestChaos(t *testing.T) {
	set := loadSettings(t)
	sd := seed(t)
	fmt.Printf("chaos: mode %s, seed %d (replay with CHAOS_SEED=%d), %d rounds of %d workspaces\n", set.mode, sd, sd, set.rounds, set.n)
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	began := time.Now()
	st, err := stack.Start(ctx, stack.Options{RepoRoot: root, BinDir: os.Getenv("EXALSIUS_BIN_DIR"), Out: os.Stdout})
	if err != nil {
		t.Fatalf("starting the local world: %v", err)
	}
	for name, why := range st.Missing {
		_ = st.Stop()
		t.Fatalf("component %s is not running: %s", name, why)
	}
	s := &suite{t: t, set: set, st: st, c: st.Client, ns: "chaos", sched: chaoslib.NewSchedule(sd),
		fig: chaoslib.Figures{Seed: sd, Mode: set.mode, Workspaces: set.n, Faults: map[string]int{}}}
	defer func() {
		if t.Failed() {
			fmt.Printf("\n######## chaos failed (seed %d): logs of the local world (%s) ########\n", sd, st.RunDir)
			st.DumpLogs(os.Stdout, 40)
		}
		if err := st.Stop(); err != nil {
			t.Logf("stopping the local world: %v", err)
		}
	}()
	s.setup(ctx)
	for r := 0; r < set.rounds; r++ {
		s.round(ctx, r, set.faults[r%len(set.faults)])
		s.fig.Rounds++
	}
	denials, err := st.Denials()
	if err != nil {
		t.Errorf("reading the component logs: %v", err)
	}
	for name, lines := range denials {
		// A restarted API server refuses requests until its RBAC caches are filled: those are the
		// fault's, not the chart's.
		lines = s.outsideRestarts(lines)
		if len(lines) > 0 {
			s.finding(-1, "the chart RBAC denied %s %d request(s), first: %s", name, len(lines), lines[0])
		}
	}
	s.fig.Duration = time.Since(began)
	fmt.Printf("\n==== chaos figures ====\n%s\n", s.fig.Markdown())
	if doc := os.Getenv("CHAOS_DOC"); doc != "" {
		if err := chaoslib.WriteSection(doc, s.fig); err != nil {
			t.Errorf("writing %s: %v", doc, err)
		} else {
			fmt.Printf("chaos: figures written to %s\n", doc)
		}
	}
}

// repoRoot walks up from the working directory to the folder holding go.work.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work above %s", wd)
		}
	}
}

// poll waits for cond within timeout; it returns the last state cond described and whether it held.
func poll(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) (bool, string)) (bool, string) {
	last := ""
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		ok, state := cond(ctx)
		// Keep the last state seen before the bound, not the error of a call cut short by it.
		if ok || (ctx.Err() == nil && !strings.Contains(state, "context deadline")) {
			last = state
		}
		return ok, nil
	})
	return err == nil, last
}

func jsonOf(t *testing.T, v any) *apiextensionsv1.JSON {
	t.Helper()
	b, err := jsonMarshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &apiextensionsv1.JSON{Raw: b}
}

func cdName(cluster string) string { return colonyName + "-" + cluster }

// setup creates the namespace, templates, two classes and a Colony of two clusters with few GPUs.
func (s *suite) setup(ctx context.Context) {
	t := s.t
	if err := k0rdentsim.EnsureClusterFixtures(ctx, s.c, s.ns); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"kcm-system", s.ns} {
		if err := k0rdentsim.Ensure(ctx, s.c, k0rdentsim.ServiceTemplate(ns, template, "jupyter-notebook", "0.3.0"),
			k0rdentsim.ServiceTemplate(ns, fixedTemplate, "fixed-replicas", "0.1.0")); err != nil {
			t.Fatal(err)
		}
	}
	big := func(p w.NodePool) w.NodePool {
		p.CPU, p.Memory, p.Pods = "2000", "8Ti", "1000"
		return p
	}
	one := int32(1)
	s.gpus = map[string]int64{cdName("a"): s.set.gpusA, cdName("b"): s.set.gpusB}
	entry := func(name, model string, gpus int64) infrav1.ColonyCluster {
		return infrav1.ColonyCluster{ClusterName: name, ClusterDeploymentSpec: *jsonOf(t, map[string]any{
			"template":   k0rdentsim.ClusterTemplateName,
			"credential": k0rdentsim.CredentialName,
			"config": w.ClusterConfig{Nodes: []w.NodePool{
				big(w.NodePool{Name: "gpu", Count: &one, GPU: &w.GPUSpec{Vendor: "NVIDIA", Model: model, Count: gpus}}),
				big(w.NodePool{Name: "cpu", Count: &one}),
			}},
		})}
	}
	colony := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: colonyName},
		Spec: infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{entry("a", "A100", s.set.gpusA), entry("b", "H100", s.set.gpusB)}}}
	if err := s.c.Create(ctx, colony); err != nil {
		t.Fatal(err)
	}
	for _, p := range []planned{{}, {gpus: 1}, {gpus: 1, fixed: true}} {
		gpus := int32(p.gpus)
		cpu, mem := resource.MustParse("10m"), resource.MustParse("16Mi")
		per := &workspacesv1.PerReplicaResources{CPU: &cpu, Memory: &mem}
		if gpus > 0 {
			per.GPUCount, per.GPUVendor = &gpus, workspacesv1.GPUVendorNVIDIA
		}
		tmpl := template
		if p.fixed {
			tmpl = fixedTemplate
		}
		class := &workspacesv1.WorkspaceClass{
			ObjectMeta: metav1.ObjectMeta{Name: className(p)},
			Spec: workspacesv1.WorkspaceClassSpec{
				DisplayName:      "Chaos notebook",
				ServiceTemplate:  workspacesv1.ServiceTemplateRef{Name: tmpl, Namespace: "kcm-system"},
				DefaultResources: workspacesv1.DefaultResources{Replicas: &one, PerReplica: per},
				// Generous: a deploy slowed by the loaded machine is not what this suite looks for.
				DeployTimeout: &metav1.Duration{Duration: 15 * time.Minute},
			},
		}
		if err := s.c.Create(ctx, class); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	ok, last := poll(ctx, 5*time.Minute, func(ctx context.Context) (bool, string) {
		var c infrav1.Colony
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(colony), &c); err != nil {
			return false, err.Error()
		}
		for cd, want := range s.gpus {
			inv, found := c.Status.GPUInventory[cd]
			var total int64
			for _, o := range inv.Offerings {
				total += o.Total
			}
			if !found || !inv.Reachable || total != want {
				return false, fmt.Sprintf("phase %s, inventory of %s: %+v", c.Status.Phase, cd, inv)
			}
		}
		for _, p := range []planned{{}, {gpus: 1}, {gpus: 1, fixed: true}} {
			var wc workspacesv1.WorkspaceClass
			if err := s.c.Get(ctx, types.NamespacedName{Name: className(p)}, &wc); err != nil || !wc.Status.Valid {
				return false, fmt.Sprintf("class %s not valid (%v): %s", className(p), err, wc.Status.ValidationError)
			}
		}
		return c.Status.Phase == infrav1.ColonyPhaseReady, fmt.Sprintf("phase %s", c.Status.Phase)
	})
	if !ok {
		t.Fatalf("the chaos Colony and classes are not ready: %s", last)
	}
	s.progress("Colony %s/%s Ready: %s", s.ns, colonyName, fmtGPUs(s.gpus))
	if s.hasFault(faultReclaim) {
		s.setupCohort(ctx)
	}
}

func className(p planned) string {
	switch {
	case p.fixed:
		return "chaos-fixed"
	case p.gpus > 0:
		return "chaos-gpu"
	}
	return "chaos-cpu"
}

func fmtGPUs(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s has %d GPUs", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// planned is one workspace of a rollout.
type planned struct {
	name    string
	cluster string // ClusterDeployment
	gpus    int64  // 0 for a CPU workspace
	fixed   bool   // its chart fixes one replica and has a claim (fixedTemplate)
}

// plan returns the rollout of a round: alternating clusters, every third workspace asking 1 or 2
// GPUs (more in total than the clusters have), every third of those with the chart that fixes its
// replicas.
func (s *suite) plan(r int) []planned {
	ws := make([]planned, s.set.n)
	asked := map[string]int64{}
	g := 0
	for i := range ws {
		p := planned{name: fmt.Sprintf("r%02d-w%03d", r, i), cluster: cdName("a")}
		if i%2 == 1 {
			p.cluster = cdName("b")
		}
		if i%3 == 0 {
			p.gpus = int64(1 + g%2)
			p.fixed = g%3 == 1
			g++
			asked[p.cluster] += p.gpus
		}
		ws[i] = p
	}
	var askedAll, haveAll int64
	for cd, n := range asked {
		askedAll += n
		haveAll += s.gpus[cd]
	}
	if askedAll <= haveAll {
		s.t.Fatalf("the rollout asks %d GPUs, not more than the %d the clusters have: raise CHAOS_WORKSPACES", askedAll, haveAll)
	}
	return ws
}

func (s *suite) workspaceObj(p planned) *workspacesv1.WorkspaceDeployment {
	ws := &workspacesv1.WorkspaceDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: p.name},
		Spec: workspacesv1.WorkspaceDeploymentSpec{
			WorkspaceClassRef:    className(p),
			ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: p.cluster, Namespace: s.ns},
		},
	}
	if p.gpus > 0 {
		n := int32(p.gpus)
		ws.Spec.Resources = &workspacesv1.ResourceOverrides{PerReplica: &workspacesv1.PerReplicaResources{GPUCount: &n}}
	}
	return ws
}

// retry repeats an API call until it succeeds (the API server or the webhook may be down) or the
// bound passes.
func retry(ctx context.Context, bound time.Duration, call func(ctx context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, bound, true, func(ctx context.Context) (bool, error) {
		last = call(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last error: %v)", err, last)
	}
	return nil
}

// round rolls out the round's workspaces, injects the round's fault at a random moment, checks, and
// deletes everything again.
func (s *suite) round(ctx context.Context, r int, fault string) {
	plan := s.plan(r)
	byName := map[string]planned{}
	for _, p := range plan {
		byName[p.name] = p
	}
	s.progress("round %d: %d workspaces, fault %q", r, len(plan), fault)
	smp := s.startSampler(ctx, r, byName)
	defer smp.stop()

	at := s.sched.Intn(len(plan))
	var faultStart time.Time
	var faultWG sync.WaitGroup
	deletedDuringFault := map[string]bool{}
	for i, p := range plan {
		if i == at && fault != faultWebhook {
			faultStart = time.Now()
			faultWG.Add(1)
			go func() {
				defer faultWG.Done()
				s.inject(ctx, r, fault)
				s.takeQueue(ctx, r)
			}()
			// Deletions issued during the fault: a few of the workspaces created so far.
			for _, j := range s.sched.Perm(i)[:min(i, max(1, i/20))] {
				deletedDuringFault[plan[j].name] = true
			}
			for name := range deletedDuringFault {
				if err := retry(ctx, s.set.converge, func(ctx context.Context) error {
					return client.IgnoreNotFound(s.c.Delete(ctx, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name}}))
				}); err != nil {
					s.finding(r, "deleting %s during the fault: %v", name, err)
				}
			}
		}
		obj := s.workspaceObj(p)
		if err := retry(ctx, s.set.converge, func(ctx context.Context) error {
			err := s.c.Create(ctx, obj.DeepCopy())
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}); err != nil {
			s.finding(r, "creating %s: %v", p.name, err)
		}
	}
	faultWG.Wait()
	if faultStart.IsZero() {
		faultStart = time.Now()
	}
	s.converge(ctx, r, byName, deletedDuringFault, faultStart)
	s.checkQueue(ctx, r, deletedDuringFault)
	s.checkObjects(ctx, r, byName)
	s.teardown(ctx, r, plan, fault == faultWebhook)
	smp.stop()
	s.mu.Lock()
	s.fig.DoubleBooked += smp.violations
	s.mu.Unlock()
	for _, v := range smp.firstViolations {
		s.finding(r, "double-booked: %s", v)
	}
	for _, d := range smp.details {
		s.t.Logf("round %d, first double booking: %s", r, d)
	}
	s.progress("round %d done: %d GPU samples, %d over capacity", r, smp.samples, smp.violations)
}

// converge waits until every workspace is Running, Failed, or Waiting while its cluster's admitted
// GPUs leave no room for it, and the deletions issued during the fault are complete.
func (s *suite) converge(ctx context.Context, r int, byName map[string]planned, deleted map[string]bool, since time.Time) {
	var lastList []workspacesv1.WorkspaceDeployment
	ok, last := poll(ctx, s.set.converge, func(ctx context.Context) (bool, string) {
		list, err := s.roundWorkspaces(ctx, r)
		if err != nil {
			return false, err.Error()
		}
		lastList = list
		admitted := admittedGPUs(list, byName)
		var pending []string
		for _, ws := range list {
			p := byName[ws.Name]
			if deleted[ws.Name] {
				pending = append(pending, ws.Name+" (deletion issued during the fault) "+string(ws.Status.Phase))
				continue
			}
			switch ws.Status.Phase {
			case workspacesv1.PhaseRunning, workspacesv1.PhaseFailed:
				continue
			case workspacesv1.PhaseWaiting, workspacesv1.PhaseStopped:
				// A workspace a reclaim stopped says Stopped (Reclaimed) until it is admitted again.
				waits := ws.Status.Phase == workspacesv1.PhaseWaiting || reclaimStopped(&ws)
				if waits && p.gpus > 0 && admitted[p.cluster]+p.gpus > s.gpus[p.cluster] {
					continue
				}
			}
			pending = append(pending, fmt.Sprintf("%s %s %q", ws.Name, ws.Status.Phase, ws.Status.Message))
		}
		kept := 0
		for _, ws := range list {
			if !deleted[ws.Name] {
				kept++
			}
		}
		if kept < len(byName)-len(deleted) {
			pending = append(pending, fmt.Sprintf("only %d of the %d workspaces not deleted exist", kept, len(byName)-len(deleted)))
		}
		return len(pending) == 0, fmt.Sprintf("%d not converged, e.g. %s", len(pending), strings.Join(pending[:min(len(pending), 5)], "; "))
	})
	took := time.Since(since)
	s.mu.Lock()
	if took > s.fig.LongestConvergence {
		s.fig.LongestConvergence = took
	}
	s.mu.Unlock()
	if !ok {
		s.finding(r, "not converged within %s: %s", s.set.converge, last)
		s.mu.Lock()
		for _, ws := range lastList {
			if deleted[ws.Name] {
				s.fig.Lost++
			}
		}
		s.mu.Unlock()
	} else {
		s.progress("round %d converged %s after the fault", r, took.Round(time.Second))
	}
	for _, ws := range lastList {
		if ws.Status.Phase == workspacesv1.PhaseFailed {
			reason := ""
			if c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReadyCondition); c != nil {
				reason = c.Reason
			}
			s.finding(r, "workspace %s Failed (%s): %s", ws.Name, reason, ws.Status.Message)
			s.mu.Lock()
			s.fig.Lost++
			s.mu.Unlock()
		}
	}
}

func (s *suite) roundWorkspaces(ctx context.Context, r int) ([]workspacesv1.WorkspaceDeployment, error) {
	return s.workspacesOfRound(ctx, s.ns, r)
}

// workspacesOfRound lists the workspaces of round r in namespace ns.
func (s *suite) workspacesOfRound(ctx context.Context, ns string, r int) ([]workspacesv1.WorkspaceDeployment, error) {
	var list workspacesv1.WorkspaceDeploymentList
	if err := s.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("r%02d-", r)
	var out []workspacesv1.WorkspaceDeployment
	for _, ws := range list.Items {
		if strings.HasPrefix(ws.Name, prefix) {
			out = append(out, ws)
		}
	}
	return out, nil
}

// admitted is chaoslib.Admitted.
func admitted(ws *workspacesv1.WorkspaceDeployment) bool { return chaoslib.Admitted(ws) }

// admittedGPUs sums, per cluster, the GPUs of admitted workspaces (as asked in their spec, which the
// suite wrote).
func admittedGPUs(list []workspacesv1.WorkspaceDeployment, byName map[string]planned) map[string]int64 {
	out := map[string]int64{}
	for i := range list {
		if admitted(&list[i]) {
			p := byName[list[i].Name]
			out[p.cluster] += p.gpus
		}
	}
	return out
}

// admittedGPUsOn is admittedGPUs without the workspaces whose admission counted every replica on
// nodes the child no longer has (nodes: the names of each cluster's nodes; a cluster missing from it,
// unreadable at the moment, counts every admission). Such an admission holds no GPU: the GPUs it
// counted went with their node, and its replicas are pinned there by hostname, so they cannot run
// elsewhere until the workspace is gated again. Counted, a node replaced under a new name shows the
// old node's admissions next to the new node's for the seconds until they are gated again.
func admittedGPUsOn(list []workspacesv1.WorkspaceDeployment, byName map[string]planned, nodes map[string]map[string]bool) map[string]int64 {
	out := map[string]int64{}
	for i := range list {
		ws := &list[i]
		if !admitted(ws) {
			continue
		}
		p := byName[ws.Name]
		if have, ok := nodes[p.cluster]; ok && ws.Status.Admission != nil && len(ws.Status.Admission.Nodes) > 0 {
			gone := true
			for _, n := range ws.Status.Admission.Nodes {
				gone = gone && !have[n.Name]
			}
			if gone {
				continue
			}
		}
		out[p.cluster] += p.gpus
	}
	return out
}

// childNodes lists the names of each cluster's nodes, leaving out a cluster whose child cannot be read.
func (s *suite) childNodes(ctx context.Context) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for cd := range s.gpus {
		child := s.st.World.Child(k0rdentsim.ChildName(s.ns, cd))
		if child == nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var nodes corev1.NodeList
		err := child.Client().List(cctx, &nodes)
		cancel()
		if err != nil {
			continue
		}
		names := map[string]bool{}
		for _, n := range nodes.Items {
			names[n.Name] = true
		}
		out[cd] = names
	}
	return out
}

// admittedNames lists the admitted GPU workspaces of a cluster, for a double-booking report.
func admittedNames(list []workspacesv1.WorkspaceDeployment, byName map[string]planned, cd string) string {
	var names []string
	for i := range list {
		if p := byName[list[i].Name]; admitted(&list[i]) && p.cluster == cd && p.gpus > 0 {
			names = append(names, fmt.Sprintf("%s=%d(%s)", p.name, p.gpus, list[i].Status.Phase))
		}
	}
	return strings.Join(names, " ")
}

// violationDetails says, for a double booking's log, what each admitted GPU workspace of the cluster
// recorded (phase, admission, the Feasible condition) and where the child's pods of those workspaces
// are, read at the moment of the sample.
func (s *suite) violationDetails(ctx context.Context, list []workspacesv1.WorkspaceDeployment, byName map[string]planned, cd string) []string {
	var out []string
	nss := map[string]bool{}
	for i := range list {
		ws := &list[i]
		if p := byName[ws.Name]; !admitted(ws) || p.cluster != cd || p.gpus == 0 {
			continue
		}
		ns := ws.Status.ReleaseNamespace
		if ns == "" {
			ns = "ws-" + ws.Name
		}
		nss[ns] = true
		line := fmt.Sprintf("%s phase %s", ws.Name, ws.Status.Phase)
		if ad := ws.Status.Admission; ad != nil {
			at := ""
			if ad.AdmittedAt != nil {
				at = ad.AdmittedAt.UTC().Format("15:04:05.000")
			}
			line += fmt.Sprintf(", admission %d GPUs at %s on %v (identity %q)", ad.GPUs, at, ad.Nodes, ad.ClusterIdentity)
		} else {
			line += ", no admission"
		}
		if c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.FeasibleCondition); c != nil {
			line += fmt.Sprintf(", Feasible %s %s at %s: %s", c.Status, c.Reason, c.LastTransitionTime.UTC().Format("15:04:05"), c.Message)
		}
		out = append(out, line)
	}
	child := s.st.World.Child(k0rdentsim.ChildName(s.ns, cd))
	if child == nil {
		return out
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := child.Client().List(cctx, &pods); err != nil {
		return append(out, fmt.Sprintf("child pods: %v", err))
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if nss[p.Namespace] {
			out = append(out, fmt.Sprintf("child pod %s/%s on %q: %s, GPUs %d", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, gpu.PodRequest(p, "nvidia.com/gpu")))
		}
	}
	return out
}

// sampler lists the workspaces continuously during a round and counts the samples where a cluster's
// admitted GPUs exceed the GPUs it has.
type sampler struct {
	cancel          context.CancelFunc
	done            chan struct{}
	once            sync.Once
	samples         int
	violations      int
	firstViolations []string
	// details are what the first violation's workspaces and the child's pods showed, for the log.
	details []string
}

func (s *suite) startSampler(ctx context.Context, r int, byName map[string]planned) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	smp := &sampler{cancel: cancel, done: make(chan struct{})}
	// The second team's workspaces (the reclaim fault) count on the clusters as the round's do.
	all := map[string]planned{}
	for name, p := range byName {
		all[name] = p
	}
	for _, p := range s.teamPlan(r) {
		all[p.name] = p
	}
	go func() {
		defer close(smp.done)
		for ctx.Err() == nil {
			list, err := s.roundWorkspaces(ctx, r)
			var team []workspacesv1.WorkspaceDeployment
			if err == nil && s.hasFault(faultReclaim) {
				team, err = s.teamWorkspaces(ctx, r)
			}
			if err == nil {
				smp.samples++
				list = append(list, team...)
				for cd, n := range admittedGPUsOn(list, all, s.childNodes(ctx)) {
					if n > s.gpus[cd] {
						smp.violations++
						if len(smp.firstViolations) < 3 {
							smp.firstViolations = append(smp.firstViolations, fmt.Sprintf("%s at %s: %d GPUs admitted (Running and Deploying) of %d: %s", cd, time.Now().UTC().Format("15:04:05"), n, s.gpus[cd], admittedNames(list, all, cd)))
						}
						if len(smp.details) == 0 {
							smp.details = s.violationDetails(ctx, list, all, cd)
						}
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return smp
}

func (smp *sampler) stop() {
	smp.once.Do(func() {
		smp.cancel()
		<-smp.done
	})
}

// checkObjects checks, after convergence: exactly one ServiceSet per workspace that has one, one for
// every Running workspace, and no ServiceSet, ws- namespace or Helm release without its workspace.
func (s *suite) checkObjects(ctx context.Context, r int, byName map[string]planned) {
	list, err := s.roundWorkspaces(ctx, r)
	if err != nil {
		s.finding(r, "listing workspaces: %v", err)
		return
	}
	live := map[string]*workspacesv1.WorkspaceDeployment{}
	for i := range list {
		live[list[i].Name] = &list[i]
	}
	var sets k0rdentv1beta1.ServiceSetList
	if err := s.c.List(ctx, &sets, client.InNamespace(s.ns)); err != nil {
		s.finding(r, "listing ServiceSets: %v", err)
		return
	}
	perWS := map[string][]string{}
	for _, ss := range sets.Items {
		name := ss.Labels[workspacesv1.WorkspaceLabel]
		if name == "" {
			continue // a shared prerequisite
		}
		perWS[name] = append(perWS[name], ss.Name)
		if _, ok := live[name]; !ok && ss.DeletionTimestamp.IsZero() {
			s.orphan(r, "ServiceSet %s of workspace %s, which does not exist", ss.Name, name)
		}
	}
	for name, ws := range live {
		if n := len(perWS[name]); n > 1 {
			s.orphan(r, "workspace %s has %d ServiceSets: %v", name, n, perWS[name])
		}
		if ws.Status.Phase == workspacesv1.PhaseRunning && len(perWS[name]) == 0 {
			s.finding(r, "workspace %s is Running without a ServiceSet", name)
			s.mu.Lock()
			s.fig.Lost++
			s.mu.Unlock()
		}
	}
	for _, cluster := range []string{"a", "b"} {
		s.checkChild(ctx, r, cdName(cluster), func(wsName string) bool {
			_, ok := live[wsName]
			return ok
		}, false)
	}
}

func (s *suite) orphan(r int, format string, args ...any) {
	s.finding(r, "orphan: "+format, args...)
	s.mu.Lock()
	s.fig.Orphans++
	s.mu.Unlock()
}

// checkChild reports ws- namespaces and Helm releases on a child whose workspace is not alive.
// Namespaces being deleted count only when strict (after the teardown).
func (s *suite) checkChild(ctx context.Context, r int, cd string, alive func(string) bool, strict bool) []string {
	child := s.st.World.Child(k0rdentsim.ChildName(s.ns, cd))
	if child == nil {
		s.finding(r, "no child cluster for %s", cd)
		return nil
	}
	var bad []string
	var nss corev1.NamespaceList
	if err := child.Client().List(ctx, &nss); err != nil {
		return []string{"listing namespaces: " + err.Error()}
	}
	for _, n := range nss.Items {
		if !strings.HasPrefix(n.Name, "ws-") || alive(strings.TrimPrefix(n.Name, "ws-")) {
			continue
		}
		if n.DeletionTimestamp.IsZero() || strict {
			bad = append(bad, fmt.Sprintf("namespace %s on %s (phase %s)", n.Name, cd, n.Status.Phase))
		}
	}
	var secrets corev1.SecretList
	if err := child.Client().List(ctx, &secrets, client.MatchingLabels{"owner": "helm"}); err != nil {
		return append(bad, "listing Helm releases: "+err.Error())
	}
	for _, sec := range secrets.Items {
		if strings.HasPrefix(sec.Namespace, "ws-") && !alive(strings.TrimPrefix(sec.Namespace, "ws-")) {
			bad = append(bad, fmt.Sprintf("Helm release %s in %s on %s", sec.Labels["name"], sec.Namespace, cd))
		}
	}
	if !strict {
		for _, b := range bad {
			s.orphan(r, "%s without its workspace", b)
		}
	}
	return bad
}

// teardown deletes the round's workspaces (with the webhook down at a random moment when asked)
// and waits until they, their ServiceSets, namespaces and releases are gone.
func (s *suite) teardown(ctx context.Context, r int, plan []planned, webhookOutage bool) {
	at := s.sched.Intn(len(plan))
	var wg sync.WaitGroup
	for i, p := range plan {
		if webhookOutage && i == at {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.inject(ctx, r, faultWebhook)
			}()
		}
		if err := retry(ctx, s.set.converge, func(ctx context.Context) error {
			return client.IgnoreNotFound(s.c.Delete(ctx, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: p.name}}))
		}); err != nil {
			s.finding(r, "deleting %s: %v", p.name, err)
		}
	}
	wg.Wait()
	ok, last := poll(ctx, s.set.converge, func(ctx context.Context) (bool, string) {
		list, err := s.roundWorkspaces(ctx, r)
		if err != nil {
			return false, err.Error()
		}
		if len(list) > 0 {
			return false, fmt.Sprintf("%d workspaces still there, e.g. %s (%s, finalizers %v)", len(list), list[0].Name, list[0].Status.Phase, list[0].Finalizers)
		}
		var sets k0rdentv1beta1.ServiceSetList
		if err := s.c.List(ctx, &sets, client.InNamespace(s.ns), client.HasLabels{workspacesv1.WorkspaceLabel}); err != nil {
			return false, err.Error()
		}
		if len(sets.Items) > 0 {
			return false, fmt.Sprintf("%d ServiceSets still there, e.g. %s", len(sets.Items), sets.Items[0].Name)
		}
		var bad []string
		for _, cluster := range []string{"a", "b"} {
			bad = append(bad, s.checkChild(ctx, r, cdName(cluster), func(string) bool { return false }, true)...)
		}
		return len(bad) == 0, strings.Join(bad[:min(len(bad), 5)], "; ")
	})
	if !ok {
		s.finding(r, "deletions not complete within %s: %s", s.set.converge, last)
		s.mu.Lock()
		s.fig.Lost++
		s.mu.Unlock()
	}
}

// inject runs one fault and waits for the world to be whole again; a fault that cannot be injected
// or undone is a finding.
func (s *suite) inject(ctx context.Context, r int, fault string) {
	s.mu.Lock()
	s.fig.Faults[fault]++
	s.mu.Unlock()
	s.progress("round %d: injecting %q", r, fault)
	var err error
	switch {
	case strings.HasPrefix(fault, faultKill):
		// Kill holds the world's supervisor off the component until Start, so that the fault, not
		// the supervisor's restart, decides when it comes back.
		c := s.st.Components[strings.TrimPrefix(fault, faultKill)]
		if err = c.Kill(); err == nil {
			err = c.Start(ctx)
		}
	case fault == faultWebhook:
		c := s.st.Components["webhook"]
		if err = c.Kill(); err == nil {
			hold(ctx, s.set.hold)
			err = c.Start(ctx)
		}
	case fault == faultChildStop:
		err = s.childOutage(ctx, r, cdName("b"))
	case fault == faultCredential:
		err = s.credentialRotation(ctx, r, cdName("a"))
	case fault == faultCordon:
		err = s.cordon(ctx, r, cdName("a"))
	case fault == faultReplace:
		err = s.replaceNode(ctx, cdName("a"))
	case fault == faultStopStart:
		err = s.stopStart(ctx, r)
	case fault == faultRecreate:
		err = s.recreate(ctx, r, cdName("b"))
	case fault == faultReclaim:
		err = s.reclaim(ctx, r)
	case fault == faultMgmt:
		api := s.st.World.Management.Env.ControlPlane.APIServer
		from := time.Now()
		if err = api.Stop(); err == nil {
			err = api.Start()
		}
		s.mu.Lock()
		s.restarts = append(s.restarts, [2]time.Time{from, time.Now().Add(restartSettle)})
		s.mu.Unlock()
	default:
		err = fmt.Errorf("unknown fault %q", fault)
	}
	if err != nil {
		s.finding(r, "fault %q: %v", fault, err)
		return
	}
	s.progress("round %d: %q over", r, fault)
}

// hold keeps a fault in place for d (the only fixed wait of the suite: the fault's duration).
func hold(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// inventory returns the Colony's inventory entry of a ClusterDeployment.
func (s *suite) inventory(ctx context.Context, cd string) (infrav1.ClusterGPUInventory, bool, error) {
	var c infrav1.Colony
	if err := s.c.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: colonyName}, &c); err != nil {
		return infrav1.ClusterGPUInventory{}, false, err
	}
	e, ok := c.Status.GPUInventory[cd]
	return e, ok, nil
}

// waitReachable waits until the inventory shows the child reachable (or not), with a message
// matching want when unreachable.
func (s *suite) waitReachable(ctx context.Context, cd string, reachable bool, want string, bound time.Duration) (bool, string) {
	return poll(ctx, bound, func(ctx context.Context) (bool, string) {
		e, ok, err := s.inventory(ctx, cd)
		if err != nil || !ok {
			return false, fmt.Sprintf("no inventory of %s (%v)", cd, err)
		}
		state := fmt.Sprintf("reachable %t message %q", e.Reachable, e.Message)
		if e.Reachable != reachable {
			return false, state
		}
		return reachable || strings.Contains(strings.ToLower(e.Message), strings.ToLower(want)), state
	})
}

// childOutage stops a child's API server for the outage duration; the inventory must mark it
// unreachable meanwhile and reachable again after.
func (s *suite) childOutage(ctx context.Context, r int, cd string) error {
	child := s.st.World.Child(k0rdentsim.ChildName(s.ns, cd))
	if child == nil {
		return fmt.Errorf("no child cluster for %s", cd)
	}
	if err := child.Env.Pause(); err != nil {
		return err
	}
	start := time.Now()
	ok, last := s.waitReachable(ctx, cd, false, "", s.set.childOutage)
	hold(ctx, s.set.childOutage-time.Since(start))
	if err := child.Env.Resume(); err != nil {
		return err
	}
	if !ok {
		s.finding(r, "inventory did not mark %s reachable: false during its %s outage: %s", cd, s.set.childOutage, last)
	}
	if ok, last := s.waitReachable(ctx, cd, true, "", 5*time.Minute); !ok {
		s.finding(r, "inventory did not mark %s reachable again after its outage: %s", cd, last)
	}
	return nil
}

// cordon cordons every node of a child (a drain's first step, or a maintenance window) for the hold,
// then uncordons them. While cordoned, no workspace of the round on that cluster may fail: those
// that wait for its GPUs wait (WaitingForGpuNodes), those running stay; the round then converges as
// after any fault.
func (s *suite) cordon(ctx context.Context, r int, cd string) error {
	child := s.st.World.Child(k0rdentsim.ChildName(s.ns, cd))
	if child == nil {
		return fmt.Errorf("no child cluster for %s", cd)
	}
	set := func(cordoned bool) error {
		return retry(ctx, time.Minute, func(ctx context.Context) error {
			var nodes corev1.NodeList
			if err := child.Env.Client.List(ctx, &nodes); err != nil {
				return err
			}
			for i := range nodes.Items {
				n := &nodes.Items[i]
				if n.Spec.Unschedulable == cordoned {
					continue
				}
				patch := client.MergeFrom(n.DeepCopy())
				n.Spec.Unschedulable = cordoned
				if err := child.Env.Client.Patch(ctx, n, patch); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := set(true); err != nil {
		return err
	}
	hold(ctx, s.set.hold)
	// The queue as it stands before the nodes come back: the waiters must be admitted in its order.
	s.takeQueue(ctx, r)
	list, err := s.roundWorkspaces(ctx, r)
	if err == nil {
		for _, ws := range list {
			if onCD := ws.Spec.ClusterDeploymentRef.Name == cd || (ws.Status.Placement != nil && ws.Status.Placement.Cluster == cd); onCD &&
				ws.Status.Phase == workspacesv1.PhaseFailed {
				s.finding(r, "workspace %s Failed while the nodes of %s were cordoned: %s", ws.Name, cd, ws.Status.Message)
			}
		}
	}
	return set(false)
}

// replaceNode replaces a child's GPU node under a new name, as Cluster API replaces a machine: the
// workspaces admitted on it lose their pods and their admission, and must be admitted again on the
// new node (or wait for room there), which the round's convergence checks.
func (s *suite) replaceNode(ctx context.Context, cd string) error {
	child := s.st.World.Child(k0rdentsim.ChildName(s.ns, cd))
	if child == nil {
		return fmt.Errorf("no child cluster for %s", cd)
	}
	var nodes corev1.NodeList
	if err := child.Env.Client.List(ctx, &nodes); err != nil {
		return err
	}
	for i := range nodes.Items {
		if _, ok := nodes.Items[i].Status.Allocatable[gpu.ResourceNVIDIA]; ok {
			to, err := child.ReplaceNode(ctx, nodes.Items[i].Name)
			if err == nil {
				s.progress("node %s of %s replaced by %s", nodes.Items[i].Name, cd, to)
			}
			return err
		}
	}
	return fmt.Errorf("no GPU node on %s", cd)
}

// credentialRotation replaces a child's kubeconfig Secret with a credential the child rejects (a
// client certificate of a CA it does not trust: certificates cannot be revoked, so revocation is
// played as the Secret's identity being replaced by one the child refuses), expects the inventory to
// report it, then rotates the Secret to a new valid identity and expects recovery.
func (s *suite) credentialRotation(ctx context.Context, r int, cd string) error {
	child := s.st.World.Child(k0rdentsim.ChildName(s.ns, cd))
	if child == nil {
		return fmt.Errorf("no child cluster for %s", cd)
	}
	good := child.Kubeconfig
	revoked, err := untrustedKubeconfig(child.Env.Config.Host, child.Env.Config.CAData)
	if err != nil {
		return err
	}
	// The simulator republishes child.Kubeconfig (as Cluster API would): the revoked one until rotated.
	child.Kubeconfig = revoked
	if err := s.writeKubeconfigSecret(ctx, cd, revoked); err != nil {
		child.Kubeconfig = good
		return err
	}
	ok, last := s.waitReachable(ctx, cd, false, "unauthorized", 3*time.Minute)
	if !ok {
		s.finding(r, "inventory did not report the revoked credential of %s: %s", cd, last)
	}
	hold(ctx, s.set.hold)
	user, err := child.Env.Env.AddUser(envtestUser(fmt.Sprintf("chaos-rotated-%d", r)), nil)
	if err != nil {
		return err
	}
	rotated, err := user.KubeConfig()
	if err != nil {
		return err
	}
	child.Kubeconfig = rotated
	if err := s.writeKubeconfigSecret(ctx, cd, rotated); err != nil {
		return err
	}
	if ok, last := s.waitReachable(ctx, cd, true, "", 5*time.Minute); !ok {
		s.finding(r, "inventory did not recover %s after the credential rotation: %s", cd, last)
	}
	return nil
}

func (s *suite) writeKubeconfigSecret(ctx context.Context, cd string, kubeconfig []byte) error {
	return retry(ctx, time.Minute, func(ctx context.Context) error {
		var sec corev1.Secret
		if err := s.c.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: k0rdentv1beta1.KubeconfigSecretName(cd)}, &sec); err != nil {
			return err
		}
		patch := client.MergeFrom(sec.DeepCopy())
		sec.Data[k0rdentv1beta1.KubeconfigSecretKey] = kubeconfig
		return s.c.Patch(ctx, &sec, patch)
	})
}
