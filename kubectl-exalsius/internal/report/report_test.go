package report

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// ws builds a workspace on cluster cd (name, or namespace/name) created minutes after t0, asking replicas x perReplica
// GPUs of vendor NVIDIA with the given node selector.
func ws(ns, name, cd string, minutes int, priority int32, phase workspacesv1.WorkspacePhase, reason string, replicas, perReplica int32,
	selector map[string]string) workspacesv1.WorkspaceDeployment {
	w := workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(minutes) * time.Minute))}}
	if cdNS, cdName, ok := strings.Cut(cd, "/"); ok {
		w.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{Namespace: cdNS, Name: cdName}
	} else {
		w.Spec.ClusterDeploymentRef.Name = cd
	}
	w.Spec.Priority = priority
	w.Status.Phase = phase
	w.Status.Conditions = []metav1.Condition{{Type: workspacesv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: reason + " message"}}
	w.Status.ResolvedResources = &workspacesv1.ResolvedResources{Replicas: replicas,
		PerReplica:   workspacesv1.PerReplicaResources{GPUCount: &perReplica, GPUVendor: workspacesv1.GPUVendorNVIDIA},
		NodeSelector: selector}
	return w
}

var h100 = map[string]string{gpu.LabelGPUModel: "H100"}

func names(q *QueuePosition) []string {
	var out []string
	for _, a := range q.Ahead {
		out = append(out, a.Namespace+"/"+a.Name)
	}
	return out
}

func TestQueueOrdersByPriorityThenAge(t *testing.T) {
	waiting := workspacesv1.PhaseWaiting
	all := []workspacesv1.WorkspaceDeployment{
		ws("a", "me", "cd", 10, 0, waiting, workspacesv1.ReasonWaitingForGpuCapacity, 1, 4, h100),
		ws("a", "older", "cd", 5, 0, waiting, workspacesv1.ReasonWaitingForGpuCapacity, 1, 2, h100),
		ws("b", "higher-newer", "a/cd", 20, 5, waiting, workspacesv1.ReasonWaitingForGpuCapacity, 2, 1, h100),
		ws("b", "newer", "a/cd", 15, 0, waiting, workspacesv1.ReasonWaitingForGpuCapacity, 1, 1, h100),
		ws("b", "other-cluster", "cd2", 1, 9, waiting, workspacesv1.ReasonWaitingForGpuCapacity, 1, 1, h100),
		ws("b", "other-model", "a/cd", 1, 9, waiting, workspacesv1.ReasonWaitingForGpuCapacity, 1, 1, map[string]string{gpu.LabelGPUModel: "A100"}),
		ws("b", "running", "a/cd", 1, 9, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning, 1, 1, h100),
		ws("a", "over-quota", "cd", 1, 9, waiting, workspacesv1.ReasonQuotaExceeded, 1, 1, h100),
	}
	// The namespaces' caps: b may use up to 5, a up to 0 (no maxPriority: capped at 0).
	caps := PriorityCaps{"b": 5}
	q := Queue(&all[0], all, caps)
	if q == nil || q.Kind != QueueCluster || q.Queue != "a/cd" || q.Position != 3 {
		t.Fatalf("queue = %+v, want position 3 in the cluster queue of a/cd", q)
	}
	if got, want := names(q), []string{"b/higher-newer", "a/older"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ahead = %v, want %v", got, want)
	}
	if q.Ahead[0].GPUs != 2 || q.Ahead[0].Priority != 5 {
		t.Fatalf("ahead[0] = %+v, want 2 GPUs at priority 5", q.Ahead[0])
	}

	// A cap below spec.priority counts: b's priority 5 capped at 0 leaves only the older one ahead.
	if got := names(Queue(&all[0], all, PriorityCaps{"b": 0})); !reflect.DeepEqual(got, []string{"a/older"}) {
		t.Fatalf("with b capped at 0, ahead = %v, want [a/older]", got)
	}

	// A quota waiter waits in its namespace's quota queue, not on the cluster.
	q = Queue(&all[7], all, caps)
	if q == nil || q.Kind != QueueQuota || q.Queue != "a" || q.Position != 1 {
		t.Fatalf("quota waiter: queue = %+v, want first in the quota queue of a", q)
	}
	// A running workspace waits in no queue.
	if q := Queue(&all[6], all, caps); q != nil {
		t.Fatalf("running workspace: queue = %+v, want none", q)
	}
}

