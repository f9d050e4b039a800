package workspace

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// reclaimWorld is two namespaces of one cohort sharing a node of 4 GPUs: a guarantees nothing and
// may borrow 4; b guarantees 4 and tells borrowers its grace period before it stops them.
type reclaimWorld struct {
	nsA, classA, cdA, nsB, classB, cdB, node, model string
}

func reclaimFixture(t *testing.T, grace time.Duration) reclaimWorld {
	t.Helper()
	var w reclaimWorld
	w.nsA, w.classA, w.cdA = gateFixture(t)
	w.nsB, w.classB, w.cdB = gateFixture(t)
	cohort := name("fleet")
	joinCohort(t, w.nsA, cohort)
	joinCohort(t, w.nsB, cohort)
	w.model = name("l40s")
	w.node = pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 4, w.model)
	zero, four := int64(0), int64(4)
	createQuota(t, w.nsA, workspacesv1.WorkspaceQuotaSpec{GPUs: []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: 4, Guaranteed: &zero, BorrowingLimit: &four}}})
	createQuota(t, w.nsB, workspacesv1.WorkspaceQuotaSpec{GPUs: []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: 4, Guaranteed: &four}},
		ReclaimGracePeriod: &metav1.Duration{Duration: grace}})
	return w
}

// four is a workspace of 4 GPUs of the world's model.
func (w reclaimWorld) four(ws *workspacesv1.WorkspaceDeployment) {
	ws.Spec.Resources = gpuResources(4, w.model)
}

// running creates a workspace of 4 GPUs in a or b, waits for its admission and binds its pod on the
// node (the test plays the child's controllers); it returns the workspace and its pod.
func (w reclaimWorld) running(t *testing.T, inB bool) (types.NamespacedName, string) {
	t.Helper()
	ns, class, cd := w.nsA, w.classA, w.cdA
	if inB {
		ns, class, cd = w.nsB, w.classB, w.cdB
	}
	key := createWorkspace(t, ns, class, cd, w.four)
	waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	syncQuota(t, child.Client, owned.LocalReleaseNamespace(key.Name))
	return key, gpuPod(t, child.Client, owned.LocalReleaseNamespace(key.Name), w.node, gpu.ResourceNVIDIA, 4)
}

