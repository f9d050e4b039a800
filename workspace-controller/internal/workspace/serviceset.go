package workspace

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/text"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/childns"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/release"
)

// serviceSetName is the name the workspace's ServiceSet has: the one in its status when that
// ServiceSet still exists and is the workspace's (made under an earlier naming), else ServiceSetName.
func (r *Reconciler) serviceSetName(ctx context.Context, s *scope) (string, error) {
	name := owned.ServiceSetName(s.ws)
	prev := s.ws.Status.ServiceSetName
	if prev == "" || prev == name {
		return name, nil
	}
	ss := &k0rdentv1beta1.ServiceSet{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: owned.ClusterKey(s.ws).Namespace, Name: prev}, ss)
	switch {
	case apierrors.IsNotFound(err):
		return name, nil
	case err != nil:
		return "", fmt.Errorf("reading ServiceSet %s/%s: %w", owned.ClusterKey(s.ws).Namespace, prev, err)
	case owned.OwnedServiceSet(ss, s.ws):
		return prev, nil
	}
	return name, nil
}

// claimServiceSet checks, before the gate, that a ServiceSet of the workspace's name is not another's.
func (r *Reconciler) claimServiceSet(ctx context.Context, s *scope) (stepResult, error) {
	name, err := r.serviceSetName(ctx, s)
	if err != nil {
		return stop, err
	}
	ss := &k0rdentv1beta1.ServiceSet{}
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: s.cdKey.Namespace, Name: name}, ss)
	if apierrors.IsNotFound(err) {
		return next, nil
	}
	if err != nil {
		return stop, fmt.Errorf("reading ServiceSet %s/%s: %w", s.cdKey.Namespace, name, err)
	}
	if !owned.OwnedServiceSet(ss, s.ws) {
		s.failed(workspacesv1.HelmReleaseReadyCondition, workspacesv1.ReasonServiceSetConflict, release.Conflict(ss, s.ws.Namespace))
		return stop, nil
	}
	s.claimed = ss
	return next, nil
}

// releaseInput is what the release package builds the workspace's ServiceSet and values Secret from.
func (s *scope) releaseInput() release.Input {
	return release.Input{
		Workspace: s.ws, Class: s.class, Cluster: s.cd, ClusterKey: s.cdKey,
		Values: s.values, SecretValues: s.secretValues, Stopping: s.stopping,
	}
}

// valuesDigest and clusterOwnerRef are the release package's, for the prerequisites' ServiceSets.
func valuesDigest(values string) string { return release.ValuesDigest(values) }

func clusterOwnerRef(cd *k0rdentv1beta1.ClusterDeployment) metav1.OwnerReference {
	return release.ClusterOwnerRef(cd)
}

