package workspace

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
)

// TestDeriveStatus: the phase, Ready, Reconciling, Stalled, the message and the failure context are a
// function of what the pass observed and the status it found, and nothing else.
func TestDeriveStatus(t *testing.T) {
	st := func(phase workspacesv1.WorkspacePhase, msg string, fc *workspacesv1.FailureContext) workspacesv1.WorkspaceDeploymentStatus {
		return workspacesv1.WorkspaceDeploymentStatus{Phase: phase, Message: msg, FailureContext: fc}
	}
	ready := func(status metav1.ConditionStatus, reason, msg string) *metav1.Condition {
		return &metav1.Condition{Type: workspacesv1.ReadyCondition, Status: status, Reason: reason, Message: msg}
	}
	// progressing and stalled name the kstatus condition that repeats Ready's reason and message.
	progressing := func(d derived) derived {
		d.progress = conditions.InProgress
		return d
	}
	stalled := func(d derived) derived {
		d.progress = conditions.Failed
		return d
	}
	fc := func(phase workspacesv1.WorkspacePhase, reason string) *workspacesv1.FailureContext {
		return &workspacesv1.FailureContext{PhaseWhenFailed: phase, Reason: reason, RecentEvents: []string{"kept"}}
	}
	fresh := func(phase workspacesv1.WorkspacePhase, reason string) *workspacesv1.FailureContext {
		return &workspacesv1.FailureContext{PhaseWhenFailed: phase, Reason: reason}
	}
	cases := []struct {
		name string
		prev workspacesv1.WorkspaceDeploymentStatus
		obs  observation
		want derived
	}{
		{"new workspace, no decision", st("", "", nil), observation{},
			derived{phase: workspacesv1.PhasePending}},
		{"blocked on the cluster", st("", "", nil), observation{verdict: verdict{verdictPending, "ClusterDeploymentNotFound", "cd missing"}},
			progressing(derived{phase: workspacesv1.PhasePending, message: "cd missing", ready: ready(metav1.ConditionFalse, "ClusterDeploymentNotFound", "cd missing")})},
		{"waiting for GPUs", st(workspacesv1.PhasePending, "x", nil), observation{verdict: verdict{verdictWaiting, "WaitingForGpuCapacity", "0 free"}},
			progressing(derived{phase: workspacesv1.PhaseWaiting, message: "0 free", ready: ready(metav1.ConditionFalse, "WaitingForGpuCapacity", "0 free")})},
		{"installing prerequisites", st(workspacesv1.PhasePending, "", nil), observation{verdict: verdict{verdictPrerequisites, "PrerequisitesDeploying", "p"}},
			progressing(derived{phase: workspacesv1.PhaseInstallingPrerequisites, message: "p", ready: ready(metav1.ConditionFalse, "PrerequisitesDeploying", "p")})},
		{"deploying", st(workspacesv1.PhaseWaiting, "", nil), observation{verdict: verdict{verdictDeploying, "HelmReleaseDeploying", "d"}},
			progressing(derived{phase: workspacesv1.PhaseDeploying, message: "d", ready: ready(metav1.ConditionFalse, "HelmReleaseDeploying", "d")})},
		{"running", st(workspacesv1.PhaseDeploying, "d", nil), observation{verdict: verdict{kind: verdictRunning}},
			derived{phase: workspacesv1.PhaseRunning, message: "the workspace is running", ready: ready(metav1.ConditionTrue, "Running", "the workspace is running")}},
		{"a failure from Deploying takes a fresh context", st(workspacesv1.PhaseDeploying, "d", nil), observation{verdict: verdict{verdictFailed, "HelmReleaseFailed", "f"}},
			stalled(derived{phase: workspacesv1.PhaseFailed, message: "f", ready: ready(metav1.ConditionFalse, "HelmReleaseFailed", "f"), failure: fresh(workspacesv1.PhaseDeploying, "HelmReleaseFailed")})},
		{"the same failure keeps its context", st(workspacesv1.PhaseFailed, "f", fc(workspacesv1.PhaseRunning, "HelmReleaseFailed")),
			observation{verdict: verdict{verdictFailed, "HelmReleaseFailed", "f2"}},
			stalled(derived{phase: workspacesv1.PhaseFailed, message: "f2", ready: ready(metav1.ConditionFalse, "HelmReleaseFailed", "f2"), failure: fc(workspacesv1.PhaseRunning, "HelmReleaseFailed")})},
		{"another failure keeps the phase it failed from", st(workspacesv1.PhaseFailed, "f", fc(workspacesv1.PhaseRunning, "HelmReleaseFailed")),
			observation{verdict: verdict{verdictFailed, "ClassNotFound", "c"}},
			stalled(derived{phase: workspacesv1.PhaseFailed, message: "c", ready: ready(metav1.ConditionFalse, "ClassNotFound", "c"), failure: fresh(workspacesv1.PhaseRunning, "ClassNotFound")})},
		{"a first failure of a new workspace failed from Pending", st("", "", nil), observation{verdict: verdict{verdictFailed, "ClassNotFound", "c"}},
			stalled(derived{phase: workspacesv1.PhaseFailed, message: "c", ready: ready(metav1.ConditionFalse, "ClassNotFound", "c"), failure: fresh(workspacesv1.PhasePending, "ClassNotFound")})},
		{"healed: the context goes", st(workspacesv1.PhaseFailed, "f", fc(workspacesv1.PhaseDeploying, "HelmReleaseFailed")), observation{verdict: verdict{kind: verdictRunning}},
			derived{phase: workspacesv1.PhaseRunning, message: "the workspace is running", ready: ready(metav1.ConditionTrue, "Running", "the workspace is running")}},
		{"no decision keeps everything", st(workspacesv1.PhaseFailed, "f", fc(workspacesv1.PhaseDeploying, "X")), observation{},
			derived{phase: workspacesv1.PhaseFailed, message: "f", failure: fc(workspacesv1.PhaseDeploying, "X")}},
		{"stopping: not Ready, in progress", st(workspacesv1.PhaseRunning, "the workspace is running", nil), observation{verdict: verdict{verdictStopped, "Stopping", "s"}},
			progressing(derived{phase: workspacesv1.PhaseStopped, message: "s", ready: ready(metav1.ConditionFalse, "Stopping", "s")})},
		{"stopped: Ready as the spec asks, neither progressing nor stalled", st(workspacesv1.PhaseStopped, "s", nil), observation{verdict: verdict{verdictStopped, "Stopped", "t"}},
			derived{phase: workspacesv1.PhaseStopped, message: "t", ready: ready(metav1.ConditionTrue, "Stopped", "t")}},
		{"a stop that fails is Failed", st(workspacesv1.PhaseStopped, "s", nil), observation{verdict: verdict{verdictFailed, "InvalidValues", "v"}},
			stalled(derived{phase: workspacesv1.PhaseFailed, message: "v", ready: ready(metav1.ConditionFalse, "InvalidValues", "v"), failure: fresh(workspacesv1.PhaseStopped, "InvalidValues")})},
		{"suspended keeps the phase and Ready", st(workspacesv1.PhaseRunning, "the workspace is running", nil), observation{suspended: true, note: "suspended"},
			derived{phase: workspacesv1.PhaseRunning, message: "suspended"}},
		{"deleting wins", st(workspacesv1.PhaseFailed, "f", fc(workspacesv1.PhaseDeploying, "X")),
			observation{deleting: true, note: "uninstalling", verdict: verdict{kind: verdictRunning}},
			progressing(derived{phase: workspacesv1.PhaseDeleting, message: "uninstalling", ready: ready(metav1.ConditionFalse, "Deleting", "the workspace is being deleted")})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prev := c.prev.DeepCopy()
			got := deriveStatus(prev, c.obs)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("deriveStatus:\n got  %+v (ready %+v, failure %+v)\n want %+v (ready %+v, failure %+v)",
					got, got.ready, got.failure, c.want, c.want.ready, c.want.failure)
			}
			if !reflect.DeepEqual(prev, c.prev.DeepCopy()) {
				t.Errorf("deriveStatus changed its input")
			}
		})
	}
}

