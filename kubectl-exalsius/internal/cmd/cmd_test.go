package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/kubectl-exalsius/internal/report"
)

var (
	mgmt       *testenv.Management
	kubeconfig string
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(mg *testenv.Management) error {
		mgmt = mg
		dir, err := os.MkdirTemp("", "kubectl-exalsius")
		if err != nil {
			return err
		}
		kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := os.WriteFile(kubeconfig, mg.Kubeconfig, 0o600); err != nil {
			return err
		}
		return world(context.Background())
	})
}

// world writes what the commands read, statuses included, as the controllers would have:
//
//	team-a/nb       Running on team-a/gpu-1, 4 GPUs admitted (2 H100 nodes), a URL
//	team-a/me       Waiting for 8 H100 GPUs on team-a/gpu-1
//	team-b/urgent   Waiting for 2 H100 GPUs on team-a/gpu-1, priority 5 (team-b's quota allows 10): ahead of me
//	team-a/quota    Waiting for team-a's quota
//	team-a/fleet    a Colony whose cluster gpu-1 has 8 H100 GPUs, 4 requested
func world(ctx context.Context) error {
	c := mgmt.Client
	for _, ns := range []string{"team-a", "team-b"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	ten := int32(10)
	if err := c.Create(ctx, &workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "q"},
		Spec: workspacesv1.WorkspaceQuotaSpec{MaxPriority: &ten}}); err != nil {
		return err
	}
	h100 := map[string]string{gpu.LabelGPUModel: "H100"}
	mk := func(ns, name string, priority int32, st workspacesv1.WorkspaceDeploymentStatus) error {
		ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: "jupyter", Priority: priority,
				ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Namespace: "team-a", Name: "gpu-1"}}}
		if err := c.Create(ctx, ws); err != nil {
			return err
		}
		ws.Status = st
		return c.Status().Update(ctx, ws)
	}
	ready := func(status metav1.ConditionStatus, reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: workspacesv1.ReadyCondition, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()}}
	}
	res := func(replicas, per int32) *workspacesv1.ResolvedResources {
		return &workspacesv1.ResolvedResources{Replicas: replicas, NodeSelector: h100, GPUResourceName: "nvidia.com/gpu",
			PerReplica: workspacesv1.PerReplicaResources{GPUCount: &per, GPUVendor: workspacesv1.GPUVendorNVIDIA}}
	}
	now := metav1.Now()
	if err := mk("team-a", "nb", 0, workspacesv1.WorkspaceDeploymentStatus{Phase: workspacesv1.PhaseRunning,
		Conditions: ready(metav1.ConditionTrue, workspacesv1.ReasonRunning, "the release is deployed"), ResolvedResources: res(2, 2),
		Admission: &workspacesv1.Admission{Cluster: "team-a/gpu-1", GPUVendor: workspacesv1.GPUVendorNVIDIA, GPUModel: "H100",
			GPUsPerReplica: 2, Replicas: 2, GPUs: 4, AdmittedAt: &now,
			Nodes: []workspacesv1.AdmittedNode{{Name: "n1", Replicas: 1, GPUModel: "H100"}, {Name: "n2", Replicas: 1, GPUModel: "H100"}}},
		Access: []workspacesv1.AccessStatus{{Name: "lab", Protocol: "HTTP", URL: "https://nb.team-a.example", Ready: true}}}); err != nil {
		return err
	}
	waiting := func(replicas, per int32) workspacesv1.WorkspaceDeploymentStatus {
		return workspacesv1.WorkspaceDeploymentStatus{Phase: workspacesv1.PhaseWaiting, ResolvedResources: res(replicas, per),
			Conditions:  ready(metav1.ConditionFalse, workspacesv1.ReasonWaitingForGpuCapacity, "0/1 replicas fit: 4 H100 GPUs free"),
			Feasibility: &workspacesv1.Feasibility{Reason: workspacesv1.ReasonWaitingForGpuCapacity, MatchingNodes: 2, FreeGPUs: 4}}
	}
	if err := mk("team-a", "me", 0, waiting(1, 8)); err != nil {
		return err
	}
	if err := mk("team-b", "urgent", 5, waiting(1, 2)); err != nil {
		return err
	}
	over := waiting(1, 1)
	over.Conditions = ready(metav1.ConditionFalse, workspacesv1.ReasonQuotaExceeded, "team-a may run 1 workspace")
	if err := mk("team-a", "quota", 0, over); err != nil {
		return err
	}
	colony := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "fleet"}}
	if err := c.Create(ctx, colony); err != nil {
		return err
	}
	colony.Status.GPUInventory = map[string]infrav1.ClusterGPUInventory{"gpu-1": {Reachable: true, LastUpdated: now,
		Offerings: []infrav1.GPUOffering{{Vendor: "NVIDIA", Model: "H100", Selector: h100, ResourceName: "nvidia.com/gpu", Total: 8, Allocated: 4, Nodes: 2}}}}
	return c.Status().Update(ctx, colony)
}