// TestReclaimByStop: a borrower holds the GPUs another member guarantees; that member's workspace
// arrives, the borrower gets its notice (status.reclaim, the Reclaiming condition), is stopped at the
// notice's time with reason Reclaimed and its spec untouched, the reclaimer is admitted on the freed
// GPUs (never the borrower again first), and the borrower starts again once the reclaimer is gone.
func TestReclaimByStop(t *testing.T) {
	w := reclaimFixture(t, 3*time.Second)
	borrower, held := w.running(t, false)
	ws := getWS(t, borrower)
	if ws.Status.Admission.BorrowedGPUs != 4 {
		t.Fatalf("the borrower borrows %d GPUs, want 4", ws.Status.Admission.BorrowedGPUs)
	}

	reclaimer := createWorkspace(t, w.nsB, w.classB, w.cdB, w.four)
	ws = waitPhase(t, reclaimer, workspacesv1.PhaseWaiting, "")
	eventually(t, "the reclaim recorded", func() error {
		ws = getWS(t, reclaimer)
		rc := ws.Status.Reclaiming
		if rc == nil || len(rc.Borrowers) != 1 || rc.Borrowers[0].Name != borrower.Name {
			return fmt.Errorf("status.reclaiming %+v (%s)", rc, ws.Status.Message)
		}
		return contains(condition(ws, workspacesv1.FeasibleCondition).Reason, workspacesv1.ReasonWaitingForReclaim)
	})

	eventually(t, "the borrower's notice", func() error {
		ws = getWS(t, borrower)
		if ws.Status.Reclaim == nil && condition(ws, workspacesv1.ReadyCondition).Reason == workspacesv1.ReasonReclaimed {
			return nil // the notice's time came before this poll: the stop is checked below
		}
		if ws.Status.Reclaim == nil {
			return fmt.Errorf("no status.reclaim: %s", ws.Status.Message)
		}
		return contains(ws.Status.Reclaim.For, "namespace "+w.nsB)
	})

	// Stopping: its pod still holds the GPUs, and the reclaimer is not admitted on them. Decided
	// again meanwhile (a pass of its own), the reclaimer keeps its reclaim, and with it the hold.
	waitPhase(t, borrower, workspacesv1.PhaseStopped, workspacesv1.ReasonStopping)
	r := getWS(t, reclaimer)
	patch := client.MergeFrom(r.DeepCopy())
	r.Spec.StopAfter = &metav1.Duration{Duration: 8 * time.Hour} // a spec change the gate does not read
	must(t, k8s.Patch(ctxT(t), r, patch))
	eventually(t, "the reclaimer decided again", func() error {
		r := getWS(t, reclaimer)
		if r.Status.ObservedGeneration != r.Generation || r.Status.Reclaiming == nil {
			return fmt.Errorf("observed %d of %d, reclaiming %+v", r.Status.ObservedGeneration, r.Generation, r.Status.Reclaiming)
		}
		return nil
	})
	if p := getWS(t, reclaimer).Status.Phase; p != workspacesv1.PhaseWaiting {
		t.Errorf("the reclaimer is %s while the borrower's pod holds the GPUs", p)
	}
	// The kubelet stops the pod.
	must(t, child.Client.Delete(ctxT(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: owned.LocalReleaseNamespace(borrower.Name), Name: held}},
		client.GracePeriodSeconds(0)))
	ws = waitPhase(t, borrower, workspacesv1.PhaseStopped, workspacesv1.ReasonReclaimed)
	if ws.Spec.Stopped {
		t.Error("the reclaim wrote spec.stopped")
	}
	if ws.Status.Reclaim == nil || ws.Status.Reclaim.StoppedAt == nil {
		t.Errorf("status.reclaim %+v: want stoppedAt", ws.Status.Reclaim)
	}
	ws = waitPhase(t, reclaimer, workspacesv1.PhaseDeploying, "")
	if ws.Status.Reclaiming != nil {
		t.Errorf("the admitted reclaimer keeps status.reclaiming %+v", ws.Status.Reclaiming)
	}
	syncQuota(t, child.Client, owned.LocalReleaseNamespace(reclaimer.Name))
	pod := gpuPod(t, child.Client, owned.LocalReleaseNamespace(reclaimer.Name), w.node, gpu.ResourceNVIDIA, 4)
	if ws := getWS(t, borrower); ws.Status.Phase != workspacesv1.PhaseStopped {
		t.Errorf("the reclaimed workspace is %s while the reclaimer holds the GPUs", ws.Status.Phase)
	}

	// The reclaimer ends, on another ClusterDeployment of the same child. A finalizer of the test's
	// keeps it in the cache, deleting, after the controller is done with it, so that nothing of the
	// borrower's own cluster changes: what brings the borrower back is the quota and the GPUs the
	// reclaimer's end frees.
	r = getWS(t, reclaimer)
	patch = client.MergeFrom(r.DeepCopy())
	r.Finalizers = append(r.Finalizers, "test.exalsius.ai/hold")
	must(t, k8s.Patch(ctxT(t), r, patch))
	must(t, k8s.Delete(ctxT(t), getWS(t, reclaimer)))
	must(t, child.Client.Delete(ctxT(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: owned.LocalReleaseNamespace(reclaimer.Name), Name: pod}},
		client.GracePeriodSeconds(0)))
	defer func() {
		r := getWS(t, reclaimer)
		patch := client.MergeFrom(r.DeepCopy())
		r.Finalizers = nil
		must(t, k8s.Patch(ctxT(t), r, patch))
	}()
	ws = waitPhase(t, borrower, workspacesv1.PhaseDeploying, "")
	if ws.Status.Reclaim != nil {
		t.Errorf("the restarted workspace keeps status.reclaim %+v", ws.Status.Reclaim)
	}
}

// TestReclaimWithdrawn: a reclaimer deleted before the notice's time withdraws it; the borrower is
// not stopped.
func TestReclaimWithdrawn(t *testing.T) {
	w := reclaimFixture(t, time.Hour)
	borrower, _ := w.running(t, false)
	reclaimer := createWorkspace(t, w.nsB, w.classB, w.cdB, w.four)
	eventually(t, "the borrower's notice", func() error {
		ws := getWS(t, borrower)
		if ws.Status.Reclaim == nil || condition(ws, workspacesv1.ReclaimingCondition).Status != metav1.ConditionTrue {
			r := getWS(t, reclaimer)
			return fmt.Errorf("status.reclaim %+v, Reclaiming %+v; the reclaimer: %s %s %+v", ws.Status.Reclaim, condition(ws, workspacesv1.ReclaimingCondition), r.Status.Phase, r.Status.Message, r.Status.Reclaiming)
		}
		return nil
	})
	must(t, k8s.Delete(ctxT(t), getWS(t, reclaimer)))
	eventually(t, "the notice withdrawn", func() error {
		ws := getWS(t, borrower)
		if ws.Status.Reclaim != nil || condition(ws, workspacesv1.ReclaimingCondition).Type != "" {
			return fmt.Errorf("status.reclaim %+v, Reclaiming %+v", ws.Status.Reclaim, condition(ws, workspacesv1.ReclaimingCondition))
		}
		return nil
	})
	if p := getWS(t, borrower).Status.Phase; p != workspacesv1.PhaseDeploying {
		t.Errorf("the borrower is %s, want Deploying", p)
	}
}

