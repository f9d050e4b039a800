package workspace

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// TestReleasesGPUsQuotaQueue: a waiter that leaves its quota's queue (its quota now admits it and it
// waits for GPUs instead, or it is admitted) brings back the waiters behind it, which counted it
// ahead; a quota waiter that stays one does not.
func TestReleasesGPUsQuotaQueue(t *testing.T) {
	waiting := func(reason string) *workspacesv1.WorkspaceDeployment {
		return &workspacesv1.WorkspaceDeployment{Status: workspacesv1.WorkspaceDeploymentStatus{Phase: workspacesv1.PhaseWaiting,
			Conditions: []metav1.Condition{{Type: workspacesv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason}}}}
	}
	quota := waiting(workspacesv1.ReasonQuotaExceeded)
	if !(releasesGPUs{}).Update(event.UpdateEvent{ObjectOld: quota, ObjectNew: waiting(workspacesv1.ReasonWaitingForGpuCapacity)}) {
		t.Error("a quota waiter that now waits for GPUs must bring back the quota waiters behind it")
	}
	if (releasesGPUs{}).Update(event.UpdateEvent{ObjectOld: quota, ObjectNew: waiting(workspacesv1.ReasonQuotaExceeded)}) {
		t.Error("a quota waiter that stays one brings back no one")
	}
}