// run runs kubectl-exalsius with args against the test API server and returns stdout and stderr.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRoot(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	root.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := run(t, args...)
	if err != nil {
		t.Fatalf("kubectl-exalsius %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// fields splits a table's lines into their columns, without the empty lines.
func fields(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows = append(rows, f)
		}
	}
	return rows
}

func TestStatusOfARunningWorkspace(t *testing.T) {
	rows := fields(mustRun(t, "-n", "team-a", "status", "nb"))
	want := [][]string{
		{"NAME", "PHASE", "READY", "REASON", "CLUSTER", "GPUS", "QUEUE", "URL"},
		{"nb", "Running", "True", "Running", "team-a/gpu-1", "4/4", "-", "https://nb.team-a.example"},
	}
	if !equalRows(rows, want) {
		t.Fatalf("status table:\n%v\nwant\n%v", rows, want)
	}
}

// TestStatusShowsWhatIsAhead: team-b's urgent (priority 5, allowed by its quota) waits on the same
// cluster for the same GPUs, so it is ahead of me, across namespaces.
func TestStatusShowsWhatIsAhead(t *testing.T) {
	out := mustRun(t, "-n", "team-a", "status", "me")
	rows := fields(out)
	if len(rows) != 5 || !equalRows(rows[1:2], [][]string{{"me", "Waiting", "False", "WaitingForGpuCapacity", "team-a/gpu-1", "0/8", "2", "-"}}) ||
		rows[2][0] != "Ahead" || !equalRows([][]string{rows[4][:4]}, [][]string{{"1", "team-b/urgent", "5", "2"}}) {
		t.Fatalf("status of a waiter:\n%s", out)
	}

	var s report.WorkspaceStatus
	if err := json.Unmarshal([]byte(mustRun(t, "-n", "team-a", "status", "me", "-o", "json")), &s); err != nil {
		t.Fatal(err)
	}
	if s.Queue == nil || s.Queue.Position != 2 || len(s.Queue.Ahead) != 1 || s.Queue.Ahead[0].Name != "urgent" || s.Reason != workspacesv1.ReasonWaitingForGpuCapacity {
		t.Fatalf("status -o json: %+v", s)
	}
	// Without names, every workspace of the namespace, as YAML.
	var all []report.WorkspaceStatus
	if err := yaml.Unmarshal([]byte(mustRun(t, "-n", "team-a", "status", "-o", "yaml")), &all); err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("status -o yaml of team-a: want 3 workspaces, got %+v", all)
	}
}

// TestStatusOfATenant: a user who may read only team-a's workspaces still gets a status, counted
// from team-a alone, and is told so.
func TestStatusOfATenant(t *testing.T) {
	if _, err := mgmt.Tenant(context.Background(), "team-a", "alice", []rbacv1.PolicyRule{{APIGroups: []string{workspacesv1.GroupVersion.Group},
		Resources: []string{"workspacedeployments"}, Verbs: []string{"get", "list"}}}); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run(t, "--as", "alice", "-n", "team-a", "status", "me")
	if err != nil {
		t.Fatalf("status as a tenant: %v\n%s", err, errOut)
	}
	if rows := fields(out); len(rows) != 2 || rows[1][6] != "1" {
		t.Fatalf("status as a tenant: want position 1 (team-b is not visible), got\n%s", out)
	}
	if !strings.Contains(errOut, "only the workspaces of namespace team-a") || !strings.Contains(errOut, "priorities are taken as written") {
		t.Fatalf("status as a tenant must say what it could not count: %q", errOut)
	}
}

