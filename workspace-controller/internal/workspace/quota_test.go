package workspace

import (
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

func ptr[T any](v T) *T { return &v }

// createQuota creates a WorkspaceQuota in the namespace.
func createQuota(t *testing.T, ns string, spec workspacesv1.WorkspaceQuotaSpec) *workspacesv1.WorkspaceQuota {
	t.Helper()
	q := &workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name("quota")}, Spec: spec}
	must(t, k8s.Create(ctxT(t), q))
	return q
}

// quotaCounts counts the namespace's admitted workspaces and those waiting with QuotaExceeded.
func quotaCounts(t *testing.T, ns string) (admitted, overQuota []workspacesv1.WorkspaceDeployment) {
	t.Helper()
	var list workspacesv1.WorkspaceDeploymentList
	must(t, k8s.List(ctxT(t), &list, client.InNamespace(ns)))
	for _, w := range list.Items {
		ready := meta.FindStatusCondition(w.Status.Conditions, workspacesv1.ReadyCondition)
		switch {
		case w.Status.Admission != nil && w.Status.Phase == workspacesv1.PhaseDeploying:
			admitted = append(admitted, w)
		case w.Status.Phase == workspacesv1.PhaseWaiting && ready != nil && ready.Reason == workspacesv1.ReasonQuotaExceeded:
			overQuota = append(overQuota, w)
		}
	}
	return admitted, overQuota
}

// TestQuotaBurstNoOvershoot creates ten workspaces of one GPU at once in a namespace whose quota
// allows three NVIDIA GPUs, on a cluster with eight free: exactly three are admitted, seven wait with
// QuotaExceeded naming the quota (never Failed), the quota's status shows the use, and deleting an
// admitted workspace admits the next waiter.
func TestQuotaBurstNoOvershoot(t *testing.T) {
	ns, class, cd := gateFixture(t)
	model := name("h200")
	pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 8, model)
	q := createQuota(t, ns, workspacesv1.WorkspaceQuotaSpec{
		GPUs:       []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: 3}},
		Workspaces: ptr(int32(10)),
	})
	const n = 10
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
		})
	}
	wg.Wait()
	settled := func(admittedWant, waitingWant int) []workspacesv1.WorkspaceDeployment {
		var admitted []workspacesv1.WorkspaceDeployment
		eventually(t, fmt.Sprintf("%d admitted, %d over quota", admittedWant, waitingWant), func() error {
			var over []workspacesv1.WorkspaceDeployment
			admitted, over = quotaCounts(t, ns)
			if len(admitted) != admittedWant || len(over) != waitingWant {
				return fmt.Errorf("%d admitted, %d over quota", len(admitted), len(over))
			}
			return nil
		})
		return admitted
	}
	admitted := settled(3, n-3)
	_, over := quotaCounts(t, ns)
	msg := meta.FindStatusCondition(over[0].Status.Conditions, workspacesv1.ReadyCondition).Message
	if err := contains(msg, "WorkspaceQuota "+q.Name+": 3 of 3 NVIDIA GPUs are used"); err != nil {
		t.Error(err)
	}
	eventually(t, "quota status", func() error {
		got := &workspacesv1.WorkspaceQuota{}
		if err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(q), got); err != nil {
			return err
		}
		st := got.Status
		if len(st.GPUs) != 1 || st.GPUs[0].Used != 3 || st.Workspaces != 3 || st.Waiting != n-3 || st.Summary != "NVIDIA 3/3, workspaces 3/10" {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})

	// Freed quota admits the next waiter, and only one.
	must(t, k8s.Delete(ctxT(t), &admitted[0]))
	settled(3, n-4)
}