// serviceSet creates the workspace's ServiceSet, or corrects it when it drifted from what the
// workspace asks (a spec edit is rolled out this way); docs/RECONCILIATION.md, step 16.
func (r *Reconciler) serviceSet(ctx context.Context, s *scope) (stepResult, error) {
	name, err := r.serviceSetName(ctx, s)
	if err != nil {
		return stop, err
	}
	want := release.DesiredServiceSet(s.releaseInput(), name)
	s.ws.Status.ServiceSetName = want.Name
	s.ws.Status.ReleaseName = want.Spec.Services[0].Name
	s.ws.Status.ReleaseNamespace = want.Spec.Services[0].Namespace
	stamp := release.Stamp(s.now)

	got := &k0rdentv1beta1.ServiceSet{}
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: want.Namespace, Name: want.Name}, got)
	if apierrors.IsNotFound(err) {
		// The values Secret first, so that the ServiceSet never names a missing one; it gets the
		// ServiceSet as owner once that exists.
		if err := r.ensureValuesSecret(ctx, s, nil); err != nil {
			return stop, err
		}
		release.StartRollout(want, stamp, s.ws.Status.Admission)
		if err := r.Client.Create(ctx, want); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return stopAfter(time.Second), nil // created by a pass whose cache we have not seen yet
			}
			return stop, fmt.Errorf("creating ServiceSet %s/%s: %w", want.Namespace, want.Name, err)
		}
		s.svcSet = want
		if err := r.ensureValuesSecret(ctx, s, want); err != nil {
			return stop, err
		}
		return next, nil
	}
	if err != nil {
		return stop, fmt.Errorf("reading ServiceSet %s/%s: %w", want.Namespace, want.Name, err)
	}
	if !owned.OwnedServiceSet(got, s.ws) {
		s.failed(workspacesv1.HelmReleaseReadyCondition, workspacesv1.ReasonServiceSetConflict, release.Conflict(got, s.ws.Namespace))
		return stop, nil
	}
	if got.DeletionTimestamp.IsZero() && s.secretValues != "" {
		// Before the ServiceSet changes, so that it never names an outdated or missing Secret.
		if err := r.ensureValuesSecret(ctx, s, got); err != nil {
			return stop, err
		}
	}
	if !got.DeletionTimestamp.IsZero() {
		s.svcSet = got
		s.deploying(workspacesv1.HelmReleaseReadyCondition, workspacesv1.ReasonHelmReleaseDeploying,
			fmt.Sprintf("ServiceSet %s/%s is being deleted; it is made again once it is gone", got.Namespace, got.Name))
		return stop, nil
	}
	specDrift, metaDrift := release.Drift(got, want)
	// A retry starts a new rollout of the same services: the deployTimeout counts from it, and a state
	// k0rdent reported before it is taken for the new rollout's only after the settle time.
	specDrift = specDrift || s.retrying
	if !specDrift && !metaDrift {
		s.svcSet = got
		return next, r.dropValuesSecret(ctx, s)
	}
	patchBase := got.DeepCopy()
	release.Correct(got, want, specDrift, stamp, s.ws.Status.Admission)
	if err := r.Client.Patch(ctx, got, client.MergeFrom(patchBase)); err != nil {
		return stop, fmt.Errorf("updating ServiceSet %s/%s: %w", got.Namespace, got.Name, err)
	}
	s.svcSet = got
	return next, r.dropValuesSecret(ctx, s)
}

// dropValuesSecret removes the values Secret once the ServiceSet no longer names it.
func (r *Reconciler) dropValuesSecret(ctx context.Context, s *scope) error {
	if s.secretValues != "" {
		return nil
	}
	return r.ensureValuesSecret(ctx, s, nil)
}

// failedUntilDeadline is what a release k0rdent reports Failed says, and when its workspace is passed
// again. k0rdent retries a failed release, and the gate keeps the GPUs of its replicas not bound yet
// until the current rollout's deadline (gate: bindsNoMore), for a rollout never deployed: before the
// deadline the pass comes again at it (after); past it, the reason turns DeployTimeout and the message
// says the GPUs are given up (the waiters behind it are woken by that change: releasesGPUs). A
// rollout deployed before keeps its reason and needs no pass at the deadline.
func failedUntilDeadline(now, deadline time.Time, timeout time.Duration, deployedBefore bool, msg, reason string) (string, string, time.Duration) {
	switch {
	case deployedBefore:
		return msg, reason, 0
	case now.Before(deadline):
		return msg, reason, deadline.Sub(now)
	}
	return fmt.Sprintf("%s; not deployed within deployTimeout %s: its replicas not bound hold no GPUs any more", msg, timeout), workspacesv1.ReasonDeployTimeout, 0
}