func TestOpen(t *testing.T) {
	if out := mustRun(t, "-n", "team-a", "open", "nb"); out != "https://nb.team-a.example\n" {
		t.Fatalf("open: %q", out)
	}
	if _, _, err := run(t, "-n", "team-a", "open", "me"); err == nil || !strings.Contains(err.Error(), "has no URL yet (phase Waiting)") {
		t.Fatalf("open of a waiting workspace: want an error saying it has no URL, got %v", err)
	}
	if _, _, err := run(t, "-n", "team-a", "open", "missing"); err == nil || !strings.Contains(err.Error(), "team-a/missing not found") {
		t.Fatalf("open of a missing workspace: %v", err)
	}
}

func TestFleet(t *testing.T) {
	rows := fields(mustRun(t, "-n", "team-a", "fleet", "fleet"))
	want := [][]string{
		{"COLONY", "CLUSTER", "REACHABLE", "VENDOR", "MODEL", "TOTAL", "ALLOCATED", "FREE", "ADMITTED", "WAITING"},
		{"fleet", "gpu-1", "true", "NVIDIA", "H100", "8", "4", "4", "4", "10"},
	}
	if !equalRows(rows, want) {
		t.Fatalf("fleet table:\n%v\nwant\n%v", rows, want)
	}
	var got []report.FleetRow
	if err := json.Unmarshal([]byte(mustRun(t, "-n", "team-a", "fleet", "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Admitted != 4 || got[0].Waiting != 10 {
		t.Fatalf("fleet -o json: %+v", got)
	}
}

func TestExplainWait(t *testing.T) {
	out := mustRun(t, "-n", "team-a", "explain-wait", "me")
	for _, want := range []string{"team-a/me is Waiting: WaitingForGpuCapacity.", "0/1 replicas fit: 4 H100 GPUs free",
		"GPU gate: 0 of 1 replicas fit; 2 matching nodes, 4 GPUs free", "Waiting for 8 GPUs on cluster team-a/gpu-1: position 2.",
		"ahead: team-b/urgent (priority 5, 2 GPUs"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain-wait lacks %q:\n%s", want, out)
		}
	}
	if out := mustRun(t, "-n", "team-a", "explain-wait", "quota"); !strings.Contains(out, "Waiting for the WorkspaceQuota of namespace team-a: position 1.") {
		t.Fatalf("explain-wait of a quota waiter:\n%s", out)
	}
}

// TestStopStartRetry: stop and start set spec.stopped, retry the retry annotation, each under the
// field manager kubectl-exalsius.
func TestStopStartRetry(t *testing.T) {
	ctx := context.Background()
	get := func() *workspacesv1.WorkspaceDeployment {
		ws := &workspacesv1.WorkspaceDeployment{}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "nb"}, ws); err != nil {
			t.Fatal(err)
		}
		return ws
	}
	managed := func(ws *workspacesv1.WorkspaceDeployment, field string) bool {
		for _, mf := range ws.ManagedFields {
			if mf.Manager == FieldManager && mf.FieldsV1 != nil && strings.Contains(mf.FieldsV1.GetRawString(), field) {
				return true
			}
		}
		return false
	}
	if out := mustRun(t, "-n", "team-a", "stop", "nb"); out != "workspacedeployment.workspaces.exalsius.ai/nb stopped\n" {
		t.Fatalf("stop: %q", out)
	}
	if ws := get(); !ws.Spec.Stopped || !managed(ws, `"f:stopped"`) {
		t.Fatalf("stop: spec.stopped %v, managed by %s: %v", ws.Spec.Stopped, FieldManager, managed(ws, `"f:stopped"`))
	}
	mustRun(t, "-n", "team-a", "start", "nb")
	if ws := get(); ws.Spec.Stopped {
		t.Fatal("start: spec.stopped is still true")
	}

	now = func() time.Time { return time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC) }
	defer func() { now = time.Now }()
	mustRun(t, "-n", "team-a", "retry", "nb")
	if ws := get(); ws.Annotations[RetryAnnotation] != "2026-12-04T10:00:00Z" || !managed(ws, RetryAnnotation) {
		t.Fatalf("retry: annotations %v", ws.Annotations)
	}
}

