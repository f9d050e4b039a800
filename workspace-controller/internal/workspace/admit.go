package workspace

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
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
	d, err := r.gateFor().Admit(ctx, req)
	if err != nil {
		return stop, err
	}
	s.applyGate(d)
	switch d.Outcome {
	case gate.Unreachable:
		return stopAfter(r.Options.UnreachableRetry), nil
	case gate.Unavailable, gate.Waiting, gate.OverQuota:
		return stop, r.releaseAdmission(ctx, s)
	}
	return next, nil
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
		return
	case gate.Unreachable:
		s.waitFor(workspacesv1.FeasibleCondition, d.Reason, d.Message)
		return
	}
	s.ws.Status.Feasibility = d.Feasibility
	switch d.Outcome {
	case gate.Unavailable:
		s.failed(workspacesv1.FeasibleCondition, d.Reason, d.Message)
	case gate.Waiting:
		s.waitForGPUs(workspacesv1.FeasibleCondition, d.Reason, d.Message)
	case gate.OverQuota:
		s.applyQuota(d.Quota)
	case gate.Admitted:
		s.applyQuota(d.Quota)
		s.ws.Status.Admission = d.Admission
		s.setTrue(workspacesv1.FeasibleCondition, d.Feasibility.Reason, d.Feasibility.Message)
		if p := s.prev.Phase; p == workspacesv1.PhaseFailed || p == workspacesv1.PhaseWaiting || p == workspacesv1.PhasePending || p == "" {
			// Admitted: no longer Failed or Waiting, also for the decisions that read the status before
			// this pass ends (a later step's verdict replaces this one).
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
	name := s.ws.Status.ServiceSetName
	if name == "" {
		name = owned.ServiceSetName(s.ws)
	}
	ss := &k0rdentv1beta1.ServiceSet{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: owned.ClusterKey(s.ws).Namespace, Name: name}, ss)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading ServiceSet %s/%s: %w", owned.ClusterKey(s.ws).Namespace, name, err)
	}
	return owned.OwnedServiceSet(ss, s.ws), nil
}

// pinToAdmittedNodes makes the replicas schedulable where the gate counted them. When the gate
// counted every replica on one node, the node's kubernetes.io/hostname label joins the selector the
// chart receives in `_exalsius.scheduling.nodeSelector`, which the published charts apply verbatim;
// the scheduler then cannot place them on GPUs the gate counted for another workspace. Replicas spread
// over several nodes cannot be pinned through a node selector; the gate counts one node whenever one
// holds them all. See docs/RECONCILIATION.md.
func (r *Reconciler) pinToAdmittedNodes(_ context.Context, s *scope) (stepResult, error) {
	pin := gate.PinSelector(s.ws.Status.Admission)
	if len(pin) == 0 {
		return next, nil
	}
	sel := make(map[string]string, len(s.resources.NodeSelector)+len(pin))
	for k, v := range s.resources.NodeSelector {
		sel[k] = v
	}
	for k, v := range pin {
		sel[k] = v
	}
	s.resources.NodeSelector = sel
	return next, nil
}