// priorityRace: one GPU is busy; an older workspace of priority 0 and a younger one of priority 5
// wait for it; when it frees, the winner is admitted and the other keeps waiting.
func priorityRace(t *testing.T, maxPriority *int32) (older, younger types.NamespacedName) {
	t.Helper()
	ns, class, cd := gateFixture(t)
	if maxPriority != nil {
		createQuota(t, ns, workspacesv1.WorkspaceQuotaSpec{MaxPriority: maxPriority})
	}
	model := name("b200")
	node := pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 1, model)
	busy := gpuPod(t, child.Client, "busy", node, gpu.ResourceNVIDIA, 1)
	older = createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, older, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	younger = createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = gpuResources(1, model)
		ws.Spec.Priority = 5
	})
	waitPhase(t, younger, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	must(t, childtest.SetPodPhase(ctxT(t), child.Client, "busy", busy, corev1.PodSucceeded))
	return older, younger
}

// TestPriorityOrdersTheQueue: the higher priority goes first, although younger.
func TestPriorityOrdersTheQueue(t *testing.T) {
	older, younger := priorityRace(t, ptr(int32(10)))
	waitPhase(t, younger, workspacesv1.PhaseDeploying, "")
	ws := waitPhase(t, older, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	if ws.Status.Admission != nil {
		t.Errorf("the lower priority was admitted too: %+v", ws.Status.Admission)
	}
}

// TestPriorityCappedByNamespace: without a WorkspaceQuota allowing it, priority 5 counts as 0, so
// the older workspace goes first: a tenant cannot outrank others at will.
func TestPriorityCappedByNamespace(t *testing.T) {
	older, younger := priorityRace(t, nil)
	waitPhase(t, older, workspacesv1.PhaseDeploying, "")
	waitPhase(t, younger, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
}

// joinCohort labels a namespace into a cohort; with cohort "" it takes the label off.
func joinCohort(t *testing.T, ns, cohort string) {
	t.Helper()
	obj := &corev1.Namespace{}
	must(t, k8s.Get(ctxT(t), client.ObjectKey{Name: ns}, obj))
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels[workspacesv1.CohortLabel] = cohort
	if cohort == "" {
		delete(obj.Labels, workspacesv1.CohortLabel)
	}
	must(t, k8s.Update(ctxT(t), obj))
}

// nvidiaGPUs is a quota's one GPU entry: NVIDIA GPUs of any model, limit and guaranteed.
func nvidiaGPUs(limit, guaranteed int64) []workspacesv1.GPUQuota {
	return []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: limit, Guaranteed: &guaranteed}}
}

// cohortOfTwo makes two namespaces with a class and a cluster each (gateFixture), both in a new
// cohort, and an 8-GPU node of a new model on the child; it returns the namespaces, classes and
// clusters, the cohort and the model.
func cohortOfTwo(t *testing.T) (nsA, classA, cdA, nsB, classB, cdB, cohort, model string) {
	t.Helper()
	nsA, classA, cdA = gateFixture(t)
	nsB, classB, cdB = gateFixture(t)
	cohort = name("fleet")
	joinCohort(t, nsA, cohort)
	joinCohort(t, nsB, cohort)
	model = name("h100")
	pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 8, model)
	return nsA, classA, cdA, nsB, classB, cdB, cohort, model
}