func TestStatusCarriesReasonGPUsAndURL(t *testing.T) {
	w := ws("a", "nb", "cd", 0, 0, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning, 2, 2, nil)
	w.Status.Conditions[0].Status = metav1.ConditionTrue
	w.Status.Admission = &workspacesv1.Admission{Cluster: "a/cd", Replicas: 2, GPUsPerReplica: 2, GPUs: 4}
	w.Status.Access = []workspacesv1.AccessStatus{{Name: "none"}, {Name: "lab", URL: "https://nb.example"}, {Name: "ssh", URL: "ssh://nb.example:2222"}}
	s := Status(&w, nil, nil)
	want := WorkspaceStatus{Namespace: "a", Name: "nb", Phase: "Running", Ready: "True", Reason: workspacesv1.ReasonRunning,
		Message: "Running message", Cluster: "a/cd", GPUs: 4, Requested: 4, URL: "https://nb.example",
		URLs: []string{"https://nb.example", "ssh://nb.example:2222"}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("status =\n%+v\nwant\n%+v", s, want)
	}
	// A workspace placed by a Colony is on the cluster status.placement names.
	p := ws("a", "placed", "", 0, 0, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity, 1, 1, nil)
	p.Spec.ColonyRef = &workspacesv1.ColonyRef{Name: "fleet"}
	if ClusterOf(&p) != "" {
		t.Fatalf("unplaced: cluster %q, want none", ClusterOf(&p))
	}
	p.Status.Placement = &workspacesv1.Placement{Cluster: "fleet-a", Namespace: "infra", Reason: "TightestFit"}
	if ClusterOf(&p) != "infra/fleet-a" {
		t.Fatalf("placed: cluster %q, want infra/fleet-a", ClusterOf(&p))
	}
}

func TestFleetCountsAdmittedAndWaitingPerModel(t *testing.T) {
	colony := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "fleet"}}
	colony.Status.GPUInventory = map[string]infrav1.ClusterGPUInventory{
		"fleet-b": {Reachable: false, Offerings: []infrav1.GPUOffering{{Vendor: "NVIDIA", Model: "L4", Selector: map[string]string{gpu.LabelGPUModel: "L4"}, Total: 2}}},
		"fleet-a": {Reachable: true, Offerings: []infrav1.GPUOffering{
			{Vendor: "NVIDIA", Model: "H100", Selector: h100, Total: 8, Allocated: 10},
			{Vendor: "NVIDIA", Model: "A100", Selector: map[string]string{gpu.LabelGPUModel: "A100"}, Total: 4, Allocated: 1},
		}},
	}
	running := ws("t", "running", "", 0, 0, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning, 2, 2, h100)
	running.Status.Admission = &workspacesv1.Admission{Cluster: "infra/fleet-a", GPUVendor: workspacesv1.GPUVendorNVIDIA, GPUModel: "H100",
		GPUsPerReplica: 2, Replicas: 2, GPUs: 4, Nodes: []workspacesv1.AdmittedNode{{Name: "n1", Replicas: 1, GPUModel: "H100"}, {Name: "n2", Replicas: 1, GPUModel: "A100"}}}
	h100Waiter := ws("t", "h100", "infra/fleet-a", 1, 0, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity, 1, 8, h100)
	anyWaiter := ws("t", "any", "infra/fleet-a", 2, 0, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity, 3, 1, nil)
	elsewhere := ws("t", "elsewhere", "fleet-a", 2, 0, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity, 1, 1, nil)

	got := Fleet(colony, []workspacesv1.WorkspaceDeployment{running, h100Waiter, anyWaiter, elsewhere})
	want := []FleetRow{
		{Colony: "fleet", Cluster: "fleet-a", Reachable: true, Vendor: "NVIDIA", Model: "H100", Total: 8, Allocated: 10, Free: 0, Admitted: 2, Waiting: 8 + 3},
		{Colony: "fleet", Cluster: "fleet-a", Reachable: true, Vendor: "NVIDIA", Model: "A100", Total: 4, Allocated: 1, Free: 3, Admitted: 2, Waiting: 3},
		{Colony: "fleet", Cluster: "fleet-b", Reachable: false, Vendor: "NVIDIA", Model: "L4", Total: 2, Free: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fleet =\n%+v\nwant\n%+v", got, want)
	}
}