func TestBadOutputIsRefused(t *testing.T) {
	if _, _, err := run(t, "-n", "team-a", "status", "-o", "wide"); err == nil || !strings.Contains(err.Error(), `--output "wide"`) {
		t.Fatalf("want --output wide refused, got %v", err)
	}
}

func equalRows(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], "\x00") != strings.Join(b[i], "\x00") {
			return false
		}
	}
	return true
}

// TestExplainWaitInACohort: a quota waiter in a cohort is told who borrows in the cohort; a tenant
// who may read only its own namespace still learns its cohort from its WorkspaceQuota, and is told
// that no borrower it may list exists.
func TestExplainWaitInACohort(t *testing.T) {
	ctx, c := context.Background(), mgmt.Client
	for _, ns := range []string{"cohort-x", "cohort-y"} {
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		q := &workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q"}}
		must(t, c.Create(ctx, q))
		q.Status.Cohort = "fleet"
		must(t, c.Status().Update(ctx, q))
	}
	mk := func(ns, name string, st workspacesv1.WorkspaceDeploymentStatus) {
		ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: "jupyter", ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "gpu"}}}
		must(t, c.Create(ctx, ws))
		ws.Status = st
		must(t, c.Status().Update(ctx, ws))
	}
	at := metav1.NewTime(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	mk("cohort-y", "borrower", workspacesv1.WorkspaceDeploymentStatus{Phase: workspacesv1.PhaseRunning,
		Conditions: []metav1.Condition{{Type: workspacesv1.WithinQuotaCondition, Status: metav1.ConditionTrue, Reason: workspacesv1.ReasonWithinQuota,
			Message: "borrows above spec.gpus[0].guaranteed", LastTransitionTime: at}},
		Admission: &workspacesv1.Admission{Cluster: "cohort-y/gpu", Replicas: 1, GPUs: 4, BorrowedGPUs: 3, AdmittedAt: &at}})
	mk("cohort-x", "waiter", workspacesv1.WorkspaceDeploymentStatus{Phase: workspacesv1.PhaseWaiting,
		Conditions: []metav1.Condition{{Type: workspacesv1.WithinQuotaCondition, Status: metav1.ConditionFalse, Reason: workspacesv1.ReasonQuotaExceeded,
			Message: "cohort fleet leaves 3 guaranteed NVIDIA GPUs unused and 3 of them are borrowed already", LastTransitionTime: at}}})

	out := mustRun(t, "-n", "cohort-x", "explain-wait", "waiter")
	for _, want := range []string{"Borrowing in cohort fleet", "cohort-y/borrower borrows 3 GPUs (preemptionPolicy Reclaimable, admitted 2026-03-01T09:00:00Z)"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain-wait lacks %q:\n%s", want, out)
		}
	}
	if out := mustRun(t, "-n", "cohort-y", "explain-wait", "borrower"); !strings.Contains(out, "It borrows 3 of its 4 GPUs from cohort fleet") {
		t.Errorf("explain-wait of a borrower:\n%s", out)
	}

	if _, err := mgmt.Tenant(ctx, "cohort-x", "carol", []rbacv1.PolicyRule{{APIGroups: []string{workspacesv1.GroupVersion.Group},
		Resources: []string{"workspacedeployments", "workspacequotas"}, Verbs: []string{"get", "list"}}}); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run(t, "--as", "carol", "-n", "cohort-x", "explain-wait", "waiter")
	if err != nil {
		t.Fatalf("explain-wait as a tenant: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "No workspace of the other members of cohort fleet that you may list borrows GPUs.") {
		t.Errorf("explain-wait as a tenant:\n%s", out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