// readiness reads the release's state from the ServiceSet (docs/RECONCILIATION.md, step 17). The deployTimeout counts
// from the start of the current rollout (the ServiceSet made, or its services changed). Once k0rdent
// reported the current rollout Deployed, a later Provisioning or Pending is a re-sync (a Sveltos
// re-sync, a KCM restart, a health verifier): the workspace stays Running and says so, unless the
// service really fails.
func (r *Reconciler) readiness(ctx context.Context, s *scope) (stepResult, error) {
	timeout := s.class.Spec.DeployTimeoutOrDefault()
	ro := r.rolloutOf(s)
	rd := ro.Readiness(s.now, timeout, r.Options.RolloutSettle)
	switch rd.Verdict {
	case release.Deployed:
		if !ro.DeployedBefore && !r.releasePodsRun(ctx, s, rd) {
			return next, nil
		}
		if err := r.markDeployed(ctx, s.svcSet); err != nil {
			return stop, err
		}
		s.running(workspacesv1.ReasonHelmReleaseDeployed, rd.Message)
		return next, nil
	case release.Failed:
		msg, reason := rd.Message, workspacesv1.ReasonHelmReleaseFailed
		if why := r.podRefusal(ctx, s); why.Found() {
			msg, reason = msg+"; "+why.Message, why.Reason
		}
		var after time.Duration
		msg, reason, after = failedUntilDeadline(s.now, rd.Deadline, timeout, ro.DeployedBefore, msg, reason)
		if after > 0 {
			s.requeueAfter = after
		}
		s.failed(workspacesv1.HelmReleaseReadyCondition, reason, msg)
		s.snapshot = true
		return next, nil
	case release.Resyncing:
		s.running(workspacesv1.ReasonHelmReleaseResyncing, rd.Message)
		return next, nil
	}
	var why childns.Refusal
	if !s.releaseNSCreated { // a namespace made in this pass has no refused pods yet
		why = r.podRefusal(ctx, s)
	}
	if rd.Verdict == release.TimedOut {
		msg, reason := rd.Message, workspacesv1.ReasonDeployTimeout
		if why.Found() {
			msg, reason = msg+"; "+why.Message, why.Reason
		}
		s.failed(workspacesv1.HelmReleaseReadyCondition, workspacesv1.ReasonHelmReleaseFailed, msg)
		s.setCondition(workspacesv1.HelmReleaseReadyCondition, metav1.ConditionFalse, reason, msg)
		s.snapshot = true
		return next, nil
	}
	msg, reason := rd.Message, workspacesv1.ReasonHelmReleaseDeploying
	if why.Found() {
		msg, reason = msg+"; "+why.Message, why.Reason
		s.noteRefusal(why)
	}
	s.deploying(workspacesv1.HelmReleaseReadyCondition, reason, msg)
	// Look again while the release is installed (a refusal may go, or change, and its event may be
	// missed), and when a pod Unschedulable now passes the bound.
	s.requeueAfter = min(rd.RequeueAfter, deployingRecheck(r.Options.DeployingRecheck))
	if why.RecheckAfter > 0 {
		s.requeueAfter = min(s.requeueAfter, why.RecheckAfter)
	}
	return next, nil
}

