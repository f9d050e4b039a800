package workspace

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// admit is the step that asks the GPU gate (internal/gate) whether the workspace may start on its
// cluster now, and records the answer in the status (docs/RECONCILIATION.md, step 12).
func (r *Reconciler) admit(ctx context.Context, s *scope) (stepResult, error) {
	s.ws.Status.ResolvedResources = s.resources.DeepCopy()
	req := r.gateRequest(s, s.applyGate)
	req.Cluster = s.cdKey
	if s.cd != nil {
		req.ClusterUID = s.cd.UID
	}
	d, err := r.gateFor().Admit(ctx, req)
	if err != nil {
		return stop, err
	}
	r.recordLost(s, d)
	s.applyGate(d)
	switch d.Outcome {
	case gate.Unreachable:
		return stopAfter(r.Options.UnreachableRetry), nil
	case gate.Waiting, gate.OverQuota:
		// Events wake a waiter (queue.go, watches.go); the timer bounds what a missed one costs, as
		// for an unplaced waiter.
		return stopAfter(r.Options.WaitingRetry), r.releaseAdmission(ctx, s)
	case gate.Unavailable:
		if d.Lost != "" {
			return stopAfter(r.Options.WaitingRetry), r.releaseAdmission(ctx, s)
		}
		return stop, r.releaseAdmission(ctx, s)
	}
	return next, nil
}

// recordLost records an Event when the gate took the workspace's admission back (gate.Decision.Lost):
// once, when the Feasible condition did not say so already, since a workspace gated again to Waiting
// keeps the old admission while its ServiceSet exists and is gated again on every pass.
func (r *Reconciler) recordLost(s *scope, d gate.Decision) {
	if d.Lost == "" || r.Recorder == nil {
		return
	}
	if c := meta.FindStatusCondition(s.prev.Conditions, workspacesv1.FeasibleCondition); c != nil && strings.Contains(c.Message, d.Lost) {
		return
	}
	r.Recorder.Eventf(s.ws, nil, corev1.EventTypeWarning, workspacesv1.ReasonAdmissionLost, "GateAgain", "%s (outcome %s)", d.Message, d.Outcome)
}

// gateRequest is the gate's request for the workspace of the pass; apply puts a decision into the
// scope before the gate has it written (gate.Request.Record).
func (r *Reconciler) gateRequest(s *scope, apply func(gate.Decision)) gate.Request {
	return gate.Request{
		Workspace: s.ws, Previous: &s.prev, Resources: s.resources, ServiceSet: s.claimed, Now: s.now,
		HasServiceSet: func(ctx context.Context) (bool, error) { return r.hasServiceSet(ctx, s) },
		Record: func(ctx context.Context, d gate.Decision) (*workspacesv1.WorkspaceDeployment, error) {
			apply(d)
			return s.ws, r.recordStatus(ctx, s)
		},
	}
}

// applyGate records a decision of gate.Admit in the status: the admission, the feasibility, the
// quota's word, and the condition that says why the pass stops when it does.
func (s *scope) applyGate(d gate.Decision) {
	switch d.Outcome {
	case gate.Covered, gate.Kept:
		if d.Admission != nil {
			s.ws.Status.Admission = d.Admission
		}
		s.ws.Status.Reclaiming = nil
		return
	case gate.Unreachable:
		s.waitForChild(workspacesv1.FeasibleCondition, d.Message)
		return
	}
	s.ws.Status.Feasibility = d.Feasibility
	s.ws.Status.Reclaiming = d.Reclaiming
	if owned.ReclaimStopped(&s.ws.Status) {
		if d.Outcome == gate.Admitted {
			// Admitted again: it starts, and the reclaim that stopped it is over.
			s.ws.Status.Reclaim = nil
		} else {
			// Stopped by a reclaim, it waits in the queue to start again: Stopped, saying so, and why
			// it waits (its GPUs, or its namespace's quota, whose word WithinQuota carries).
			s.applyQuota(d.Quota)
			msg := d.Message
			if d.Outcome == gate.OverQuota && d.Quota != nil {
				msg = d.Quota.Message
			} else {
				s.setCondition(workspacesv1.FeasibleCondition, metav1.ConditionFalse, d.Reason, d.Message)
			}
			s.stopped(workspacesv1.ReasonReclaimed, s.stopCause()+"; "+msg)
			return
		}
	}
	switch d.Outcome {
	case gate.Unavailable:
		if d.Lost != "" {
			// The node the workspace ran on went, and none that could hold it is there now: a node
			// replaced (drained, deleted, then a new one joins) is a wait, not a failure. Its release
			// keeps its ServiceSet and with it the lost admission, so every pass finds it lost again
			// until a node joins.
			s.waitForGPUs(workspacesv1.FeasibleCondition, workspacesv1.ReasonWaitingForGpuNodes, d.Message+"; it waits for a node that can hold it to join")
			return
		}
		s.failed(workspacesv1.FeasibleCondition, d.Reason, d.Message)
	case gate.Waiting:
		s.waitForGPUs(workspacesv1.FeasibleCondition, d.Reason, d.Message)
	case gate.OverQuota:
		s.applyQuota(d.Quota)
	case gate.Admitted:
		s.applyQuota(d.Quota)
		s.ws.Status.Admission = d.Admission
		s.setTrue(workspacesv1.FeasibleCondition, d.Feasibility.Reason, d.Feasibility.Message)
		if p := s.prev.Phase; d.Lost != "" || p == workspacesv1.PhaseFailed || p == workspacesv1.PhaseWaiting || p == workspacesv1.PhasePending || p == "" {
			// Admitted: no longer Failed or Waiting, also for the decisions that read the status before
			// this pass ends (a later step's verdict replaces this one). A workspace gated again because
			// its admission was lost deploys again: its pods move to the new admission.
			s.obs.verdict = verdict{kind: verdictDeploying, reason: d.Reason, message: "admitted by the GPU gate: " + d.Message}
		}
	}
}

