package release

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

const settle = 30 * time.Second

var started = time.Date(2026, 1, 2, 3, 4, 5, 500_000_000, time.UTC)

// servedSet is the workspace's ServiceSet with a rollout started at started and, unless state is
// empty, the release's state since at.
func servedSet(ws *workspacesv1.WorkspaceDeployment, state k0rdentv1beta1.ServiceDeploymentState, at time.Time) *k0rdentv1beta1.ServiceSet {
	ss := &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kcm-system", Name: "ss",
		Annotations: map[string]string{owned.AnnotationRolloutStarted: Stamp(started)}}}
	ss.Status.Services = []k0rdentv1beta1.ServiceState{{Name: "other", Namespace: "other", State: k0rdentv1beta1.ServiceStateFailed}}
	if state != "" {
		t := metav1.NewTime(at)
		ss.Status.Services = append(ss.Status.Services, k0rdentv1beta1.ServiceState{
			Name: owned.ReleaseName(ws), Namespace: owned.LocalReleaseNamespace(ws.Name), State: state,
			FailureMessage: "boom", LastStateTransitionTime: &t})
	}
	return ss
}

func TestReadRollout(t *testing.T) {
	ws := testInput().Workspace
	now := started.Add(10 * time.Second)

	ro := ReadRollout(servedSet(ws, "", time.Time{}), ws, now, settle)
	if ro.State != nil || ro.Current || ro.DeployedBefore || !ro.Started.Equal(started) {
		t.Errorf("no state: %+v", ro)
	}
	if !strings.Contains(ro.Where, owned.ReleaseName(ws)) || !strings.Contains(ro.Where, "ServiceSet kcm-system/ss") {
		t.Errorf("where %q", ro.Where)
	}

	// KCM reports times to the second: a state of the rollout's second is the rollout's.
	ro = ReadRollout(servedSet(ws, k0rdentv1beta1.ServiceStateDeployed, started.Truncate(time.Second)), ws, now, settle)
	if ro.State == nil || ro.State.State != k0rdentv1beta1.ServiceStateDeployed || !ro.Current || !ro.Deployed() || ro.Failed() {
		t.Errorf("state of the rollout's second: %+v", ro)
	}
	// ... unless it is the state the rollout found when it started (a change made in the second the
	// previous rollout was reported deployed): the previous one's, until the settle time passed.
	found := servedSet(ws, k0rdentv1beta1.ServiceStateDeployed, started.Truncate(time.Second))
	found.Annotations[owned.AnnotationRolloutBaseTransition] = transitionStamp(&found.Status.Services[1])
	if ro = ReadRollout(found, ws, now, settle); ro.Current || ro.Deployed() {
		t.Errorf("the state the rollout found taken for current: %+v", ro)
	}
	if ro = ReadRollout(found, ws, started.Add(settle), settle); !ro.Current {
		t.Errorf("the state the rollout found not trusted once settled: %+v", ro)
	}
	found.Annotations[owned.AnnotationRolloutBaseTransition] = transitionStamp(&found.Status.Services[1])[:17] + "00Z"
	if ro = ReadRollout(found, ws, now, settle); !ro.Current {
		t.Errorf("a state newer than the one the rollout found not taken for current: %+v", ro)
	}
	// A state from before the rollout is the previous one's, until the settle time passed.
	old := started.Add(-time.Minute)
	if ro = ReadRollout(servedSet(ws, k0rdentv1beta1.ServiceStateDeployed, old), ws, now, settle); ro.Current || ro.Deployed() {
		t.Errorf("older state taken for current: %+v", ro)
	}
	if ro = ReadRollout(servedSet(ws, k0rdentv1beta1.ServiceStateDeployed, old), ws, started.Add(settle), settle); !ro.Current {
		t.Errorf("older state not trusted once settled: %+v", ro)
	}
	// A state without a time is current.
	ss := servedSet(ws, k0rdentv1beta1.ServiceStateFailed, old)
	ss.Status.Services[1].LastStateTransitionTime = nil
	if ro = ReadRollout(ss, ws, now, settle); !ro.Current || !ro.Failed() || ro.FailureMessage() != "boom" {
		t.Errorf("state without a time: %+v", ro)
	}

	// Without a stamp the rollout starts now, and nothing was deployed before.
	ss = servedSet(ws, k0rdentv1beta1.ServiceStateProvisioning, old)
	ss.Annotations = nil
	if ro = ReadRollout(ss, ws, now, settle); !ro.Started.Equal(now) || ro.DeployedBefore || ro.Current {
		t.Errorf("without a stamp: %+v", ro)
	}

	ss = servedSet(ws, k0rdentv1beta1.ServiceStateProvisioning, now)
	ss.Annotations[owned.AnnotationRolloutDeployed] = Stamp(started)
	if ro = ReadRollout(ss, ws, now, settle); !ro.DeployedBefore {
		t.Errorf("deployed stamp not read: %+v", ro)
	}
	ss.Annotations[owned.AnnotationRolloutDeployed] = Stamp(started.Add(-time.Millisecond))
	if ro = ReadRollout(ss, ws, now, settle); ro.DeployedBefore {
		t.Errorf("a previous rollout's deployed stamp taken for this one: %+v", ro)
	}
}

