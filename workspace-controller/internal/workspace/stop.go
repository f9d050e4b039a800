package workspace

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/metrics"
)

// stopWorkspace is the step that stops a workspace whose spec.stopped is set (docs/stop-start.md). The
// release is kept and scaled to zero through the `_exalsius` contract (resources.replicas 0, and the
// class's replicas injection paths), so its volumes stay; its routes are left alone, so its URLs stay
// reserved. Its admission, and with it its GPUs, is released once k0rdent reports the scaled release
// deployed. A workspace that has no ServiceSet (never installed) is Stopped at once. The GPU gate is
// skipped: starting the workspace again passes it anew.
func (r *Reconciler) stopWorkspace(ctx context.Context, s *scope) (stepResult, error) {
	if !s.ws.Spec.Stopped {
		return next, r.clearAutoStopped(ctx, s)
	}
	s.stopping = true
	s.ws.Status.ResolvedResources = s.resources.DeepCopy()
	exists, err := r.hasServiceSet(ctx, s)
	if err != nil {
		return stop, err
	}
	why := s.stopCause()
	if !exists {
		s.ws.Status.Admission = nil
		s.ws.Status.Feasibility = nil
		s.setCondition(workspacesv1.FeasibleCondition, metav1.ConditionFalse, workspacesv1.ReasonStopped, why+"; it holds no GPU")
		s.stopped(workspacesv1.ReasonStopped, why+"; nothing is installed, it holds no GPU")
		return stop, nil
	}
	// The values for zero replicas; the resolved resources stay as they are.
	zero := s.resources.DeepCopy()
	zero.Replicas = 0
	if out, err := r.valuesFor(ctx, s, zero); err != nil || out.stop {
		return out, err
	}
	if out, err := r.serviceSet(ctx, s); err != nil || out.stop {
		return out, err
	}
	return r.stopReadiness(ctx, s, why)
}

// stopReadiness follows the scaled-down release: Stopping until k0rdent reports the rollout that scaled
// it to zero deployed, then Stopped with the admission released.
func (r *Reconciler) stopReadiness(ctx context.Context, s *scope, why string) (stepResult, error) {
	ss := s.svcSet
	ro := r.rolloutOf(s)
	state, current, started, where := ro.State, ro.Current, ro.Started, ro.Where
	if ro.DeployedBefore || ro.Deployed() {
		if err := r.markDeployed(ctx, ss); err != nil {
			return stop, err
		}
		s.ws.Status.Admission = nil
		s.ws.Status.Feasibility = nil
		s.setCondition(workspacesv1.FeasibleCondition, metav1.ConditionFalse, workspacesv1.ReasonStopped, why+"; its GPUs are free for other workspaces")
		s.setTrue(workspacesv1.HelmReleaseReadyCondition, workspacesv1.ReasonHelmReleaseDeployed, where+" is deployed with 0 replicas")
		s.stopped(workspacesv1.ReasonStopped, why+"; "+where+" runs no replica, its volumes and URLs are kept")
		return stop, nil
	}
	msg := where + " is being scaled to zero replicas"
	if state != nil && current {
		msg += ": state " + string(state.State)
		if state.State == k0rdentv1beta1.ServiceStateFailed {
			msg += ": " + ro.FailureMessage()
		}
	}
	s.setCondition(workspacesv1.HelmReleaseReadyCondition, metav1.ConditionFalse, workspacesv1.ReasonStopping, msg)
	s.stopped(workspacesv1.ReasonStopping, why+"; "+msg+"; its GPUs stay held until then")
	if state != nil && !current {
		// A state older than the change: trusted once k0rdent had time to report a newer one.
		return stopAfter(r.Options.RolloutSettle - s.now.Sub(started)), nil
	}
	return stop, nil
}

// stopped records the Stopped verdict: Ready False with the reason, no Stalled, and Reconciling only
// while the release is being scaled down (phase.go).
func (s *scope) stopped(reason, message string) {
	s.obs.verdict = verdict{kind: verdictStopped, reason: reason, message: message}
}

