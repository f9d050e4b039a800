package gate

import (
	"math"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// guaranteed is an NVIDIA entry with a limit, a guarantee and, when b >= 0, a borrowing limit.
func guaranteed(limit, g, b int64) workspacesv1.GPUQuota {
	e := workspacesv1.GPUQuota{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: limit, Guaranteed: &g}
	if b >= 0 {
		e.BorrowingLimit = &b
	}
	return e
}

// member is a cohort member with one quota entry and what its workspaces hold.
func member(ns string, e workspacesv1.GPUQuota, used int64) cohortMember {
	m := cohortMember{namespace: ns, quotas: []workspacesv1.WorkspaceQuota{quota("q", nil, e)}}
	if used > 0 {
		m.held = []quotaCharge{ch(workspacesv1.GPUVendorNVIDIA, "", used)}
	}
	return m
}

func TestQuotaViolationBorrowing(t *testing.T) {
	nv := workspacesv1.GPUVendorNVIDIA
	// Team a: limit 16, guaranteed 8, and 8 in use.
	own := quotaScope{quotas: []workspacesv1.WorkspaceQuota{quota("q", nil, guaranteed(16, 8, -1))}, cohort: "fleet"}
	held := []quotaCharge{ch(nv, "", 8)}
	idleB := member("b", guaranteed(8, 8, -1), 2) // 6 unused
	busyC := member("c", guaranteed(8, 8, -1), 8) // 0 unused
	cases := []struct {
		name         string
		sc           quotaScope
		held         []quotaCharge
		req          int64
		policy       workspacesv1.PreemptionPolicy
		want         string
		wantBorrowed int64
	}{
		{"within the guarantee", quotaScope{quotas: own.quotas, cohort: "fleet"}, nil, 8, "", "", 0},
		{"borrows what b leaves unused", withOthers(own, idleB, busyC), held, 4, "", "", 4},
		{"the part above the guarantee is borrowed", withOthers(own, idleB), []quotaCharge{ch(nv, "", 6)}, 4, "", "", 2},
		{"no more than the cohort leaves unused", withOthers(own, idleB, busyC), held, 7, "",
			"WorkspaceQuota q: 8 of 8 guaranteed NVIDIA GPUs are used and the workspace asks for 7 (spec.gpus[0].guaranteed); cohort fleet leaves 6 guaranteed NVIDIA GPUs unused and 0 of them are borrowed already", 0},
		{"what others borrow counts", withOthers(own, idleB, member("d", guaranteed(8, 0, -1), 5)), held, 2, "",
			"WorkspaceQuota q: 8 of 8 guaranteed NVIDIA GPUs are used and the workspace asks for 2 (spec.gpus[0].guaranteed); cohort fleet leaves 6 guaranteed NVIDIA GPUs unused and 5 of them are borrowed already", 0},
		{"never borrows with preemptionPolicy Never", withOthers(own, idleB), held, 1, workspacesv1.PreemptionNever,
			"WorkspaceQuota q: 8 of 8 guaranteed NVIDIA GPUs are used and the workspace asks for 1 (spec.gpus[0].guaranteed); with spec.preemptionPolicy Never it does not borrow", 0},
		{"Never within the guarantee", withOthers(own, idleB), nil, 8, workspacesv1.PreemptionNever, "", 0},
		{"borrowing limit", quotaScope{quotas: []workspacesv1.WorkspaceQuota{quota("q", nil, guaranteed(16, 8, 2))}, cohort: "fleet", others: []cohortMember{idleB}}, held, 3, "",
			"WorkspaceQuota q: 8 of 8 guaranteed NVIDIA GPUs are used and the workspace asks for 3 (spec.gpus[0].guaranteed); the namespace may borrow at most 2 above it (spec.gpus[0].borrowingLimit)", 0},
		{"limit still caps", withOthers(own, idleB), []quotaCharge{ch(nv, "", 14)}, 3, "",
			"WorkspaceQuota q: 14 of 16 NVIDIA GPUs are used and the workspace asks for 3 (spec.gpus[0])", 0},
		{"no cohort, no borrowing", quotaScope{quotas: own.quotas}, held, 1, "",
			"WorkspaceQuota q: 8 of 8 guaranteed NVIDIA GPUs are used and the workspace asks for 1 (spec.gpus[0].guaranteed); the namespace is in no cohort to borrow from (label workspaces.exalsius.ai/cohort on the namespace)", 0},
		{"without guaranteed the limit is the guarantee", quotaScope{quotas: []workspacesv1.WorkspaceQuota{quota("q", nil, workspacesv1.GPUQuota{Vendor: nv, Limit: 8})}, cohort: "fleet", others: []cohortMember{idleB}}, held, 1, "",
			"WorkspaceQuota q: 8 of 8 NVIDIA GPUs are used and the workspace asks for 1 (spec.gpus[0])", 0},
		{"another model's guarantee lends nothing", withOthers(own, cohortMember{namespace: "e",
			quotas: []workspacesv1.WorkspaceQuota{quota("q", nil, workspacesv1.GPUQuota{Vendor: nv, Model: "h100", Limit: 8})}}), held, 1, "",
			"WorkspaceQuota q: 8 of 8 guaranteed NVIDIA GPUs are used and the workspace asks for 1 (spec.gpus[0].guaranteed); cohort fleet leaves 0 guaranteed NVIDIA GPUs unused and 0 of them are borrowed already", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, borrowed, _ := quotaViolation(tc.sc, tc.held, ch(nv, "", tc.req), tc.policy)
			if got != tc.want || borrowed != tc.wantBorrowed {
				t.Errorf("quotaViolation = %q, %d; want %q, %d", got, borrowed, tc.want, tc.wantBorrowed)
			}
		})
	}
}