// TestReclaimNeverStopsWithinGuarantee: a workspace within its own guarantee is never stopped, and a
// workspace above its namespace's guarantee reclaims nothing: it waits as any other.
func TestReclaimNeverStopsWithinGuarantee(t *testing.T) {
	w := reclaimFixture(t, time.Second)
	mine, _ := w.running(t, true)
	// Over b's guarantee: it would borrow, and a (guarantee 0) lends nothing.
	more := createWorkspace(t, w.nsB, w.classB, w.cdB, w.four)
	ws := waitPhase(t, more, workspacesv1.PhaseWaiting, "")
	if ws.Status.Reclaiming != nil {
		t.Errorf("a workspace above its guarantee reclaims %+v", ws.Status.Reclaiming)
	}
	if p := getWS(t, mine).Status.Phase; p != workspacesv1.PhaseDeploying {
		t.Errorf("the workspace within its guarantee is %s", p)
	}
}

// TestReclaimSurvivesRestart: the controller is down from before the notice's time to after it; once
// it is back, the borrower is stopped and the reclaimer gets the GPUs: everything the reclaim decided
// was in the two statuses.
func TestReclaimSurvivesRestart(t *testing.T) {
	w := reclaimFixture(t, 2*time.Second)
	borrower, held := w.running(t, false)
	release := owned.LocalReleaseNamespace(borrower.Name)
	reclaimer := createWorkspace(t, w.nsB, w.classB, w.cdB, w.four)
	var at time.Time
	eventually(t, "the borrower's notice", func() error {
		ws := getWS(t, borrower)
		if ws.Status.Reclaim == nil {
			return fmt.Errorf("no status.reclaim: %s", ws.Status.Message)
		}
		at = ws.Status.Reclaim.At.Time
		return nil
	})
	must(t, stopControllers())
	eventually(t, "the notice's time passed while the controller is down", func() error {
		if now := time.Now(); now.Before(at) {
			return fmt.Errorf("now %s, the notice's time %s", now.Format(time.RFC3339), at.Format(time.RFC3339))
		}
		return nil
	})
	must(t, startControllers())
	waitPhase(t, borrower, workspacesv1.PhaseStopped, workspacesv1.ReasonStopping)
	must(t, child.Client.Delete(ctxT(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: release, Name: held}}, client.GracePeriodSeconds(0)))
	waitPhase(t, borrower, workspacesv1.PhaseStopped, workspacesv1.ReasonReclaimed)
	waitPhase(t, reclaimer, workspacesv1.PhaseDeploying, "")
}

// TestTenantCannotForgeAReclaim: status.reclaiming stops the workspaces it names, so only the
// controller may write it. A tenant of another namespace that creates a workspace with a forged
// status.reclaiming naming a running borrower (the API server drops the status of a create) and then
// patches its status (the chart's tenant role has no status verbs) stops nothing.
func TestTenantCannotForgeAReclaim(t *testing.T) {
	w := reclaimFixture(t, time.Second)
	borrower, _ := w.running(t, false)
	nsC, classC, cdC := gateFixture(t)
	forged := &workspacesv1.Reclaiming{Cluster: w.nsA + "/" + w.cdA, Since: metav1.NewTime(time.Now()),
		Borrowers: []workspacesv1.ReclaimedWorkspace{{Namespace: borrower.Namespace, Name: borrower.Name, UID: getWS(t, borrower).UID, GPUs: 4,
			At: metav1.NewTime(time.Now())}}}
	tenant, key := tenantWorkspace(t, nsC, classC, nsC, cdC, name("forger"), func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Status.Phase = workspacesv1.PhaseWaiting
		ws.Status.Reclaiming = forged
	})
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	if ws.Status.Reclaiming != nil {
		t.Fatalf("the status of a tenant's create kept status.reclaiming %+v", ws.Status.Reclaiming)
	}
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Status.Phase = workspacesv1.PhaseWaiting
	ws.Status.Reclaiming = forged
	if err := tenant.Status().Patch(ctxT(t), ws, patch); err == nil || !apierrors.IsForbidden(err) {
		t.Fatalf("a tenant patched its workspace's status: %v, want forbidden", err)
	}
	if got := getWS(t, borrower); got.Status.Reclaim != nil || got.Status.Phase != workspacesv1.PhaseDeploying {
		t.Errorf("the borrower is %s with status.reclaim %+v after a forged reclaim", got.Status.Phase, got.Status.Reclaim)
	}
}
