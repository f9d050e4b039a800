package workspace

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
)

// TestAFirstAdmissionUnderAQuotaIsNotWrittenOnItsOwn: a workspace's first GPU admission under a
// WorkspaceQuota costs no status write of its own, as outside one: the gate remembers it until the
// pass's status write and the ServiceSet the pass makes carries it. The next decision under the
// quota must count it all the same: of a quota of one GPU, with free GPUs on the child, the first
// workspace is admitted without Record being called, and the second is refused by the quota.
//
// The suite's controllers are stopped for the test; the gate runs on a real cache of the real API
// server.
func TestAFirstAdmissionUnderAQuotaIsNotWrittenOnItsOwn(t *testing.T) {
	ctx := withControllersStopped(t)
	ns := newNamespace(t)
	cd := types.NamespacedName{Namespace: ns, Name: "gpu"}
	gpuQuota(ctx, t, ns, 1, nil)
	res := oneGPUEach(1)
	wss := olderAndNewer(ctx, t, cd)
	cached, informers := gateCache(ctx, t)
	eventually(t, "the cache shows the quota and both workspaces", func() error {
		var q workspacesv1.WorkspaceQuota
		if err := cached.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gpus"}, &q); err != nil {
			return err
		}
		var list workspacesv1.WorkspaceDeploymentList
		if err := cached.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		return contains(fmt.Sprint(len(list.Items)), "2")
	})

	g := gate.New(cached, informers, snapshot{nodes: []corev1.Node{oneGPUNode("n1"), oneGPUNode("n2")}})
	written := 0
	admit := func(ws *workspacesv1.WorkspaceDeployment) gate.Decision {
		t.Helper()
		d, err := g.Admit(ctx, gate.Request{Workspace: ws, Previous: ws.Status.DeepCopy(), Resources: res, Cluster: cd,
			HasServiceSet: func(context.Context) (bool, error) { return false, nil }, Now: time.Now(),
			Record: func(_ context.Context, d gate.Decision) (*workspacesv1.WorkspaceDeployment, error) {
				written++
				out := ws.DeepCopy()
				out.Status.Admission = d.Admission
				return out, nil
			}})
		must(t, err)
		return d
	}
	if d := admit(wss[0]); d.Outcome != gate.Admitted || d.Recorded || written != 0 {
		t.Fatalf("the first workspace under the quota: %s (recorded %v, %d status writes), want admitted, its admission pending: %s",
			d.Outcome, d.Recorded, written, d.Message)
	}
	if d := admit(wss[1]); d.Outcome != gate.OverQuota {
		t.Fatalf("the quota's one GPU is held by a pending admission, yet the second workspace got %s: %s", d.Outcome, d.Message)
	}
}

// TestAReclaimCountsABorrowerItsServiceSetCarries: a borrower whose admission only its ServiceSet
// carries (its pass made the ServiceSet and ended before the status write: a restart, or, now that a
// first admission under a quota is not written on its own, any pass still under way) holds its GPUs
// for a reclaim as for every other count. Namespace "lender" is guaranteed the child's one GPU and
// uses none; namespace "borrower" is guaranteed none and borrows it, its admission on its ServiceSet.
// A workspace of the lender asking its guaranteed GPU must wait and reclaim it from that borrower.
func TestAReclaimCountsABorrowerItsServiceSetCarries(t *testing.T) {
	ctx := withControllersStopped(t)
	lender, borrower := newNamespace(t), newNamespace(t)
	cohort := name("fleet")
	joinCohort(t, lender, cohort)
	joinCohort(t, borrower, cohort)
	all, none := int64(1), int64(0)
	gpuQuota(ctx, t, lender, 1, &all)
	gpuQuota(ctx, t, borrower, 1, &none)
	cd := types.NamespacedName{Namespace: lender, Name: "gpu"}
	res := oneGPUEach(1)
	borrowing := newWorkspaceOn(ctx, t, borrower, "borrowing", cd)
	carried := admittedOnNodes(cd, "n1")
	carried.BorrowedGPUs = 1
	carryAdmission(ctx, t, borrowing, res, cd, carried)
	asking := newWorkspaceOn(ctx, t, lender, "asking", cd)

	cached, informers := gateCache(ctx, t)
	eventually(t, "the cache shows the cohort, its quotas, the workspaces and the ServiceSet", func() error {
		for _, ns := range []string{lender, borrower} {
			var n corev1.Namespace
			if err := cached.Get(ctx, types.NamespacedName{Name: ns}, &n); err != nil {
				return err
			}
			if err := contains(n.Labels[workspacesv1.CohortLabel], cohort); err != nil {
				return err
			}
			var q workspacesv1.WorkspaceQuota
			if err := cached.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gpus"}, &q); err != nil {
				return err
			}
		}
		var got workspacesv1.WorkspaceDeployment
		if err := cached.Get(ctx, client.ObjectKeyFromObject(asking), &got); err != nil {
			return err
		}
		if err := cached.Get(ctx, client.ObjectKeyFromObject(borrowing), &got); err != nil {
			return err
		}
		if err := contains(string(got.Status.Phase), string(workspacesv1.PhaseDeploying)); err != nil {
			return err
		}
		var sets k0rdentv1beta1.ServiceSetList
		if err := cached.List(ctx, &sets, client.InNamespace(cd.Namespace)); err != nil {
			return err
		}
		return contains(fmt.Sprint(len(sets.Items)), "1")
	})

	g := gate.New(cached, informers, snapshot{nodes: []corev1.Node{oneGPUNode("n1")}})
	d, err := g.Admit(ctx, gate.Request{Workspace: asking, Previous: asking.Status.DeepCopy(), Resources: res, Cluster: cd,
		HasServiceSet: func(context.Context) (bool, error) { return false, nil }, Now: time.Now(),
		Record: func(_ context.Context, d gate.Decision) (*workspacesv1.WorkspaceDeployment, error) {
			out := asking.DeepCopy()
			out.Status.Reclaiming = d.Reclaiming
			return out, nil
		}})
	must(t, err)
	if d.Outcome != gate.Waiting || d.Reclaiming == nil {
		t.Fatalf("the lender's workspace asking its guaranteed GPU, which a borrower holds: %s (reclaiming %v), want to wait and reclaim it: %s",
			d.Outcome, d.Reclaiming, d.Message)
	}
	if b := d.Reclaiming.Borrowers; len(b) != 1 || b[0].Namespace != borrower || b[0].Name != borrowing.Name {
		t.Fatalf("the reclaim names %+v, want %s/%s", b, borrower, borrowing.Name)
	}
}