// quotaGPUStatus waits until a quota's first GPU entry shows want and the summary sum.
func quotaGPUStatus(t *testing.T, q *workspacesv1.WorkspaceQuota, cohort string, want workspacesv1.GPUUsage, summary string) {
	t.Helper()
	eventually(t, "status of WorkspaceQuota "+q.Namespace+"/"+q.Name, func() error {
		got := &workspacesv1.WorkspaceQuota{}
		if err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(q), got); err != nil {
			return err
		}
		st := got.Status
		if st.Cohort != cohort || len(st.GPUs) != 1 || st.GPUs[0] != want || st.Summary != summary {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
}

// TestCohortBorrowing: team a (guaranteed 1 of 8) borrows what team b's guarantee (3) leaves unused,
// and no more; a workspace with preemptionPolicy Never does not borrow; both quotas show what is
// borrowed and lent; b's own admissions within its guarantee go on while a borrows.
func TestCohortBorrowing(t *testing.T) {
	nsA, classA, cdA, nsB, classB, cdB, cohort, model := cohortOfTwo(t)
	qA := createQuota(t, nsA, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(8, 1)})
	qB := createQuota(t, nsB, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(4, 3)})
	gpus := func(n int32, policy workspacesv1.PreemptionPolicy) func(*workspacesv1.WorkspaceDeployment) {
		return func(ws *workspacesv1.WorkspaceDeployment) {
			ws.Spec.Resources = gpuResources(n, model)
			ws.Spec.PreemptionPolicy = policy
		}
	}

	within := createWorkspace(t, nsA, classA, cdA, gpus(1, ""))
	if ws := waitPhase(t, within, workspacesv1.PhaseDeploying, ""); ws.Status.Admission.BorrowedGPUs != 0 {
		t.Errorf("a workspace within its guarantee borrows %d GPUs", ws.Status.Admission.BorrowedGPUs)
	}
	never := createWorkspace(t, nsA, classA, cdA, gpus(1, workspacesv1.PreemptionNever))
	ws := waitPhase(t, never, workspacesv1.PhaseWaiting, workspacesv1.ReasonQuotaExceeded)
	if err := contains(meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReadyCondition).Message, "with spec.preemptionPolicy Never it does not borrow"); err != nil {
		t.Error(err)
	}
	must(t, k8s.Delete(ctxT(t), ws))

	borrower := createWorkspace(t, nsA, classA, cdA, gpus(2, ""))
	ws = waitPhase(t, borrower, workspacesv1.PhaseDeploying, "")
	if ws.Status.Admission.BorrowedGPUs != 2 {
		t.Errorf("admission borrows %d GPUs, want 2", ws.Status.Admission.BorrowedGPUs)
	}
	if c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.WithinQuotaCondition); c == nil || contains(c.Message, "borrows 2 GPUs above its namespace's guarantee (WorkspaceQuota "+qA.Name+" guarantees 1 NVIDIA GPUs (spec.gpus[0].guaranteed) and 1 are used), from the unused guarantees of cohort "+cohort) != nil {
		t.Errorf("WithinQuota condition %+v does not say what is borrowed", c)
	}
	// b leaves 3 unused and 2 are borrowed: a second borrower of 2 waits, naming the cohort.
	over := createWorkspace(t, nsA, classA, cdA, gpus(2, ""))
	ws = waitPhase(t, over, workspacesv1.PhaseWaiting, workspacesv1.ReasonQuotaExceeded)
	if err := contains(meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReadyCondition).Message,
		"cohort "+cohort+" leaves 3 guaranteed NVIDIA GPUs unused and 2 of them are borrowed already"); err != nil {
		t.Error(err)
	}
	quotaGPUStatus(t, qA, cohort, workspacesv1.GPUUsage{Vendor: workspacesv1.GPUVendorNVIDIA, Used: 3, Limit: 8, Guaranteed: 1, Borrowed: 2},
		"NVIDIA 3/8 (guaranteed 1, borrowed 2), workspaces 2")
	quotaGPUStatus(t, qB, cohort, workspacesv1.GPUUsage{Vendor: workspacesv1.GPUVendorNVIDIA, Used: 0, Limit: 4, Guaranteed: 3, Lent: 2},
		"NVIDIA 0/4 (guaranteed 3, lent 2), workspaces 0")

	// b's guarantee is its own: a workspace of b within it is admitted although a borrows.
	mine := createWorkspace(t, nsB, classB, cdB, gpus(2, ""))
	if ws := waitPhase(t, mine, workspacesv1.PhaseDeploying, ""); ws.Status.Admission.BorrowedGPUs != 0 {
		t.Errorf("b's workspace within its guarantee borrows %d", ws.Status.Admission.BorrowedGPUs)
	}
	quotaGPUStatus(t, qB, cohort, workspacesv1.GPUUsage{Vendor: workspacesv1.GPUVendorNVIDIA, Used: 2, Limit: 4, Guaranteed: 3, Lent: 1},
		"NVIDIA 2/4 (guaranteed 3, lent 1), workspaces 1")
	eventually(t, "borrowed and lent gauges", func() error {
		for _, m := range []struct {
			name string
			q    *workspacesv1.WorkspaceQuota
			want float64
		}{
			{"exalsius_workspace_controller_quota_guaranteed_gpus", qA, 1},
			{"exalsius_workspace_controller_quota_borrowed_gpus", qA, 2},
			{"exalsius_workspace_controller_quota_lent_gpus", qA, 0},
			{"exalsius_workspace_controller_quota_lent_gpus", qB, 1},
			{"exalsius_workspace_controller_quota_borrowed_gpus", qB, 0},
		} {
			if v := metric(t, m.name, map[string]string{"namespace": m.q.Namespace, "quota": m.q.Name, "resource": "gpu/NVIDIA"}); v != m.want {
				return fmt.Errorf("%s{%s} = %v, want %v", m.name, m.q.Namespace, v, m.want)
			}
		}
		return nil
	})
}