// TestUnreachableChildKeepsAWaiterInTheQueue: a child that cannot be reached leaves a GPU waiter
// Waiting (ClusterUnreachable), in its place in the queue; a workspace waiting for its namespace's
// quota (no place in a queue) or for anything else waits Pending.
func TestUnreachableChildKeepsAWaiterInTheQueue(t *testing.T) {
	ready := func(reason string) []metav1.Condition {
		return []metav1.Condition{{Type: workspacesv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason}}
	}
	for _, tc := range []struct {
		name string
		prev workspacesv1.WorkspaceDeploymentStatus
		want workspacesv1.WorkspacePhase
	}{
		{"GPU waiter", workspacesv1.WorkspaceDeploymentStatus{Phase: workspacesv1.PhaseWaiting, Conditions: ready(workspacesv1.ReasonWaitingForGpuNodes)}, workspacesv1.PhaseWaiting},
		{"quota waiter", workspacesv1.WorkspaceDeploymentStatus{Phase: workspacesv1.PhaseWaiting, Conditions: ready(workspacesv1.ReasonQuotaExceeded)}, workspacesv1.PhasePending},
		{"pending", workspacesv1.WorkspaceDeploymentStatus{Phase: workspacesv1.PhasePending}, workspacesv1.PhasePending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scope{ws: &workspacesv1.WorkspaceDeployment{Status: *tc.prev.DeepCopy()}, prev: tc.prev}
			s.waitForChild(workspacesv1.FeasibleCondition, "cannot reach the child cluster")
			s.apply()
			ready := meta.FindStatusCondition(s.ws.Status.Conditions, workspacesv1.ReadyCondition)
			if s.ws.Status.Phase != tc.want || ready == nil || ready.Reason != workspacesv1.ReasonClusterUnreachable {
				t.Errorf("phase %s, Ready %+v; want %s, ClusterUnreachable", s.ws.Status.Phase, ready, tc.want)
			}
		})
	}
}