// applyQuota records what the namespace's WorkspaceQuotas said: WithinQuota, or no such condition
// when the namespace has none.
func (s *scope) applyQuota(q *gate.QuotaResult) {
	switch {
	case q == nil:
	case !q.Applies:
		meta.RemoveStatusCondition(&s.ws.Status.Conditions, workspacesv1.WithinQuotaCondition)
	case q.Within:
		s.setTrue(workspacesv1.WithinQuotaCondition, workspacesv1.ReasonWithinQuota, q.Message)
	default:
		s.waitForGPUs(workspacesv1.WithinQuotaCondition, workspacesv1.ReasonQuotaExceeded, q.Message)
	}
}

// recordStatus writes the workspace's status now, inside the gate's locks and before anything is
// installed or changed (gate.Request.Record).
func (r *Reconciler) recordStatus(ctx context.Context, s *scope) error {
	s.apply()
	if err := r.writeStatus(ctx, s.ws, &s.before.Status); err != nil {
		return err
	}
	r.writes.wrote(s.key(), s.ws.ResourceVersion)
	s.before.Status = *s.ws.Status.DeepCopy()
	return nil
}

// releaseAdmission drops the workspace's admission when nothing holds its GPUs any more: no
// ServiceSet exists for it. A ServiceSet that exists keeps the admission, because its release may
// hold the GPUs.
func (r *Reconciler) releaseAdmission(ctx context.Context, s *scope) error {
	if s.ws.Status.Admission == nil {
		return nil
	}
	exists, err := r.hasServiceSet(ctx, s)
	if err != nil || exists {
		return err
	}
	s.ws.Status.Admission = nil
	return nil
}

// hasServiceSet reports whether the workspace's own ServiceSet exists.
func (r *Reconciler) hasServiceSet(ctx context.Context, s *scope) (bool, error) {
	if s.svcSet != nil {
		return true, nil
	}
	ss, err := r.ownServiceSet(ctx, s)
	return ss != nil, err
}

// pinToAdmittedNodes makes the replicas schedulable where the gate counted them. When the gate
// counted every replica on one node, the node's kubernetes.io/hostname label joins the selector the
// chart receives in `_exalsius.scheduling.nodeSelector`, which the published charts apply verbatim;
// the scheduler then cannot place them on GPUs the gate counted for another workspace. Replicas spread
// over several nodes cannot be pinned through a node selector; the gate counts one node whenever one
// holds them all. See docs/RECONCILIATION.md.
func (r *Reconciler) pinToAdmittedNodes(_ context.Context, s *scope) (stepResult, error) {
	s.resources.NodeSelector = withSelector(s.resources.NodeSelector, gate.PinSelector(s.ws.Status.Admission))
	return next, nil
}

// withSelector returns sel joined with pin (pin wins on a shared key), as a new map; sel itself when
// pin is empty.
func withSelector(sel, pin map[string]string) map[string]string {
	if len(pin) == 0 {
		return sel
	}
	out := make(map[string]string, len(sel)+len(pin))
	for k, v := range sel {
		out[k] = v
	}
	for k, v := range pin {
		out[k] = v
	}
	return out
}