// TestAQuotaChangeRecountsItsCohort: a change of one member's quota counts the other members' quotas
// again, with no workspace changing: when a borrows within a guarantee it raised, b's status no longer
// shows the GPUs as lent.
func TestAQuotaChangeRecountsItsCohort(t *testing.T) {
	nsA, classA, cdA, nsB, _, _, cohort, model := cohortOfTwo(t)
	qA := createQuota(t, nsA, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(8, 1)})
	qB := createQuota(t, nsB, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(4, 3)})
	borrower := createWorkspace(t, nsA, classA, cdA, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(3, model) })
	if ws := waitPhase(t, borrower, workspacesv1.PhaseDeploying, ""); ws.Status.Admission.BorrowedGPUs != 2 {
		t.Fatalf("admission borrows %d GPUs, want 2", ws.Status.Admission.BorrowedGPUs)
	}
	quotaGPUStatus(t, qB, cohort, workspacesv1.GPUUsage{Vendor: workspacesv1.GPUVendorNVIDIA, Used: 0, Limit: 4, Guaranteed: 3, Lent: 2},
		"NVIDIA 0/4 (guaranteed 3, lent 2), workspaces 0")

	// The controller writes the quota's status meanwhile: an update that read it before conflicts.
	eventually(t, "raising a's guarantee", func() error {
		got := &workspacesv1.WorkspaceQuota{}
		if err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(qA), got); err != nil {
			return err
		}
		got.Spec.GPUs = nvidiaGPUs(8, 3)
		return k8s.Update(ctxT(t), got)
	})
	quotaGPUStatus(t, qA, cohort, workspacesv1.GPUUsage{Vendor: workspacesv1.GPUVendorNVIDIA, Used: 3, Limit: 8, Guaranteed: 3},
		"NVIDIA 3/8 (guaranteed 3), workspaces 1")
	quotaGPUStatus(t, qB, cohort, workspacesv1.GPUUsage{Vendor: workspacesv1.GPUVendorNVIDIA, Used: 0, Limit: 4, Guaranteed: 3},
		"NVIDIA 0/4 (guaranteed 3), workspaces 0")
}

