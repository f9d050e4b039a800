package workspace

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// TestRetryRequest: a retry is asked while the annotation is set and differs from the value last
// handled; an empty or handled value asks nothing.
func TestRetryRequest(t *testing.T) {
	for _, c := range []struct {
		annotation, handled string
		want                bool
	}{
		{"", "", false},
		{"", "2026-12-04T10:00:00Z", false},
		{"2026-12-04T10:00:00Z", "", true},
		{"2026-12-04T10:00:00Z", "2026-12-04T10:00:00Z", false},
		{"2026-12-04T11:00:00Z", "2026-12-04T10:00:00Z", true},
	} {
		ws := &workspacesv1.WorkspaceDeployment{}
		if c.annotation != "" {
			ws.Annotations = map[string]string{workspacesv1.RetryRequestedAtAnnotation: c.annotation}
		}
		ws.Status.LastHandledRetryAt = c.handled
		if v, got := retryRequest(ws); got != c.want || (got && v != c.annotation) {
			t.Errorf("annotation %q, handled %q: %q, %v; want %v", c.annotation, c.handled, v, got, c.want)
		}
	}
}

// TestRetryOnlyFailed: a new value on a workspace that is not Failed is recorded and changes nothing
// else; a handled value on a Failed workspace leaves it Failed; a new one takes it out of Failed, drops
// its failure context and starts a new rollout.
func TestRetryOnlyFailed(t *testing.T) {
	failed := workspacesv1.WorkspaceDeploymentStatus{Phase: workspacesv1.PhaseFailed, LastHandledRetryAt: "1",
		FailureContext: &workspacesv1.FailureContext{PhaseWhenFailed: workspacesv1.PhaseDeploying, Reason: workspacesv1.ReasonHelmReleaseFailed}}
	for _, c := range []struct {
		name       string
		status     workspacesv1.WorkspaceDeploymentStatus
		annotation string
		phase      workspacesv1.WorkspacePhase
		retrying   bool
	}{
		{"running, new value", workspacesv1.WorkspaceDeploymentStatus{Phase: workspacesv1.PhaseRunning, LastHandledRetryAt: "1"}, "2",
			workspacesv1.PhaseRunning, false},
		{"failed, handled value", failed, "1", workspacesv1.PhaseFailed, false},
		{"failed, new value", failed, "2", workspacesv1.PhasePending, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Name: "ws", Namespace: "team",
				Annotations: map[string]string{workspacesv1.RetryRequestedAtAnnotation: c.annotation}}, Status: *c.status.DeepCopy()}
			r := &Reconciler{Recorder: events.NewFakeRecorder(10)}
			s := newScope(ws, time.Now())
			r.retry(s)
			if ws.Status.Phase != c.phase || s.prev.Phase != c.phase || s.retrying != c.retrying {
				t.Errorf("phase %s (prev %s), retrying %v; want %s, %v", ws.Status.Phase, s.prev.Phase, s.retrying, c.phase, c.retrying)
			}
			if ws.Status.LastHandledRetryAt != c.annotation {
				t.Errorf("lastHandledRetryAt %q, want %q", ws.Status.LastHandledRetryAt, c.annotation)
			}
			if c.retrying && (ws.Status.FailureContext != nil || s.prev.FailureContext != nil) {
				t.Errorf("failure context kept: %+v", ws.Status.FailureContext)
			}
			if !c.retrying && c.phase == workspacesv1.PhaseFailed && ws.Status.FailureContext == nil {
				t.Error("failure context dropped without a retry")
			}
		})
	}
}

// setRetry sets the retry annotation, as a tenant would with kubectl annotate --overwrite.
func setRetry(t *testing.T, ws *workspacesv1.WorkspaceDeployment, value string) {
	t.Helper()
	base := ws.DeepCopy()
	if ws.Annotations == nil {
		ws.Annotations = map[string]string{}
	}
	ws.Annotations[workspacesv1.RetryRequestedAtAnnotation] = value
	must(t, k8s.Patch(ctxT(t), ws, client.MergeFrom(base)))
}

// TestRetryAFailedWorkspace: a workspace whose release failed leaves Failed when the retry annotation
// is set: its failure context and Stalled go, it is Deploying again, its ServiceSet gets a new rollout,
// and the value is recorded. Deployed then, it runs. Failed again, the handled value left on it does
// not retry it; a new value does, once.
func TestRetryAFailedWorkspace(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("retry")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	ssKey := client.ObjectKeyFromObject(waitServiceSet(t, ws))
	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateFailed, "oom")
	ws = waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonHelmReleaseFailed)
	firstRollout := waitServiceSet(t, ws).Annotations[owned.AnnotationRolloutStarted]

	setRetry(t, ws, "first")
	eventually(t, "the retry handled", func() error {
		ws = getWS(t, key)
		if ws.Status.LastHandledRetryAt != "first" || ws.Status.Phase == workspacesv1.PhaseFailed {
			return fmt.Errorf("phase %s, lastHandledRetryAt %q", ws.Status.Phase, ws.Status.LastHandledRetryAt)
		}
		return nil
	})
	if ws.Status.FailureContext != nil || meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.StalledCondition) != nil {
		t.Errorf("failure context %+v, conditions %+v", ws.Status.FailureContext, ws.Status.Conditions)
	}
	// Admitted and deploying again; the failure k0rdent reported before the retry belongs to the
	// previous rollout until the settle time has passed.
	if ws.Status.Phase != workspacesv1.PhaseDeploying || ws.Status.Admission == nil {
		t.Errorf("phase %s, admission %+v; want Deploying and admitted", ws.Status.Phase, ws.Status.Admission)
	}
	ss := waitServiceSet(t, ws)
	if ss.Annotations[owned.AnnotationRolloutStarted] == firstRollout {
		t.Errorf("no new rollout: %s", firstRollout)
	}
	// k0rdent's new state must carry a later transition time than the failure it reported.
	eventually(t, "a second since the failure was reported", func() error {
		if time.Now().Truncate(time.Second).After(ss.Status.Services[0].LastStateTransitionTime.Time) {
			return nil
		}
		return fmt.Errorf("same second")
	})
	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)

	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateFailed, "oom again")
	ws = waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonHelmReleaseFailed)
	// The handled value is still on the workspace: the pass that k0rdent's next report brings keeps it
	// Failed, with the new message.
	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateFailed, "oom a third time")
	eventually(t, "the new failure reported, still Failed", func() error {
		ws = getWS(t, key)
		if ws.Status.Phase != workspacesv1.PhaseFailed || ws.Status.LastHandledRetryAt != "first" {
			return fmt.Errorf("phase %s, lastHandledRetryAt %q", ws.Status.Phase, ws.Status.LastHandledRetryAt)
		}
		return contains(ws.Status.Message, "oom a third time")
	})
	setRetry(t, ws, "second")
	eventually(t, "the second retry handled", func() error {
		ws = getWS(t, key)
		if ws.Status.LastHandledRetryAt != "second" || ws.Status.Phase == workspacesv1.PhaseFailed {
			return fmt.Errorf("phase %s, lastHandledRetryAt %q", ws.Status.Phase, ws.Status.LastHandledRetryAt)
		}
		return nil
	})
	eventually(t, "one Retrying event per value", func() error {
		var notes []string
		for _, e := range workspaceEvents(t, key) {
			if e.Reason == workspacesv1.ReasonRetrying {
				notes = append(notes, e.Note)
			}
		}
		if len(notes) != 2 {
			return fmt.Errorf("Retrying events: %q", notes)
		}
		return nil
	})
}
