package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

func TestCreateConcurrentlyCallsEachIndexOnce(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	inFlight, most := 0, 0
	err := createConcurrently(context.Background(), 200, 8, func(i int) error {
		mu.Lock()
		seen[i]++
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if seen[i] != 1 {
			t.Fatalf("index %d created %d times", i, seen[i])
		}
	}
	if most < 2 || most > 8 {
		t.Fatalf("at most %d creates in flight, want between 2 and 8", most)
	}
}

func TestCreateConcurrentlyStopsOnError(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	boom := errors.New("boom")
	err := createConcurrently(context.Background(), 1000, 4, func(i int) error {
		mu.Lock()
		calls++
		mu.Unlock()
		if i == 10 {
			return boom
		}
		time.Sleep(time.Millisecond)
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if calls > 100 {
		t.Fatalf("%d creates after an error, want the creators to stop", calls)
	}
}

func TestReplaceSectionKeepsTheOtherSections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	doc := "# Doc\n\n" + beginMarker + "\nold admission\n" + endMarker + "\n\n## Hand-written\n\ntext\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceSection(path, envelopeBegin, envelopeEnd, "envelope 1\n"); err != nil {
		t.Fatal(err)
	}
	if err := replaceSection(path, beginMarker, endMarker, "new admission\n"); err != nil {
		t.Fatal(err)
	}
	if err := replaceSection(path, envelopeBegin, envelopeEnd, "envelope 2\n"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"new admission", "## Hand-written\n\ntext\n", "envelope 2"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	for _, gone := range []string{"old admission", "envelope 1"} {
		if strings.Contains(got, gone) {
			t.Errorf("%q still in:\n%s", gone, got)
		}
	}
	if strings.Count(got, envelopeBegin) != 1 || strings.Count(got, beginMarker) != 1 {
		t.Errorf("a section written twice:\n%s", got)
	}
}

func admittedWorkspace(name, cluster string, nodes ...string) *workspacesv1.WorkspaceDeployment {
	ws := &workspacesv1.WorkspaceDeployment{}
	ws.Name = name
	ws.Status.ServiceSetName = name
	ad := &workspacesv1.Admission{Cluster: cluster, GPUsPerReplica: 1}
	for _, n := range nodes {
		ad.Nodes = append(ad.Nodes, workspacesv1.AdmittedNode{Name: n, Replicas: 1})
	}
	ws.Status.Admission = ad
	return ws
}

// A change is done once every workspace admitted on the changed node of that child server no longer
// names the node; workspaces of another server with a node of the same name are not waited for.
func TestTrackerTimesAChangeUntilTheAffectedLeaveTheNode(t *testing.T) {
	fw := watch.NewFake()
	tr := newTracker()
	go func() {
		for ev := range fw.ResultChan() {
			tr.observe(ev)
		}
	}()
	serverOf := map[string]int{"bench/cd-000": 0, "bench/cd-001": 1, "bench/cd-002": 0}
	fw.Add(admittedWorkspace("ws-00000", "bench/cd-000", "gpu-0000"))
	fw.Add(admittedWorkspace("ws-00001", "bench/cd-002", "gpu-0000"))
	fw.Add(admittedWorkspace("ws-00002", "bench/cd-001", "gpu-0000"))
	fw.Add(admittedWorkspace("ws-00003", "bench/cd-000", "gpu-0001"))
	for tr.admittedCount() < 4 {
		time.Sleep(time.Millisecond)
	}
	if got := tr.busiestNode(0, serverOf, map[string]bool{}); got != "gpu-0000" {
		t.Fatalf("busiest node of server 0 = %q, want gpu-0000", got)
	}
	if got := tr.busiestNode(0, serverOf, map[string]bool{"0/gpu-0000": true}); got != "gpu-0001" {
		t.Fatalf("busiest node of server 0 without the changed one = %q, want gpu-0001", got)
	}
	affected := tr.onNode(0, "gpu-0000", serverOf)
	if len(affected) != 2 {
		t.Fatalf("affected = %v, want the two workspaces of server 0 on gpu-0000", affected)
	}
	at := time.Now()
	done := tr.expect(affected, "gpu-0000")
	fw.Modify(admittedWorkspace("ws-00000", "bench/cd-000", "gpu-0002"))
	fw.Modify(admittedWorkspace("ws-00002", "bench/cd-001", "gpu-0003")) // another server: not waited for
	fw.Modify(admittedWorkspace("ws-00001", "bench/cd-002", "gpu-0000")) // a status write still on the node
	select {
	case <-done:
		t.Fatal("done while ws-00001 is still on the node")
	case <-time.After(50 * time.Millisecond):
	}
	moved := admittedWorkspace("ws-00001", "bench/cd-002")
	moved.Status.Admission = nil // waiting again: left the node too
	fw.Modify(moved)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the change did not complete after both affected workspaces left the node")
	}
	lat, timedOut := tr.collect(at)
	if len(lat) != 2 || timedOut != 0 {
		t.Fatalf("latencies %v, timed out %d; want 2 and 0", lat, timedOut)
	}
}

// TestTargetsCountTheClassStatusWrites: the writes target leaves out the class's status.inUseBy
// writes, whatever verb the controller uses for them (it applies them), and says how many there were.
func TestTargetsCountTheClassStatusWrites(t *testing.T) {
	r := result{scenario: scenario{class: "cpu", clusters: 1, n: 10, creators: 1}, mgmt: requests{
		"workspacedeployments PATCH": 20, "servicesets POST": 10, "events POST": 10,
		"workspaceclasses/status APPLY": 3, "leases PUT": 2}}
	out := targets([]result{r})
	if !strings.Contains(out, "at most 4.000, plus the class's status.inUseBy count: at most 3 writes in a whole run | yes") {
		t.Fatalf("want 4 writes per workspace and the class's 3 applies counted apart, got:\n%s", out)
	}
}

// TestParseLoad: --start-load takes /proc/loadavg's first three fields and refuses anything else,
// naming what is wrong.
func TestParseLoad(t *testing.T) {
	if got, err := parseLoad(" 0.93  1.20 2.05\n"); err != nil || got != "0.93 1.20 2.05" {
		t.Fatalf("parseLoad of three load averages = %q, %v", got, err)
	}
	for _, bad := range []string{"", "0.93 1.20", "0.93 1.20 2.05 1/300", "0.93 x 2.05", "-1 0 0", "NaN 0 0", "Inf 0 0"} {
		if _, err := parseLoad(bad); err == nil {
			t.Errorf("parseLoad(%q) accepted it", bad)
		}
	}
}

func TestProcessCPU(t *testing.T) {
	text := "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n" +
		"# TYPE process_cpu_seconds_total counter\n" +
		`apiserver_request_total{verb="POST"} 7` + "\n" +
		"process_cpu_seconds_total 12.5\n" +
		"process_resident_memory_bytes 1e+08\n"
	if v, ok := processCPU(text); !ok || v != 12.5 {
		t.Fatalf("processCPU = %v, %v; want 12.5, true", v, ok)
	}
	if v, ok := processCPU("process_cpu_seconds_total_other 3\nprocess_cpu_seconds_total 3.2e+01\n"); !ok || v != 32 {
		t.Fatalf("processCPU after a longer name, in an exponent = %v, %v; want 32, true", v, ok)
	}
	for _, bad := range []string{"", "process_resident_memory_bytes 1\n", "process_cpu_seconds_total x\n",
		"process_cpu_seconds_total_other 3\n"} {
		if v, ok := processCPU(bad); ok {
			t.Errorf("processCPU(%q) = %v, true; want not found", bad, v)
		}
	}
}

func TestCPUSplit(t *testing.T) {
	r := result{scenario: scenario{n: 1000}, cpuSeconds: 6, servers: serverCPUs{api: 18, etcd: 2, childAPI: 3, childEtcd: 1},
		ref: rates{eight: 1000, apiPerCreate: 0.0012, workspaces: 250, apiPerWorkspace: 0.0041}}
	// Per workspace: controller 6 ms, API server 18, etcd 2, child 3 and 1: 30 ms in all. One ConfigMap
	// create cost the API server 1.2 ms, so it allows 1.2/18 = 6.7% of the reference's rate; 2 cores
	// allow 2000/30 = 66.7 workspaces/s, 6.7% of 1,000/s. The workspaces' own creates ran at 250/s,
	// 25% of the ConfigMaps', at 4.1 ms each.
	got := strings.Join(cpuSplit(r, 2), " | ")
	want := "6.00 | 18.00 | 2.00 | 3.00 | 1.00 | 30.00 | 1.20 | 6.7% | 6.7% | 4.10 | 25.0%"
	if got != want {
		t.Fatalf("cpuSplit = %q, want %q", got, want)
	}
	r.ref.apiPerCreate = 0
	if got := strings.Join(cpuSplit(r, 2), " | "); !strings.HasSuffix(got, "| — | — | — | 4.10 | 25.0%") {
		t.Fatalf("cpuSplit without a ConfigMap CPU figure = %q, want those shares left out and the creates' kept", got)
	}
	r.ref = rates{}
	if got := strings.Join(cpuSplit(r, 2), " | "); !strings.HasSuffix(got, "| — | — | — | — | —") {
		t.Fatalf("cpuSplit without a reference = %q, want the shares left out", got)
	}
}

// failingCreates is a client whose every Create fails, alternately with an API status error and a
// plain one (the two kinds a create can return: the server's refusal, or a transport failure).
type failingCreates struct {
	client.Client
	calls atomic.Int64
}

func (f *failingCreates) Create(context.Context, client.Object, ...client.CreateOption) error {
	if f.calls.Add(1)%2 == 0 {
		return errors.New("connection refused")
	}
	return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("denied"))
}

// A reference whose creates all fail, with errors of more than one kind, ends with an error that says
// so (and does not panic), instead of a rate of 0.
func TestCreateRateWithoutASuccessfulCreate(t *testing.T) {
	cl := &failingCreates{}
	obj := func(name string) client.Object { return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	_, _, err := createRate(context.Background(), cl, 8, 200*time.Millisecond, "c8", obj, nil)
	if err == nil || !strings.Contains(err.Error(), "no c8 create succeeded") {
		t.Fatalf("createRate = %v, want an error naming the failed creates", err)
	}
	if cl.calls.Load() < 2 {
		t.Fatalf("%d creates tried, want both kinds of error seen", cl.calls.Load())
	}
}
