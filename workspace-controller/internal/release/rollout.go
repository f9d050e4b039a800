package release

import (
	"fmt"
	"time"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// Rollout is what k0rdent reports of the workspace's release in its ServiceSet, read against the
// current rollout (the ServiceSet made, or its services changed, at Started).
type Rollout struct {
	// State is the release's entry in the ServiceSet's status, nil while k0rdent reported none.
	State *k0rdentv1beta1.ServiceState
	// Current: State describes this rollout. A state from before it describes the previous values
	// and is trusted only once k0rdent had time (the settle time) to report a newer one.
	Current bool
	// StaleHash: k0rdent reports Deployed with the lastDeployedHash the release had when this rollout
	// started (KCM v1.12): the configuration of before the change, whatever the time.
	StaleHash bool
	// DeployedBefore: the controller confirmed this rollout deployed once (the ServiceSet's annotation).
	DeployedBefore bool
	Started        time.Time
	// Where names the release for messages.
	Where string
}

// ReadRollout reads the workspace's release from its ServiceSet ss at now. settle is how long a state
// older than the current rollout is taken for a state of the previous one (Options.RolloutSettle).
func ReadRollout(ss *k0rdentv1beta1.ServiceSet, ws *workspacesv1.WorkspaceDeployment, now time.Time, settle time.Duration) Rollout {
	release, ns := owned.ReleaseName(ws), owned.ReleaseNamespace(ws)
	ro := Rollout{Started: now,
		Where: fmt.Sprintf("release %s in namespace %s (ServiceSet %s/%s)", release, ns, ss.Namespace, ss.Name)}
	stamp := ss.Annotations[owned.AnnotationRolloutStarted]
	if t, err := time.Parse(time.RFC3339, stamp); err == nil {
		ro.Started = t
	}
	for i := range ss.Status.Services {
		if ss.Status.Services[i].Name == release && ss.Status.Services[i].Namespace == ns {
			ro.State = &ss.Status.Services[i]
		}
	}
	ro.Current = ro.State != nil && (ro.State.LastStateTransitionTime == nil ||
		(!ro.State.LastStateTransitionTime.Time.Before(ro.Started.Truncate(time.Second)) && !foundAtStart(ss, ro.State)) ||
		now.Sub(ro.Started) >= settle)
	// KCM v1.12 moves lastDeployedHash only once Sveltos and its own check of the child confirm a new
	// configuration Deployed. Where the rollout recorded the hash it started from, a Deployed carrying
	// a hash says which configuration it is, better than its time: the previous one while the hash is
	// unchanged (however long ago the rollout started), this one once it moved (however old the state).
	base, hasBase := ss.Annotations[owned.AnnotationRolloutBaseHash]
	if hasBase && ro.State != nil && ro.State.State == k0rdentv1beta1.ServiceStateDeployed && ro.State.LastDeployedHash != "" {
		ro.StaleHash = ro.State.LastDeployedHash == base
		ro.Current = !ro.StaleHash
	}
	ro.DeployedBefore = stamp != "" && ss.Annotations[owned.AnnotationRolloutDeployed] == stamp
	return ro
}

// foundAtStart reports whether state is the one the rollout found when it started: its transition time
// is the one recorded then (owned.AnnotationRolloutBaseTransition).
func foundAtStart(ss *k0rdentv1beta1.ServiceSet, state *k0rdentv1beta1.ServiceState) bool {
	base, ok := ss.Annotations[owned.AnnotationRolloutBaseTransition]
	return ok && base != "" && state.LastStateTransitionTime != nil && transitionStamp(state) == base
}

// transitionStamp is a state's lastStateTransitionTime as recorded: RFC 3339, to the second ("" when
// it has none).
func transitionStamp(state *k0rdentv1beta1.ServiceState) string {
	if state == nil || state.LastStateTransitionTime == nil {
		return ""
	}
	return state.LastStateTransitionTime.UTC().Format(time.RFC3339)
}

// Deployed reports whether k0rdent reports the current rollout Deployed.
func (ro Rollout) Deployed() bool {
	return ro.Current && ro.State.State == k0rdentv1beta1.ServiceStateDeployed
}

// Failed reports whether k0rdent reports the current rollout Failed.
func (ro Rollout) Failed() bool {
	return ro.Current && ro.State.State == k0rdentv1beta1.ServiceStateFailed
}

// FailureMessage is k0rdent's message of a failed state, or says there is none.
func (ro Rollout) FailureMessage() string {
	if ro.State == nil || ro.State.FailureMessage == "" {
		return "no message from k0rdent"
	}
	return ro.State.FailureMessage
}

// reported names the state k0rdent reported, whichever rollout it describes.
func (ro Rollout) reported() string {
	if ro.State == nil {
		return "no state reported"
	}
	return "state " + string(ro.State.State)
}

// Verdict is what the rollout says of the release.
type Verdict int

const (
	// Installing means not deployed yet, within the deployTimeout.
	Installing Verdict = iota
	// Deployed means k0rdent reports the current rollout Deployed.
	Deployed
	// Failed means k0rdent reports the current rollout Failed.
	Failed
	// Resyncing means the current rollout was deployed once and k0rdent re-syncs it (a Sveltos re-sync, a
	// KCM restart, a health verifier); the release still runs.
	Resyncing
	// TimedOut means not deployed within the deployTimeout, counted from the start of the rollout.
	TimedOut
)

// Readiness is the release's readiness as the rollout says it.
type Readiness struct {
	Verdict Verdict
	// Message describes the verdict, naming the release.
	Message string
	// Deadline is when the deployTimeout of the current rollout passes.
	Deadline time.Time
	// RequeueAfter, while Installing, is when to look again without an event: at the deadline, or once
	// a state older than the rollout can be trusted (settle).
	RequeueAfter time.Duration
}

// Readiness reads the release's readiness at now (docs/RECONCILIATION.md, readiness). The deployTimeout
// counts from the start of the current rollout. Once k0rdent reported the current rollout Deployed, a
// later Provisioning or Pending is a re-sync: the release is Resyncing, unless it really fails.
func (ro Rollout) Readiness(now time.Time, timeout, settle time.Duration) Readiness {
	out := Readiness{Deadline: ro.Started.Add(timeout)}
	switch {
	case ro.Deployed():
		out.Verdict, out.Message = Deployed, ro.Where+" is deployed"
		return out
	case ro.Failed():
		out.Verdict, out.Message = Failed, fmt.Sprintf("%s failed: %s", ro.Where, ro.FailureMessage())
		return out
	case ro.DeployedBefore:
		out.Verdict, out.Message = Resyncing, fmt.Sprintf("%s was deployed; k0rdent re-syncs it now (%s)", ro.Where, ro.reported())
		return out
	}
	elapsed := now.Sub(ro.Started)
	if elapsed >= timeout {
		out.Verdict, out.Message = TimedOut, fmt.Sprintf("%s not deployed within deployTimeout %s (%s)", ro.Where, timeout, ro.reported())
		return out
	}
	out.Verdict, out.Message = Installing, ro.Where+" is being installed"
	if ro.State != nil && ro.Current {
		out.Message += ": state " + string(ro.State.State)
	}
	if ro.StaleHash {
		out.Message += ": k0rdent still reports the configuration deployed before the change (lastDeployedHash unchanged)"
	}
	out.RequeueAfter = timeout - elapsed
	if ro.State != nil && !ro.Current && !ro.StaleHash {
		out.RequeueAfter = min(out.RequeueAfter, settle-elapsed)
	}
	return out
}

// MarkDeployed records on ss that its current rollout was deployed. It returns ss as it was before,
// the base of a merge patch, or nil when there is nothing to record (no rollout stamp, or recorded
// already).
func MarkDeployed(ss *k0rdentv1beta1.ServiceSet) (base *k0rdentv1beta1.ServiceSet) {
	stamp := ss.Annotations[owned.AnnotationRolloutStarted]
	if stamp == "" || ss.Annotations[owned.AnnotationRolloutDeployed] == stamp {
		return nil
	}
	base = ss.DeepCopy()
	ss.Annotations[owned.AnnotationRolloutDeployed] = stamp
	return base
}
