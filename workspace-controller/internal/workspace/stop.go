package workspace

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/metrics"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// stopWorkspace is the step that stops a workspace whose spec.stopped is set (docs/stop-start.md). The
// release is kept, so its volumes stay, and its routes are left alone, so its URLs stay reserved. It
// is scaled to zero through the `_exalsius` contract (resources.replicas 0, and the class's replicas
// injection paths), and, since published charts fix their replica count and ignore that value, its
// pods are stopped on the child as well (childns.Stop: a quota that refuses every pod of the release,
// and the running ones deleted). Its admission, and with it its GPUs, is released once no pod of the
// release holds a GPU on the child, as observed there. A workspace that has no ServiceSet (never
// installed) is Stopped at once. The GPU gate is skipped: starting the workspace again passes it
// anew.
func (r *Reconciler) stopWorkspace(ctx context.Context, s *scope) (stepResult, error) {
	if err := r.reclaimNotice(ctx, s); err != nil {
		return stop, err
	}
	if !s.stopRequested() {
		return next, r.clearAutoStopped(ctx, s)
	}
	if !s.ws.Spec.Stopped && owned.RestartsAfterReclaim(&s.prev) {
		// Stopped by a reclaim, its GPUs given back: it waits in the GPU queue to start again. The
		// gate decides (applyGate keeps it Stopped while it waits); the release stays as the stop
		// left it until it is admitted.
		return next, nil
	}
	s.stopping = true
	s.ws.Status.ResolvedResources = s.resources.DeepCopy()
	ss, err := r.ownServiceSet(ctx, s)
	if err != nil {
		return stop, err
	}
	why := s.stopCause()
	if ss == nil {
		s.ws.Status.Admission = nil
		s.ws.Status.Feasibility = nil
		s.setCondition(workspacesv1.FeasibleCondition, metav1.ConditionFalse, workspacesv1.ReasonStopped, why+"; it holds no GPU")
		s.stopped(s.stoppedReason(), why+"; nothing is installed, it holds no GPU")
		return stop, nil
	}
	if ss.Labels[owned.LabelStopped] == "true" {
		// Stopped already: the release stays as the stop left it (a spec change made while stopped
		// applies when the workspace starts). Rewriting it now, without the admission the stop
		// released, would change the pod template of a chart that applies the node selector verbatim.
		s.svcSet = ss
		return r.stopOnChild(ctx, s, why)
	}
	// The values for zero replicas, pinned to the nodes the admission counted the replicas on (as the
	// running release is), so that only the replica count changes; the resolved resources stay as
	// they are.
	zero := s.resources.DeepCopy()
	zero.Replicas = 0
	zero.NodeSelector = withSelector(zero.NodeSelector, gate.PinSelector(s.ws.Status.Admission))
	if out, err := r.valuesFor(ctx, s, zero); err != nil || out.stop {
		return out, err
	}
	if out, err := r.serviceSet(ctx, s); err != nil || out.stop {
		return out, err
	}
	return r.stopOnChild(ctx, s, why)
}

// ownServiceSet reads the workspace's own ServiceSet from the cache; nil when there is none.
func (r *Reconciler) ownServiceSet(ctx context.Context, s *scope) (*k0rdentv1beta1.ServiceSet, error) {
	name := s.ws.Status.ServiceSetName
	if name == "" {
		name = owned.ServiceSetName(s.ws)
	}
	ss := &k0rdentv1beta1.ServiceSet{}
	key := types.NamespacedName{Namespace: owned.ClusterKey(s.ws).Namespace, Name: name}
	if err := r.Client.Get(ctx, key, ss); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading ServiceSet %s: %w", key, err)
	}
	if !owned.OwnedServiceSet(ss, s.ws) {
		return nil, nil
	}
	return ss, nil
}

// stopOnChild stops the release's pods on the child (childns.Stop) and decides from what is left
// there: Stopping while a pod of the release holds GPUs (or the child cannot be reached, and so
// cannot show that none does), then Stopped with the admission released. HelmReleaseReady follows
// k0rdent's report of the zero-replica values; it does not decide the phase.
func (r *Reconciler) stopOnChild(ctx context.Context, s *scope, why string) (stepResult, error) {
	ro := r.rolloutOf(s)
	where := ro.Where
	if ro.DeployedBefore || ro.Deployed() {
		if err := r.markDeployed(ctx, s.svcSet); err != nil {
			return stop, err
		}
		s.setTrue(workspacesv1.HelmReleaseReadyCondition, workspacesv1.ReasonHelmReleaseDeployed, where+" is deployed with 0 replicas")
	} else {
		msg := where + " is being scaled to zero replicas"
		if ro.State != nil && ro.Current {
			msg += ": state " + string(ro.State.State)
			if ro.State.State == k0rdentv1beta1.ServiceStateFailed {
				msg += ": " + ro.FailureMessage()
			}
		}
		s.setCondition(workspacesv1.HelmReleaseReadyCondition, metav1.ConditionFalse, workspacesv1.ReasonStopping, msg)
	}

	cctx, cancel := r.childContext(ctx)
	defer cancel()
	cl, err := r.Children.Client(cctx, s.cdKey)
	if err != nil {
		s.stopped(workspacesv1.ReasonStopping, fmt.Sprintf("%s; cannot reach the child cluster of ClusterDeployment %s to stop the release's pods (%v); its GPUs stay held until it can be seen that no pod holds them", why, s.cdKey, err))
		return stopAfter(r.Options.UnreachableRetry), nil
	}
	held, err := r.namespaces(s, cl).Stop(cctx, s.ws)
	if err != nil {
		return stop, err
	}
	if held.HoldsGPUs() {
		s.stopped(workspacesv1.ReasonStopping, fmt.Sprintf("%s; %s still runs %s on the child; its GPUs stay held until they are gone", why, where, held))
		return stop, nil // the child's pod events bring the workspace back
	}
	s.ws.Status.Admission = nil
	s.ws.Status.Feasibility = nil
	s.setCondition(workspacesv1.FeasibleCondition, metav1.ConditionFalse, workspacesv1.ReasonStopped, why+"; its GPUs are free for other workspaces")
	msg := why + "; no pod of " + where + " holds a GPU on the child, its volumes and URLs are kept"
	if held.Pods > 0 {
		msg += fmt.Sprintf(" (%d pod(s) without GPUs are still stopping)", held.Pods)
	}
	s.stopped(s.stoppedReason(), msg)
	return stop, nil
}