// releasePodsRun checks, once k0rdent reports the current rollout Deployed and before the workspace
// is Running for it, that the release's pods run on the child (childns.PodsReady): every pod that is
// not finished and not being deleted is Ready on a node that still exists, and a workspace that asks
// GPUs has at least one (a release without GPUs may run no pod: a chart of Services or ConfigMaps only). Otherwise the
// workspace stays Deploying, naming the pods not Ready yet, under the deployTimeout. Once the rollout
// was confirmed (rollout-deployed), later passes do not look again: a pod that restarts later does
// not undo Running. A child that cannot be read keeps a Running workspace Running.
func (r *Reconciler) releasePodsRun(ctx context.Context, s *scope, rd release.Readiness) bool {
	ctx, cancel := r.childContext(ctx)
	defer cancel()
	var pods childns.PodsReadiness
	cl, err := r.Children.Client(ctx, s.cdKey)
	if err == nil {
		pods, err = r.namespaces(s, cl).PodsReady(ctx, s.releaseNamespace())
	}
	var why string
	switch {
	case err != nil && s.prev.Phase == workspacesv1.PhaseRunning:
		return true
	case err != nil:
		why = fmt.Sprintf("cannot read the release's pods on the child of ClusterDeployment %s: %v", s.cdKey, err)
	case pods.Ready(s.asksGPUs()):
		return true
	default:
		why = pods.String()
	}
	msg := rd.Message + " by k0rdent, but " + why
	if !s.now.Before(rd.Deadline) {
		msg = fmt.Sprintf("%s; not running within deployTimeout %s", msg, s.class.Spec.DeployTimeoutOrDefault())
		s.failed(workspacesv1.HelmReleaseReadyCondition, workspacesv1.ReasonHelmReleaseFailed, msg)
		s.setCondition(workspacesv1.HelmReleaseReadyCondition, metav1.ConditionFalse, workspacesv1.ReasonDeployTimeout, msg)
		s.snapshot = true
		return false
	}
	s.deploying(workspacesv1.HelmReleaseReadyCondition, workspacesv1.ReasonHelmReleaseDeploying, msg)
	// A pod of the release turning Ready (or being created, bound or finishing) is a child event that
	// brings the workspace back; the timer only bounds what a missed event costs, and the deadline.
	s.requeueAfter = min(rd.Deadline.Sub(s.now), deployingRecheck(r.Options.DeployingRecheck))
	return false
}

// deployingRecheckJitter is the largest share by which deployingRecheck lengthens the look.
const deployingRecheckJitter = 0.2

// deployingRecheck is when a Deploying workspace is looked at again without an event: d, lengthened
// at random by up to deployingRecheckJitter of it. Workspaces one child event brought back together
// (a reconnect brings back every workspace of the child) would otherwise be looked at together every
// d for as long as they stay Deploying: a herd that fills the queue in front of a child change every
// d, and that only a random length, drawn again at each look, spreads out.
func deployingRecheck(d time.Duration) time.Duration {
	return wait.Jitter(d, deployingRecheckJitter)
}

// asksGPUs reports whether the workspace's release asks GPUs (replicas with a GPU count).
func (s *scope) asksGPUs() bool {
	rs := s.resources
	return rs != nil && rs.Replicas > 0 && rs.PerReplica.GPUCount != nil && *rs.PerReplica.GPUCount > 0
}

// noteRefusal keeps why for an Event when HelmReleaseReady already named a refusal with the same
// reason and another message: the refusal changed (another pod or workload, another cause). A first
// refusal changes the reason, and that transition is its Event (recordPassEvent).
func (s *scope) noteRefusal(why childns.Refusal) {
	prev := meta.FindStatusCondition(s.prev.Conditions, workspacesv1.HelmReleaseReadyCondition)
	if prev != nil && prev.Reason == why.Reason && !strings.Contains(prev.Message, why.Message) {
		s.refusal = &why
	}
}

// recordRefusal records a changed refusal of the release's pods as a Warning Event on the workspace.
func (r *Reconciler) recordRefusal(ws *workspacesv1.WorkspaceDeployment, why *childns.Refusal) {
	if why == nil || r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(ws, nil, corev1.EventTypeWarning, why.Reason, workspacesv1.HelmReleaseReadyCondition, "%s",
		text.Truncate(why.Message, text.MaxEventNoteBytes))
}

// rolloutOf reads the rollout of the workspace's ServiceSet (release.ReadRollout).
func (r *Reconciler) rolloutOf(s *scope) release.Rollout {
	return release.ReadRollout(s.svcSet, s.ws, s.now, r.Options.RolloutSettle)
}

// markDeployed records on the ServiceSet that its current rollout was deployed.
func (r *Reconciler) markDeployed(ctx context.Context, ss *k0rdentv1beta1.ServiceSet) error {
	patchBase := release.MarkDeployed(ss)
	if patchBase == nil {
		return nil
	}
	if err := r.Client.Patch(ctx, ss, client.MergeFrom(patchBase)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("marking ServiceSet %s/%s deployed: %w", ss.Namespace, ss.Name, err)
	}
	return nil
}