// TestCohortChangeWakesItsBorrowers: a namespace that joins a cohort or leaves it changes what the
// others may borrow, and their quota waiters are admitted at once: nothing of their namespace, quota
// or cluster changed, and their timer retry is a minute away.
//   - joining: a of cohort fleet waits to borrow 2 GPUs, with no member to lend them; b, whose quota
//     guarantees 3 GPUs it does not use, is labelled into the cohort.
//   - leaving: c, guaranteed nothing, borrows all 3 GPUs b leaves unused, and a waits; c leaves the
//     cohort, taking its borrowing with it.
func TestCohortChangeWakesItsBorrowers(t *testing.T) {
	for _, leave := range []bool{false, true} {
		t.Run(map[bool]string{false: "joining", true: "leaving"}[leave], func(t *testing.T) {
			nsA, classA, cdA := gateFixture(t)
			nsB, _, _ := gateFixture(t)
			nsC, classC, cdC := gateFixture(t)
			cohort, model := name("fleet"), name("h100")
			joinCohort(t, nsA, cohort)
			pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 8, model)
			qA := createQuota(t, nsA, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(8, 1)})
			createQuota(t, nsB, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(4, 3)})
			createQuota(t, nsC, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(8, 0)})
			threeGPUs := func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(3, model) }
			if leave {
				joinCohort(t, nsB, cohort)
				joinCohort(t, nsC, cohort)
				if ws := waitPhase(t, createWorkspace(t, nsC, classC, cdC, threeGPUs), workspacesv1.PhaseDeploying, ""); ws.Status.Admission.BorrowedGPUs != 3 {
					t.Fatalf("c's admission borrows %d GPUs, want 3", ws.Status.Admission.BorrowedGPUs)
				}
			}
			borrower := createWorkspace(t, nsA, classA, cdA, threeGPUs)
			waitPhase(t, borrower, workspacesv1.PhaseWaiting, workspacesv1.ReasonQuotaExceeded)
			// a's quota counts the waiter a second after it changed: what the setup set going has run
			// out, and the waiter's own passes with it.
			eventually(t, "WorkspaceQuota "+qA.Name+" counting the waiter", func() error {
				got := &workspacesv1.WorkspaceQuota{}
				if err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(qA), got); err != nil {
					return err
				}
				if got.Status.Waiting != 1 {
					return fmt.Errorf("waiting %d", got.Status.Waiting)
				}
				return nil
			})

			if leave {
				joinCohort(t, nsC, "")
			} else {
				joinCohort(t, nsB, cohort)
			}
			changed := time.Now()
			if ws := waitPhase(t, borrower, workspacesv1.PhaseDeploying, ""); ws.Status.Admission.BorrowedGPUs != 2 {
				t.Errorf("admission borrows %d GPUs, want 2", ws.Status.Admission.BorrowedGPUs)
			}
			if since := time.Since(changed); since > DefaultWaitingRetry/2 {
				t.Errorf("admitted %s after the cohort changed: the namespace's event did not wake the borrower, its %s retry did", since.Round(time.Second), DefaultWaitingRetry)
			}
		})
	}
}

// TestCohortBurstNoOverBorrowing: two namespaces guaranteed nothing, on clusters of their own, borrow
// at once what a third leaves unused (3 GPUs): exactly 3 of their 16 one-GPU workspaces are admitted,
// however the decisions interleave (the cohort's one lock), and the rest wait with QuotaExceeded.
func TestCohortBurstNoOverBorrowing(t *testing.T) {
	// Each namespace's cluster is a child of its own, so that no cluster lock orders the decisions.
	children := startChildren(t, "ca", "cb")
	nsA, nsB, nsC := newNamespace(t), newNamespace(t), newNamespace(t)
	classA, classB := createClass(t, classSpec(name("gpu")), nsA), createClass(t, classSpec(name("gpu")), nsB)
	cdA, cdB := createCluster(t, nsA, children[0].Kubeconfig).Name, createCluster(t, nsB, children[1].Kubeconfig).Name
	cohort := name("fleet")
	for _, ns := range []string{nsA, nsB, nsC} {
		joinCohort(t, ns, cohort)
	}
	model := name("h100")
	pinnableNode(t, children[0].Client, gpu.ResourceNVIDIA, 8, model)
	pinnableNode(t, children[1].Client, gpu.ResourceNVIDIA, 8, model)
	createQuota(t, nsA, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(8, 0)})
	createQuota(t, nsB, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(8, 0)})
	createQuota(t, nsC, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(3, 3)})
	var wg sync.WaitGroup
	for i := range 16 {
		ns, class, cd := nsA, classA, cdA
		if i%2 == 1 {
			ns, class, cd = nsB, classB, cdB
		}
		wg.Go(func() {
			createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
		})
	}
	wg.Wait()
	eventually(t, "3 admitted and 13 over quota in the cohort", func() error {
		a1, o1 := quotaCounts(t, nsA)
		a2, o2 := quotaCounts(t, nsB)
		if len(a1)+len(a2) != 3 || len(o1)+len(o2) != 13 {
			return fmt.Errorf("%d+%d admitted, %d+%d over quota", len(a1), len(a2), len(o1), len(o2))
		}
		return nil
	})
}