// stoppedReason is the reason of a Stopped workspace: Reclaimed when a reclaim stopped it, and not
// its spec.
func (s *scope) stoppedReason() string {
	if !s.ws.Spec.Stopped && owned.ReclaimStopped(&s.ws.Status) {
		return workspacesv1.ReasonReclaimed
	}
	return workspacesv1.ReasonStopped
}

// stopped records the Stopped verdict: Ready False with the reason, no Stalled, and Reconciling only
// while the release is being scaled down (phase.go).
func (s *scope) stopped(reason, message string) {
	s.obs.verdict = verdict{kind: verdictStopped, reason: reason, message: message}
}

// stopCause says who stopped the workspace.
func (s *scope) stopCause() string {
	if rc := s.ws.Status.Reclaim; !s.ws.Spec.Stopped && rc != nil && rc.StoppedAt != nil {
		return fmt.Sprintf("the workspace was stopped at %s to give the GPUs it borrowed from its cohort back to %s (status.reclaim); it starts again through the GPU queue",
			rc.StoppedAt.UTC().Format(time.RFC3339), rc.For)
	}
	if at := s.ws.Annotations[workspacesv1.AutoStoppedAnnotation]; at != "" && s.ws.Spec.StopAfter != nil {
		return fmt.Sprintf("the workspace was stopped at %s after spec.stopAfter (%s) passed while it was admitted, without a spec change (spec.stopped)",
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
// positive stopAfter, already stopped, or no admission. spec.stopAfter counts only time in which the
// workspace holds its admission (its GPUs, reserved for it or in use): from the later of the last spec
// change and the admission. A workspace that holds none (Waiting for GPUs or its quota, Pending,
// installing its prerequisites, Failed before its install) is never stopped for being idle, and its
// clock starts when the gate admits it. status.admission.admittedAt is kept to the second, rounded
// down, so the deadline counts from the second after it: never before the admission.
func (s *scope) stopDeadline() (time.Time, bool) {
	d := s.ws.Spec.StopAfter
	c := s.ws.Status.LastSpecChange
	ad := s.ws.Status.Admission
	if s.ws.Spec.Stopped || d == nil || d.Duration <= 0 || c == nil || c.Generation != s.ws.Generation || ad == nil {
		return time.Time{}, false
	}
	from := c.Time.Time
	if ad.AdmittedAt != nil {
		if at := ad.AdmittedAt.Add(time.Second); at.After(from) {
			from = at
		}
	}
	return from.Add(d.Duration), true
}

// stopWhenIdle stops the workspace once spec.stopAfter passed while it held its admission, without a
// spec change (stopDeadline): it sets
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
		"spec.stopAfter (%s) passed since the workspace was admitted, without a spec change; spec.stopped is set: %s",
		s.ws.Spec.StopAfter.Duration, freedOnStop(s.ws.Status.Admission))
	return true, nil
}

// freedOnStop says what stopping frees of the admission held: its GPUs, once the release runs no
// replica, or nothing for a workspace that holds none.
func freedOnStop(ad *workspacesv1.Admission) string {
	if ad == nil || ad.GPUs == 0 {
		return "its release is scaled to zero replicas; it holds no GPU"
	}
	unit := "GPUs are"
	if ad.GPUs == 1 {
		unit = "GPU is"
	}
	return fmt.Sprintf("its release is scaled to zero replicas, and its %d %s released once no replica runs", ad.GPUs, unit)
}

// untilStopDeadline asks for a pass exactly at the stopAfter deadline or a reclaim's stop
// (status.reclaim.at), the earlier, when it comes before the pass the result asks for already.
func (s *scope) untilStopDeadline(res reconcile.Result) reconcile.Result {
	deadline, ok := s.stopDeadline()
	if !s.reclaimAt.IsZero() && (!ok || s.reclaimAt.Before(deadline)) {
		deadline, ok = s.reclaimAt, true
	}
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
