package workspace

import (
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
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