func withOthers(sc quotaScope, others ...cohortMember) quotaScope {
	sc.others = others
	return sc
}

func TestCohortUse(t *testing.T) {
	q := quota("q", nil, guaranteed(8, 6, -1))
	use, _ := quotaUse(&q, []quotaCharge{ch(workspacesv1.GPUVendorNVIDIA, "", 2)})
	// b borrows 3 (guarantee 2, holds 5); c leaves 2 of its guarantee unused; this namespace leaves 4:
	// the 3 borrowed are lent 2 by it and 1 by c.
	cohortUse(&q, use, "fleet", []cohortMember{member("b", guaranteed(8, 2, -1), 5), member("c", guaranteed(4, 4, -1), 2)})
	if got := use[0]; got.Guaranteed != 6 || got.Borrowed != 0 || got.Lent != 2 {
		t.Errorf("use = %+v, want guaranteed 6, borrowed 0, lent 2", got)
	}
	use, _ = quotaUse(&q, []quotaCharge{ch(workspacesv1.GPUVendorNVIDIA, "", 8)})
	cohortUse(&q, use, "", nil)
	if got := use[0]; got.Guaranteed != 6 || got.Borrowed != 2 || got.Lent != 0 {
		t.Errorf("use = %+v, want guaranteed 6, borrowed 2, lent 0", got)
	}
}

func TestLentShares(t *testing.T) {
	cases := []struct {
		unused   []int64
		borrowed int64
		want     []int64
	}{
		{[]int64{4, 2}, 3, []int64{2, 1}},
		{[]int64{4, 0, 4}, 3, []int64{2, 0, 1}},
		{[]int64{1, 1}, 5, []int64{1, 1}},
		{[]int64{0, 0}, 5, []int64{0, 0}},
		{[]int64{3}, 0, []int64{0}},
		{[]int64{math.MaxInt64, math.MaxInt64}, math.MaxInt64, []int64{math.MaxInt64, 0}},
	}
	for _, tc := range cases {
		got := lentShares(tc.unused, tc.borrowed)
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("lentShares(%v, %d) = %v, want %v", tc.unused, tc.borrowed, got, tc.want)
				break
			}
		}
	}
}

// FuzzLentShares: no lender lends more than it leaves unused or less than nothing, and the shares sum
// to what is borrowed, at most what is unused.
func FuzzLentShares(f *testing.F) {
	f.Add(int64(4), int64(2), int64(0), int64(3))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(1), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, a, b, c, borrowed int64) {
		unused := []int64{a, b, c}
		got := lentShares(unused, borrowed)
		var sum, total int64
		for i, s := range got {
			if s < 0 || s > max(0, unused[i]) {
				t.Fatalf("lentShares(%v, %d) = %v: share %d out of [0, %d]", unused, borrowed, got, s, unused[i])
			}
			sum += s
			total = satAdd(total, max(0, unused[i]))
		}
		if want := min(max(0, borrowed), total); sum != want {
			t.Fatalf("lentShares(%v, %d) = %v: sum %d, want %d", unused, borrowed, got, sum, want)
		}
	})
}

// The namespaces of a cohort decide under one lock (they count one another's use); a namespace in no
// cohort under its own.
func TestQuotaLockKey(t *testing.T) {
	if a, b := quotaLockKey("fleet", "a"), quotaLockKey("fleet", "b"); a != b {
		t.Errorf("two members of a cohort lock %q and %q", a, b)
	}
	if a, b := quotaLockKey("", "a"), quotaLockKey("", "b"); a == b {
		t.Errorf("two namespaces in no cohort share the lock %q", a)
	}
	if quotaLockKey("a", "x") == quotaLockKey("", "a") {
		t.Error("a cohort's lock is a namespace's lock of the same name")
	}
}