// stopCause says who stopped the workspace.
func (s *scope) stopCause() string {
	if at := s.ws.Annotations[workspacesv1.AutoStoppedAnnotation]; at != "" && s.ws.Spec.StopAfter != nil {
		return fmt.Sprintf("the workspace was stopped at %s after spec.stopAfter (%s) passed without a spec change (spec.stopped)",
			at, s.ws.Spec.StopAfter.Duration)
	}
	return "the workspace is stopped (spec.stopped)"
}

// clearAutoStopped removes the auto-stop annotation of a workspace that was started again.
func (r *Reconciler) clearAutoStopped(ctx context.Context, s *scope) error {
	if _, ok := s.ws.Annotations[workspacesv1.AutoStoppedAnnotation]; !ok {
		return nil
	}
	base := s.ws.DeepCopy()
	delete(s.ws.Annotations, workspacesv1.AutoStoppedAnnotation)
	if err := r.Client.Patch(ctx, s.ws, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("removing annotation %s: %w", workspacesv1.AutoStoppedAnnotation, err)
	}
	return nil
}

// trackSpecChange records in status.lastSpecChange when the controller first saw the current
// generation. The time is rounded up to the second the status can hold, so that a deadline counted
// from it never falls before the change.
func (s *scope) trackSpecChange() {
	if c := s.ws.Status.LastSpecChange; c != nil && c.Generation == s.ws.Generation {
		return
	}
	t := s.now.UTC()
	if r := t.Truncate(time.Second); !r.Equal(t) {
		t = r.Add(time.Second)
	}
	s.ws.Status.LastSpecChange = &workspacesv1.SpecChange{Generation: s.ws.Generation, Time: metav1.NewTime(t)}
}

// stopDeadline is when spec.stopAfter stops the workspace, and false when it does not apply: no
// positive stopAfter, or already stopped.
func (s *scope) stopDeadline() (time.Time, bool) {
	d := s.ws.Spec.StopAfter
	c := s.ws.Status.LastSpecChange
	if s.ws.Spec.Stopped || d == nil || d.Duration <= 0 || c == nil || c.Generation != s.ws.Generation {
		return time.Time{}, false
	}
	return c.Time.Add(d.Duration), true
}

// stopWhenIdle stops the workspace once spec.stopAfter passed since the last spec change: it sets
// spec.stopped (as a user would, and as Kubeflow's notebook culler sets its stop annotation), so that
// the stop shows in the spec and a user starts the workspace by setting it back to false. The write
// is conditional on the generation read, so a concurrent spec change wins and restarts the clock.
// It reports whether it stopped the workspace; the spec change brings the workspace back.
func (r *Reconciler) stopWhenIdle(ctx context.Context, s *scope) (bool, error) {
	s.trackSpecChange()
	deadline, ok := s.stopDeadline()
	if !ok || s.now.Before(deadline) {
		return false, nil
	}
	base := s.ws.DeepCopy()
	s.ws.Spec.Stopped = true
	if s.ws.Annotations == nil {
		s.ws.Annotations = map[string]string{}
	}
	at := s.now.UTC().Format(time.RFC3339)
	s.ws.Annotations[workspacesv1.AutoStoppedAnnotation] = at
	if err := r.Client.Patch(ctx, s.ws, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return true, fmt.Errorf("stopping after spec.stopAfter: %w", err)
	}
	metrics.StopsAfterIdle.Inc()
	r.Recorder.Eventf(s.ws, nil, corev1.EventTypeNormal, "StoppedAfterIdle", "Stop",
		"spec.stopAfter (%s) passed without a spec change; spec.stopped is set, the GPUs are released", s.ws.Spec.StopAfter.Duration)
	return true, nil
}

// untilStopDeadline asks for a pass exactly at the stopAfter deadline, when it comes before the
// pass the result asks for already.
func (s *scope) untilStopDeadline(res reconcile.Result) reconcile.Result {
	deadline, ok := s.stopDeadline()
	if !ok {
		return res
	}
	d := deadline.Sub(s.now)
	if d <= 0 {
		d = time.Millisecond
	}
	if res.RequeueAfter <= 0 || d < res.RequeueAfter {
		res.RequeueAfter = d
	}
	return res
}
