package workspace

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
)

// verdictKind is what the step that decided a pass concluded about the workspace.
type verdictKind int

const (
	// verdictNone: no step decided (the pass stopped on an error); the phase stays what it was.
	verdictNone verdictKind = iota
	// verdictPending: waiting for something outside (class, cluster, template, child, namespace).
	verdictPending
	// verdictWaiting: waiting for GPUs.
	verdictWaiting
	// verdictPrerequisites: waiting for prerequisites.
	verdictPrerequisites
	// verdictDeploying: admitted; the release is being installed.
	verdictDeploying
	// verdictRunning: the release is deployed.
	verdictRunning
	// verdictFailed: a human must act.
	verdictFailed
	// verdictStopped: spec.stopped; the release is (being) scaled to zero (stop.go).
	verdictStopped
)

// verdict is the decision of a pass: its kind, and the reason and message Ready repeats.
type verdict struct {
	kind    verdictKind
	reason  string
	message string
}

// observation is what a pass observed that decides the phase, Ready and the message.
type observation struct {
	// deleting: the workspace is being deleted; note says what the deletion waits for.
	deleting bool
	// suspended: reconciliation is paused; the phase and Ready stay as they were.
	suspended bool
	// verdict is the last step's decision.
	verdict verdict
	// note is the message of a deletion or a suspension.
	note string
}

// derived is the part of the status computed from an observation.
type derived struct {
	phase workspacesv1.WorkspacePhase
	// ready is nil when Ready, Reconciling and Stalled stay as they were.
	ready *metav1.Condition
	// progress says which kstatus condition GitOps tools read (Reconciling, Stalled) applies, with
	// ready set (conditions.SetKstatus).
	progress conditions.Progress
	message  string
	failure  *workspacesv1.FailureContext
}

// deriveStatus is the one place that turns what a pass observed into the workspace's phase, its Ready,
// Reconciling and Stalled conditions, its message and its failure context; prev is the status as the
// pass found it. The failure context is taken on the transition to Failed (or to another failure
// reason, keeping the phase the workspace failed from) and exists only while Failed.
//
// Reconciling (True while Pending, InstallingPrerequisites, Waiting, Deploying or Deleting) and
// Stalled (True while Failed) follow the kstatus conventions, so that Flux's and Argo CD's health
// checks see a progressing workspace as in progress and a failed one as failed; both repeat Ready's
// reason and message, and both are absent while Running.
func deriveStatus(prev *workspacesv1.WorkspaceDeploymentStatus, obs observation) derived {
	d := derivePhase(prev, obs)
	if d.ready == nil {
		return d
	}
	switch d.phase {
	case workspacesv1.PhaseRunning:
	case workspacesv1.PhaseFailed:
		d.progress = conditions.Failed
	case workspacesv1.PhaseStopped:
		// Stopped is a steady state: in progress only while the release is scaled down.
		if d.ready.Reason == workspacesv1.ReasonStopping {
			d.progress = conditions.InProgress
		}
	default:
		d.progress = conditions.InProgress
	}
	return d
}

// derivePhase derives the phase, Ready, the message and the failure context (see deriveStatus).
func derivePhase(prev *workspacesv1.WorkspaceDeploymentStatus, obs observation) derived {
	prevPhase := prev.Phase
	if prevPhase == "" {
		prevPhase = workspacesv1.PhasePending
	}
	keep := derived{phase: prevPhase, message: prev.Message}
	if prevPhase == workspacesv1.PhaseFailed {
		keep.failure = prev.FailureContext
	}
	switch {
	case obs.deleting:
		const msg = "the workspace is being deleted"
		return derived{phase: workspacesv1.PhaseDeleting, message: orDefault(obs.note, msg),
			ready: &metav1.Condition{Type: workspacesv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: workspacesv1.ReasonDeleting, Message: msg}}
	case obs.suspended:
		keep.message = obs.note
		return keep
	}
	v := obs.verdict
	var phase workspacesv1.WorkspacePhase
	switch v.kind {
	case verdictNone:
		return keep
	case verdictPending:
		phase = workspacesv1.PhasePending
	case verdictWaiting:
		phase = workspacesv1.PhaseWaiting
	case verdictPrerequisites:
		phase = workspacesv1.PhaseInstallingPrerequisites
	case verdictDeploying:
		phase = workspacesv1.PhaseDeploying
	case verdictRunning:
		const msg = "the workspace is running"
		return derived{phase: workspacesv1.PhaseRunning, message: msg,
			ready: &metav1.Condition{Type: workspacesv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: workspacesv1.ReasonRunning, Message: msg}}
	case verdictFailed:
		phase = workspacesv1.PhaseFailed
	case verdictStopped:
		phase = workspacesv1.PhaseStopped
	}
	out := derived{phase: phase, message: v.message,
		ready: &metav1.Condition{Type: workspacesv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: v.reason, Message: v.message}}
	if phase == workspacesv1.PhaseStopped && v.reason == workspacesv1.ReasonStopped {
		// Stopped as the spec asks: the desired state is reached (as a Knative Service scaled to zero
		// stays Ready), so GitOps health reads Current, not InProgress for as long as it is stopped.
		out.ready.Status = metav1.ConditionTrue
	}
	if phase != workspacesv1.PhaseFailed {
		return out
	}
	if fc := prev.FailureContext; prev.Phase == workspacesv1.PhaseFailed && fc != nil {
		if fc.Reason == v.reason {
			out.failure = fc
			return out
		}
		prevPhase = fc.PhaseWhenFailed
	}
	if prevPhase == "" {
		prevPhase = workspacesv1.PhasePending
	}
	out.failure = &workspacesv1.FailureContext{PhaseWhenFailed: prevPhase, Reason: v.reason}
	return out
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