// quotaWaiter is a workspace of ns waiting for its quota, created minutes after a fixed time, asking
// gpus NVIDIA GPUs.
func quotaWaiter(ns, name string, minutes int, priority int32, gpus int32) workspacesv1.WorkspaceDeployment {
	w := workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, minutes, 0, 0, time.UTC))}}
	w.Spec.Priority = priority
	w.Status.Phase = workspacesv1.PhaseWaiting
	w.Status.ResolvedResources = &workspacesv1.ResolvedResources{Replicas: 1,
		PerReplica: workspacesv1.PerReplicaResources{GPUCount: &gpus, GPUVendor: workspacesv1.GPUVendorNVIDIA}}
	return w
}

// TestChargeWaitersAhead: the quota waiters of every cohort member are one queue; those ahead of a
// workspace that their quotas and the cohort admit now take what the cohort leaves unused first.
func TestChargeWaitersAhead(t *testing.T) {
	nv := workspacesv1.GPUVendorNVIDIA
	borrower := func(ns string) cohortMember { return member(ns, guaranteed(4, 0, -1), 0) }
	lender := member("lender", guaranteed(2, 2, -1), 0) // lends 2
	decide := func(members []cohortMember, ws *workspacesv1.WorkspaceDeployment, gpus int64) string {
		chargeWaitersAhead(members, "fleet", ws)
		why, _, _ := quotaViolation(quotaScope{quotas: members[0].quotas, cohort: "fleet", others: members[1:]}, members[0].held, ch(nv, "", gpus), "")
		return why
	}

	me := quotaWaiter("b", "me", 10, 0, 2)
	older := quotaWaiter("a", "older", 5, 0, 2)
	a := borrower("a")
	a.waiting = []workspacesv1.WorkspaceDeployment{older}
	if why := decide([]cohortMember{borrower("b"), a, lender}, &me, 2); why == "" {
		t.Error("an older borrower of another member waits for the 2 lendable GPUs: the younger one must not take them")
	}
	if why := decide([]cohortMember{borrower("b"), borrower("a"), lender}, &me, 2); why != "" {
		t.Errorf("alone in the queue the borrower is admitted: %s", why)
	}

	// A younger waiter of another member with a higher priority is ahead too.
	// (A priority counts up to its namespace's spec.maxPriority, 0 without one.)
	capAt := func(m cohortMember, ns string, max int32) cohortMember {
		m.quotas[0].Namespace, m.quotas[0].Spec.MaxPriority = ns, &max
		return m
	}
	urgent := quotaWaiter("a", "urgent", 20, 5, 2)
	a = capAt(borrower("a"), "a", 10)
	a.waiting = []workspacesv1.WorkspaceDeployment{urgent}
	if why := decide([]cohortMember{borrower("b"), a, lender}, &me, 2); why == "" {
		t.Error("a higher-priority borrower of another member is ahead")
	}
	// ... but not when its namespace's cap lowers its priority to ours.
	capped := capAt(borrower("a"), "a", 0)
	capped.waiting = []workspacesv1.WorkspaceDeployment{urgent}
	if why := decide([]cohortMember{borrower("b"), capped, lender}, &me, 2); why != "" {
		t.Errorf("the other member's cap (maxPriority 0) puts its younger waiter behind: %s", why)
	}

	// A waiter its own quota refuses (it asks for more than its limit) takes nothing.
	tooBig := quotaWaiter("a", "too-big", 5, 0, 6)
	a = borrower("a")
	a.waiting = []workspacesv1.WorkspaceDeployment{tooBig}
	if why := decide([]cohortMember{borrower("b"), a, lender}, &me, 2); why != "" {
		t.Errorf("a waiter over its own limit is not admitted and takes nothing: %s", why)
	}

	// Outside a cohort only the namespace's own waiters count, as before.
	own := []cohortMember{member("b", workspacesv1.GPUQuota{Vendor: nv, Limit: 2}, 0)}
	own[0].waiting = []workspacesv1.WorkspaceDeployment{quotaWaiter("b", "first", 1, 0, 2)}
	chargeWaitersAhead(own, "", &me)
	if why, _, _ := quotaViolation(quotaScope{quotas: own[0].quotas}, own[0].held, ch(nv, "", 2), ""); why == "" {
		t.Error("the namespace's older waiter takes its 2 GPUs first")
	}
}