func TestExplainWait(t *testing.T) {
	me := ws("a", "me", "cd", 10, 0, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity, 2, 4, h100)
	me.Status.Conditions = append(me.Status.Conditions,
		metav1.Condition{Type: workspacesv1.ClassResolvedCondition, Status: metav1.ConditionTrue, Reason: "ClassResolved"},
		metav1.Condition{Type: workspacesv1.FeasibleCondition, Status: metav1.ConditionFalse, Reason: workspacesv1.ReasonWaitingForGpuCapacity,
			Message: "1/2 replicas fit"})
	me.Status.Feasibility = &workspacesv1.Feasibility{Reason: workspacesv1.ReasonWaitingForGpuCapacity, MatchingNodes: 2, FreeGPUs: 4, FittingReplicas: 1}
	older := ws("b", "older", "a/cd", 5, 0, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity, 1, 4, h100)
	e := ExplainWait(&me, []workspacesv1.WorkspaceDeployment{me, older}, nil, nil)
	if !e.Waiting || len(e.Blocking) != 1 || e.Blocking[0].Type != workspacesv1.FeasibleCondition {
		t.Fatalf("explanation = %+v, want waiting with Feasible blocking", e)
	}
	text := strings.Join(e.Lines, "\n")
	for _, want := range []string{
		"a/me is Waiting: WaitingForGpuCapacity.",
		"Feasible is False: WaitingForGpuCapacity: 1/2 replicas fit",
		"GPU gate: 1 of 2 replicas fit; 2 matching nodes, 4 GPUs free there",
		"Waiting for 8 GPUs on cluster a/cd: position 2.",
		"ahead: b/older (priority 0, 4 GPUs, created 2026-01-01T12:05:00Z)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("explanation lacks %q:\n%s", want, text)
		}
	}

	run := ws("a", "run", "cd", 0, 0, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning, 1, 1, nil)
	if e := ExplainWait(&run, nil, nil, nil); e.Waiting || len(e.Lines) != 1 || !strings.Contains(e.Lines[0], "not waiting") {
		t.Fatalf("running: %+v", e)
	}
}

func TestExplainWaitCohort(t *testing.T) {
	cohorts := CohortsOf([]workspacesv1.WorkspaceQuota{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}, Status: workspacesv1.WorkspaceQuotaStatus{Cohort: "fleet"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b"}, Status: workspacesv1.WorkspaceQuotaStatus{Cohort: "fleet"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-c"}, Status: workspacesv1.WorkspaceQuotaStatus{Cohort: "fleet"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "other"}, Status: workspacesv1.WorkspaceQuotaStatus{Cohort: "elsewhere"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "alone"}},
	})
	if !reflect.DeepEqual(cohorts, Cohorts{"team-a": "fleet", "team-b": "fleet", "team-c": "fleet", "other": "elsewhere"}) {
		t.Fatalf("cohorts = %v", cohorts)
	}
	borrower := func(ns, name string, borrowed int64, minutes int, policy workspacesv1.PreemptionPolicy) workspacesv1.WorkspaceDeployment {
		w := ws(ns, name, "cd", 0, 0, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning, 1, 4, nil)
		at := metav1.NewTime(t0.Add(time.Duration(minutes) * time.Minute))
		w.Status.Admission = &workspacesv1.Admission{Cluster: ns + "/cd", GPUs: 4, Replicas: 1, BorrowedGPUs: borrowed, AdmittedAt: &at}
		w.Spec.PreemptionPolicy = policy
		w.Status.Conditions = []metav1.Condition{{Type: workspacesv1.WithinQuotaCondition, Status: metav1.ConditionTrue,
			Reason: workspacesv1.ReasonWithinQuota, Message: "borrows above spec.gpus[0].guaranteed"}}
		return w
	}
	b1 := borrower("team-b", "small", 1, 10, "")
	b2 := borrower("team-c", "big", 3, 5, workspacesv1.PreemptionReclaimable)
	b3 := borrower("team-b", "young", 3, 20, "")
	foreign := borrower("other", "not-ours", 4, 1, "")
	own := borrower("team-a", "mine", 2, 1, "")
	waiter := ws("team-a", "waits", "cd", 30, 0, workspacesv1.PhaseWaiting, workspacesv1.ReasonQuotaExceeded, 1, 2, nil)
	waiter.Status.Conditions = []metav1.Condition{{Type: workspacesv1.WithinQuotaCondition, Status: metav1.ConditionFalse,
		Reason: workspacesv1.ReasonQuotaExceeded, Message: "cohort fleet leaves 2 guaranteed NVIDIA GPUs unused and 2 of them are borrowed already"}}
	all := []workspacesv1.WorkspaceDeployment{b1, b2, b3, foreign, own, waiter}

	e := ExplainWait(&waiter, all, nil, cohorts)
	var got []string
	for _, b := range e.Borrowers {
		got = append(got, b.Namespace+"/"+b.Name)
	}
	// Most borrowed first, then the youngest admission; not the waiter's own namespace, not another cohort.
	if want := []string{"team-b/young", "team-c/big", "team-b/small"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("borrowers = %v, want %v", got, want)
	}
	text := strings.Join(e.Lines, "\n")
	for _, want := range []string{
		"Borrowing in cohort fleet (GPUs above their namespace's guarantee):",
		"team-b/young borrows 3 GPUs (preemptionPolicy Reclaimable, admitted 2026-01-01T12:20:00Z)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("explanation lacks %q:\n%s", want, text)
		}
	}

	// Alone in its cohort (or others not listable), the waiter is told so.
	if e := ExplainWait(&waiter, []workspacesv1.WorkspaceDeployment{waiter, own}, nil, cohorts); len(e.Borrowers) != 0 ||
		!strings.Contains(strings.Join(e.Lines, "\n"), "No workspace of the other members of cohort fleet") {
		t.Errorf("no borrowers: %+v", e)
	}
	// Outside a cohort nothing is said of borrowing.
	if e := ExplainWait(&waiter, all, nil, nil); len(e.Borrowers) != 0 || strings.Contains(strings.Join(e.Lines, "\n"), "cohort fleet (") {
		t.Errorf("without cohorts: %+v", e)
	}

	// A running borrower says what it borrows and above which guarantee.
	e = ExplainWait(&b3, all, nil, cohorts)
	text = strings.Join(e.Lines, "\n")
	for _, want := range []string{
		"It borrows 3 of its 4 GPUs from cohort fleet: they are above the guarantee of namespace team-b's WorkspaceQuota.",
		"borrows above spec.gpus[0].guaranteed",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("borrower's explanation lacks %q:\n%s", want, text)
		}
	}
}

