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

// TestReleasesGPUsDeployTimeout: a Failed workspace whose release passes its deploy deadline
// (HelmReleaseReady turns DeployTimeout) brings back the waiters behind it: its replicas not bound
// yet stopped reserving GPUs. A Failed workspace whose status does not change that way brings back
// no one.
func TestReleasesGPUsDeployTimeout(t *testing.T) {
	failed := func(reason, message string) *workspacesv1.WorkspaceDeployment {
		return &workspacesv1.WorkspaceDeployment{Status: workspacesv1.WorkspaceDeploymentStatus{Phase: workspacesv1.PhaseFailed,
			Conditions: []metav1.Condition{{Type: workspacesv1.HelmReleaseReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: message}}}}
	}
	k0rdentFailed := failed(workspacesv1.ReasonHelmReleaseFailed, "failed")
	timedOut := failed(workspacesv1.ReasonDeployTimeout, "failed; not deployed within deployTimeout")
	if !(releasesGPUs{}).Update(event.UpdateEvent{ObjectOld: k0rdentFailed, ObjectNew: timedOut}) {
		t.Error("a failed release past its deploy deadline must bring back the waiters")
	}
	if (releasesGPUs{}).Update(event.UpdateEvent{ObjectOld: timedOut, ObjectNew: failed(workspacesv1.ReasonDeployTimeout, "other words")}) {
		t.Error("a timed out release that stays one brings back no one")
	}
	if (releasesGPUs{}).Update(event.UpdateEvent{ObjectOld: k0rdentFailed, ObjectNew: failed(workspacesv1.ReasonHelmReleaseFailed, "other words")}) {
		t.Error("a failed release within its deadline brings back no one")
	}
}
