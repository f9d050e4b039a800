package workspace

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// TestStopDeadline: spec.stopAfter counts from the second after the controller first saw the
// generation (never earlier than the change), applies only to a generation it has seen of a workspace
// that holds an admission, and the pass comes back exactly at the deadline unless it comes back sooner
// anyway.
func TestStopDeadline(t *testing.T) {
	seen := time.Date(2026, 1, 2, 3, 4, 5, 300_000_000, time.UTC)
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	ws.Spec.StopAfter = &metav1.Duration{Duration: time.Minute}
	admitted := metav1.NewTime(seen.Add(-time.Hour).Truncate(time.Second))
	ws.Status.Admission = &workspacesv1.Admission{GPUs: 1, AdmittedAt: &admitted}
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
		"not admitted":      func(w *workspacesv1.WorkspaceDeployment) { w.Status.Admission = nil },
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

// TestStopDeadlineStartsAtAdmission: a workspace admitted after its last spec change (it waited for
// GPUs, or was Pending) has its stopAfter clock start at the admission, from the second after the
// recorded (rounded down) admission time; one admitted before keeps counting from the spec change.
func TestStopDeadlineStartsAtAdmission(t *testing.T) {
	changed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	ws.Spec.StopAfter = &metav1.Duration{Duration: time.Minute}
	ws.Status.LastSpecChange = &workspacesv1.SpecChange{Generation: 2, Time: metav1.NewTime(changed)}
	for _, tc := range []struct {
		name     string
		admitted time.Time
		want     time.Time
	}{
		{"admitted an hour after the change", changed.Add(time.Hour), changed.Add(time.Hour + time.Second + time.Minute)},
		{"admitted before the change", changed.Add(-time.Hour), changed.Add(time.Minute)},
		{"admitted in the second of the change", changed, changed.Add(time.Second + time.Minute)},
	} {
		w := ws.DeepCopy()
		at := metav1.NewTime(tc.admitted)
		w.Status.Admission = &workspacesv1.Admission{AdmittedAt: &at}
		s := &scope{ws: w, now: tc.admitted}
		if d, ok := s.stopDeadline(); !ok || !d.Equal(tc.want) {
			t.Errorf("%s: deadline %s %t, want %s", tc.name, d, ok, tc.want)
		}
	}
	// Waiting for GPUs an hour past the spec change: no clock runs, no pass is asked for.
	s := &scope{ws: ws.DeepCopy(), now: changed.Add(time.Hour)}
	if d, ok := s.stopDeadline(); ok {
		t.Errorf("a workspace without an admission has the deadline %s", d)
	}
}

// TestFreedOnStop: the stop's Event claims released GPUs only for an admission that holds some.
func TestFreedOnStop(t *testing.T) {
	for _, tc := range []struct {
		ad      *workspacesv1.Admission
		want    string
		mustNot string
	}{
		{nil, "holds no GPU", "released"},
		{&workspacesv1.Admission{Replicas: 1}, "holds no GPU", "released"},
		{&workspacesv1.Admission{GPUs: 1}, "its 1 GPU is released", ""},
		{&workspacesv1.Admission{GPUs: 4}, "its 4 GPUs are released", ""},
	} {
		got := freedOnStop(tc.ad)
		if !strings.Contains(got, tc.want) || (tc.mustNot != "" && strings.Contains(got, tc.mustNot)) {
			t.Errorf("freedOnStop(%+v) = %q, want %q and not %q", tc.ad, got, tc.want, tc.mustNot)
		}
	}
}