func TestCapsOfTakesTheLowest(t *testing.T) {
	p := func(v int32) *int32 { return &v }
	caps := CapsOf([]workspacesv1.WorkspaceQuota{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a"}, Spec: workspacesv1.WorkspaceQuotaSpec{MaxPriority: p(10)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a"}, Spec: workspacesv1.WorkspaceQuotaSpec{MaxPriority: p(3)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b"}},
	})
	if !reflect.DeepEqual(caps, PriorityCaps{"a": 3}) {
		t.Fatalf("caps = %v", caps)
	}
	hi := workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "b"}, Spec: workspacesv1.WorkspaceDeploymentSpec{Priority: 7}}
	if caps.Effective(&hi) != 0 || PriorityCaps(nil).Effective(&hi) != 7 {
		t.Fatal("a namespace without a cap counts 0; without caps read, spec.priority counts")
	}
}

// TestExplainWaitReclaim: a reclaimer names the borrowers it stops and when; a borrower told to give
// its GPUs back says when and for whom; one stopped by a reclaim says it starts again on its own.
func TestExplainWaitReclaim(t *testing.T) {
	at := metav1.NewTime(t0.Add(10 * time.Minute))
	reclaimer := ws("team-b", "needs", "cd", 0, 0, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForReclaim, 1, 4, nil)
	reclaimer.Status.Reclaiming = &workspacesv1.Reclaiming{Cluster: "team-b/cd", Since: metav1.NewTime(t0),
		Borrowers: []workspacesv1.ReclaimedWorkspace{{Namespace: "team-a", Name: "borrows", GPUs: 4, At: at}}}
	text := strings.Join(ExplainWait(&reclaimer, []workspacesv1.WorkspaceDeployment{reclaimer}, nil, nil).Lines, "\n")
	for _, want := range []string{"It reclaims GPUs within its namespace's guarantee on cluster team-b/cd (since 2026-01-01T12:00:00Z)",
		"team-a/borrows (4 GPUs) is stopped at 2026-01-01T12:10:00Z"} {
		if !strings.Contains(text, want) {
			t.Errorf("the reclaimer's explanation lacks %q:\n%s", want, text)
		}
	}

	borrower := ws("team-a", "borrows", "cd", 0, 0, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning, 1, 4, nil)
	borrower.Status.Reclaim = &workspacesv1.ReclaimNotice{At: at, For: "a workspace of namespace team-b", NoticedAt: metav1.NewTime(t0)}
	text = strings.Join(ExplainWait(&borrower, nil, nil, nil).Lines, "\n")
	if want := "It borrows GPUs that a workspace of namespace team-b needs within its guarantee: it is stopped at 2026-01-01T12:10:00Z"; !strings.Contains(text, want) {
		t.Errorf("the borrower's explanation lacks %q:\n%s", want, text)
	}
	borrower.Status.Phase = workspacesv1.PhaseStopped
	borrower.Status.Reclaim.StoppedAt = &at
	text = strings.Join(ExplainWait(&borrower, nil, nil, nil).Lines, "\n")
	if want := "It was stopped at 2026-01-01T12:10:00Z to give the GPUs it borrowed back to a workspace of namespace team-b; it starts again"; !strings.Contains(text, want) {
		t.Errorf("the reclaimed workspace's explanation lacks %q:\n%s", want, text)
	}
}
