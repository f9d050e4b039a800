package workspace

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// TestStopDeadline: spec.stopAfter counts from the second after the controller first saw the
// generation (never earlier than the change), applies only to a running generation it has seen, and
// the pass comes back exactly at the deadline unless it comes back sooner anyway.
func TestStopDeadline(t *testing.T) {
	seen := time.Date(2026, 1, 2, 3, 4, 5, 300_000_000, time.UTC)
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	ws.Spec.StopAfter = &metav1.Duration{Duration: time.Minute}
	s := &scope{ws: ws, now: seen}
	s.trackSpecChange()
	c := ws.Status.LastSpecChange
	if c == nil || c.Generation != 3 || !c.Time.Time.Equal(seen.Truncate(time.Second).Add(time.Second)) {
		t.Fatalf("lastSpecChange %+v, want generation 3 at the next full second after %s", c, seen)
	}
	later := &scope{ws: ws, now: seen.Add(10 * time.Second)}
	later.trackSpecChange()
	if !ws.Status.LastSpecChange.Time.Equal(&c.Time) {
		t.Errorf("a pass on the same generation moved lastSpecChange to %s", ws.Status.LastSpecChange.Time)
	}
	deadline, ok := later.stopDeadline()
	if want := c.Time.Add(time.Minute); !ok || !deadline.Equal(want) {
		t.Fatalf("deadline %s %t, want %s", deadline, ok, want)
	}
	if got := later.untilStopDeadline(reconcile.Result{}).RequeueAfter; got != deadline.Sub(later.now) {
		t.Errorf("requeue after %s, want %s", got, deadline.Sub(later.now))
	}
	if got := later.untilStopDeadline(reconcile.Result{RequeueAfter: time.Second}).RequeueAfter; got != time.Second {
		t.Errorf("an earlier requeue became %s", got)
	}
	if got := later.untilStopDeadline(reconcile.Result{RequeueAfter: time.Hour}).RequeueAfter; got != deadline.Sub(later.now) {
		t.Errorf("a later requeue became %s, want the deadline", got)
	}

	for name, mutate := range map[string]func(*workspacesv1.WorkspaceDeployment){
		"stopped":           func(w *workspacesv1.WorkspaceDeployment) { w.Spec.Stopped = true },
		"no stopAfter":      func(w *workspacesv1.WorkspaceDeployment) { w.Spec.StopAfter = nil },
		"zero stopAfter":    func(w *workspacesv1.WorkspaceDeployment) { w.Spec.StopAfter = &metav1.Duration{} },
		"a newer spec":      func(w *workspacesv1.WorkspaceDeployment) { w.Generation = 4 },
		"negative":          func(w *workspacesv1.WorkspaceDeployment) { w.Spec.StopAfter = &metav1.Duration{Duration: -time.Minute} },
		"never seen at all": func(w *workspacesv1.WorkspaceDeployment) { w.Status.LastSpecChange = nil },
	} {
		w := ws.DeepCopy()
		mutate(w)
		s := &scope{ws: w, now: seen.Add(time.Hour)}
		if d, ok := s.stopDeadline(); ok {
			t.Errorf("%s: deadline %s, want none", name, d)
		}
		if got := s.untilStopDeadline(reconcile.Result{}).RequeueAfter; got != 0 {
			t.Errorf("%s: requeue after %s, want none", name, got)
		}
	}
}
