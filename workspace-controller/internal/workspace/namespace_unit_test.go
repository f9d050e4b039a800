package workspace

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/childns"
)

// TestTerminatingReleaseNamespaceIsOneRule: a ws-<name> still being deleted makes the workspace wait
// Pending with ReleaseNamespaceTerminating, whatever the pass did before it found it; an admission the
// workspace holds stays held, and the pass comes back after the unreachable retry.
func TestTerminatingReleaseNamespaceIsOneRule(t *testing.T) {
	r := &Reconciler{Options: Options{UnreachableRetry: 7 * time.Second}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ws-nb"}}
	for _, tc := range []struct {
		name      string
		phase     workspacesv1.WorkspacePhase
		admission *workspacesv1.Admission
	}{
		{"not admitted", workspacesv1.PhasePending, nil},
		{"admitted", workspacesv1.PhaseDeploying, &workspacesv1.Admission{Cluster: "team-a/gpu", GPUs: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "nb", Generation: 1}}
			ws.Status.Phase, ws.Status.Admission = tc.phase, tc.admission
			s := newScope(ws, time.Now())
			out := r.releaseNamespaceStops(s, childns.Outcome{Kind: childns.Terminating, Namespace: ns})
			if !out.stop || out.requeueAfter != 7*time.Second {
				t.Fatalf("step result %+v, want a stop retried after 7s", out)
			}
			s.finish()
			if ws.Status.Phase != workspacesv1.PhasePending {
				t.Errorf("phase %s, want Pending", ws.Status.Phase)
			}
			c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReleaseNamespaceReadyCondition)
			if c == nil || c.Reason != workspacesv1.ReasonReleaseNamespaceTerminating {
				t.Errorf("ReleaseNamespaceReady %+v, want reason ReleaseNamespaceTerminating", c)
			}
			if (ws.Status.Admission == nil) != (tc.admission == nil) {
				t.Errorf("admission %+v, want %+v kept", ws.Status.Admission, tc.admission)
			}
		})
	}
}