// TestCohortReleaseWakesBorrowers: a workspace waiting to borrow is admitted when another member of
// its cohort frees the guarantee it waits for (no event of its own namespace brings it back).
func TestCohortReleaseWakesBorrowers(t *testing.T) {
	nsA, classA, cdA, nsB, classB, cdB, _, model := cohortOfTwo(t)
	createQuota(t, nsA, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(4, 0)})
	createQuota(t, nsB, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(2, 2)})
	gpus := func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) }
	lender := createWorkspace(t, nsB, classB, cdB, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(2, model) })
	waitPhase(t, lender, workspacesv1.PhaseDeploying, "")
	borrower := createWorkspace(t, nsA, classA, cdA, gpus)
	waitPhase(t, borrower, workspacesv1.PhaseWaiting, workspacesv1.ReasonQuotaExceeded)
	must(t, k8s.Delete(ctxT(t), getWS(t, lender)))
	if ws := waitPhase(t, borrower, workspacesv1.PhaseDeploying, ""); ws.Status.Admission.BorrowedGPUs != 1 {
		t.Errorf("admission borrows %d GPUs, want 1", ws.Status.Admission.BorrowedGPUs)
	}
}

// TestCohortWaitersOneQueue: when a lender frees its guarantee, the borrower first in line in one
// member gets it (older; at equal creation seconds, by namespace), not the other one waiting in another
// member (the members' quota waiters are one queue). Without one queue the first decision to run wins.
func TestCohortWaitersOneQueue(t *testing.T) {
	nsA, classA, cdA := gateFixture(t)
	nsB, classB, cdB := gateFixture(t)
	nsC, classC, cdC := gateFixture(t)
	cohort := name("fleet")
	for _, ns := range []string{nsA, nsB, nsC} {
		joinCohort(t, ns, cohort)
	}
	model := name("h100")
	pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 8, model)
	createQuota(t, nsA, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(2, 0)})
	createQuota(t, nsB, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(2, 0)})
	createQuota(t, nsC, workspacesv1.WorkspaceQuotaSpec{GPUs: nvidiaGPUs(2, 2)})
	two := func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(2, model) }
	lender := createWorkspace(t, nsC, classC, cdC, two)
	waitPhase(t, lender, workspacesv1.PhaseDeploying, "")
	older := createWorkspace(t, nsB, classB, cdB, two)
	waitPhase(t, older, workspacesv1.PhaseWaiting, workspacesv1.ReasonQuotaExceeded)
	younger := createWorkspace(t, nsA, classA, cdA, two)
	waitPhase(t, younger, workspacesv1.PhaseWaiting, workspacesv1.ReasonQuotaExceeded)
	if !owned.Older(getWS(t, older), getWS(t, younger)) {
		older, younger = younger, older // created in the same second, and nsA sorts first
	}

	must(t, k8s.Delete(ctxT(t), getWS(t, lender)))
	waitPhase(t, older, workspacesv1.PhaseDeploying, "")
	if ws := waitPhase(t, younger, workspacesv1.PhaseWaiting, workspacesv1.ReasonQuotaExceeded); ws.Status.Admission != nil {
		t.Fatalf("the borrower behind holds an admission: %+v", ws.Status.Admission)
	}
}