func TestRolloutReadiness(t *testing.T) {
	ws := testInput().Workspace
	const timeout = 5 * time.Minute
	now := started.Add(10 * time.Second)
	read := func(state k0rdentv1beta1.ServiceDeploymentState, at time.Time, deployed bool, now time.Time) Readiness {
		ss := servedSet(ws, state, at)
		if deployed {
			ss.Annotations[owned.AnnotationRolloutDeployed] = ss.Annotations[owned.AnnotationRolloutStarted]
		}
		return ReadRollout(ss, ws, now, settle).Readiness(now, timeout, settle)
	}
	for name, c := range map[string]struct {
		got       Readiness
		verdict   Verdict
		message   string
		requeueIn time.Duration
	}{
		"deployed":             {read(k0rdentv1beta1.ServiceStateDeployed, now, false, now), Deployed, " is deployed", 0},
		"failed":               {read(k0rdentv1beta1.ServiceStateFailed, now, false, now), Failed, " failed: boom", 0},
		"failed before":        {read(k0rdentv1beta1.ServiceStateFailed, started.Add(-time.Minute), false, now), Installing, " is being installed", settle - 10*time.Second},
		"resyncing":            {read(k0rdentv1beta1.ServiceStateProvisioning, now, true, now), Resyncing, " was deployed; k0rdent re-syncs it now (state Provisioning)", 0},
		"resyncing, no state":  {read("", now, true, now), Resyncing, " re-syncs it now (no state reported)", 0},
		"failed after deploy":  {read(k0rdentv1beta1.ServiceStateFailed, now, true, now), Failed, " failed: boom", 0},
		"installing":           {read(k0rdentv1beta1.ServiceStatePending, now, false, now), Installing, " is being installed: state Pending", timeout - 10*time.Second},
		"installing, no state": {read("", now, false, now), Installing, " is being installed", timeout - 10*time.Second},
		"timed out":            {read(k0rdentv1beta1.ServiceStateProvisioning, now, false, started.Add(timeout)), TimedOut, " not deployed within deployTimeout 5m0s (state Provisioning)", 0},
		"timed out, no state":  {read("", now, false, started.Add(timeout+time.Hour)), TimedOut, "(no state reported)", 0},
	} {
		if c.got.Verdict != c.verdict || !strings.HasSuffix(c.got.Message, c.message) || !strings.HasPrefix(c.got.Message, "release ") {
			t.Errorf("%s: %v %q, want %v ending %q", name, c.got.Verdict, c.got.Message, c.verdict, c.message)
		}
		if c.got.RequeueAfter != c.requeueIn {
			t.Errorf("%s: requeue after %s, want %s", name, c.got.RequeueAfter, c.requeueIn)
		}
		if !c.got.Deadline.Equal(started.Add(timeout)) {
			t.Errorf("%s: deadline %s", name, c.got.Deadline)
		}
	}
	ss := servedSet(ws, k0rdentv1beta1.ServiceStateFailed, now)
	ss.Status.Services[1].FailureMessage = ""
	if rd := ReadRollout(ss, ws, now, settle).Readiness(now, timeout, settle); !strings.HasSuffix(rd.Message, "failed: no message from k0rdent") {
		t.Errorf("failure without a message: %q", rd.Message)
	}
}

func TestMarkDeployed(t *testing.T) {
	ss := &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
	if MarkDeployed(ss) != nil {
		t.Error("a ServiceSet without a rollout stamp is marked")
	}
	ss.Annotations[owned.AnnotationRolloutStarted] = "s1"
	base := MarkDeployed(ss)
	if base == nil || ss.Annotations[owned.AnnotationRolloutDeployed] != "s1" {
		t.Fatalf("not marked: %v", ss.Annotations)
	}
	if _, ok := base.Annotations[owned.AnnotationRolloutDeployed]; ok {
		t.Error("the patch base is not the ServiceSet as it was")
	}
	if MarkDeployed(ss) != nil {
		t.Error("marked twice")
	}
	ss.Annotations[owned.AnnotationRolloutStarted] = "s2"
	if MarkDeployed(ss) == nil || ss.Annotations[owned.AnnotationRolloutDeployed] != "s2" {
		t.Error("a new rollout is not marked")
	}
}
