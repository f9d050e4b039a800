package workspace

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// The chain stops at the first finding: Failed when a human must act, Pending otherwise (with the
// retry when no watch sees the input); an installed workspace only records whenInstalled and goes on;
// resolved runs only when every check passed.
func TestRunChecks(t *testing.T) {
	pass := func(context.Context, *scope) (*finding, error) { return nil, nil }
	found := func(f finding) func(context.Context, *scope) (*finding, error) {
		return func(context.Context, *scope) (*finding, error) { return &f, nil }
	}
	never := func(context.Context, *scope) (*finding, error) {
		t.Fatal("a check after a finding ran")
		return nil, nil
	}
	installed := func(s *scope) {
		s.ws.Status.ServiceSetName = "cd-ws-nb"
		s.ws.Status.Phase = workspacesv1.PhaseRunning
		s.prev = *s.ws.Status.DeepCopy()
	}
	soft := &finding{condition: "C", reason: "Soft", message: "left as it is"}
	for _, c := range []struct {
		name      string
		checks    []check
		setup     func(*scope)
		wantStop  bool
		retry     time.Duration
		verdict   verdictKind
		condition string
		resolved  bool
	}{
		{"all pass", []check{{name: "a", run: pass}, {name: "b", run: pass}}, nil, false, 0, verdictNone, "", true},
		{"pending", []check{{name: "a", run: found(finding{condition: "C", reason: "Missing", message: "m", retry: time.Minute})}, {name: "b", run: never}},
			nil, true, time.Minute, verdictPending, "Missing", false},
		{"failed", []check{{name: "a", run: pass}, {name: "b", run: found(finding{condition: "C", reason: "Broken", message: "m", fail: true})}},
			nil, true, 0, verdictFailed, "Broken", false},
		{"installed goes on", []check{{name: "a", run: found(finding{condition: "C", reason: "Broken", fail: true, whenInstalled: soft})}, {name: "b", run: never}},
			installed, false, 0, verdictNone, "Soft", false},
		{"not installed fails", []check{{name: "a", run: found(finding{condition: "C", reason: "Broken", fail: true, whenInstalled: soft})}},
			nil, true, 0, verdictFailed, "Broken", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newScope(&workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "nb", Generation: 1}}, time.Now())
			if c.setup != nil {
				c.setup(s)
			}
			resolved := false
			out, err := runChecks(context.Background(), s, c.checks, func() { resolved = true })
			if err != nil {
				t.Fatal(err)
			}
			if out.stop != c.wantStop || out.requeueAfter != c.retry || resolved != c.resolved || s.obs.verdict.kind != c.verdict {
				t.Fatalf("stop %v after %v, resolved %v, verdict %v; want %v after %v, %v, %v", out.stop, out.requeueAfter, resolved, s.obs.verdict.kind,
					c.wantStop, c.retry, c.resolved, c.verdict)
			}
			if cond := meta.FindStatusCondition(s.ws.Status.Conditions, "C"); c.condition != "" && (cond == nil || cond.Reason != c.condition || cond.Status != metav1.ConditionFalse) {
				t.Fatalf("condition %+v, want False/%s", cond, c.condition)
			}
		})
	}
	_, err := runChecks(context.Background(), newScope(&workspacesv1.WorkspaceDeployment{}, time.Now()),
		[]check{{name: "reads", run: func(context.Context, *scope) (*finding, error) { return nil, errors.New("boom") }}}, nil)
	if err == nil || err.Error() != "reads: boom" {
		t.Fatalf("error %v, want it named after the check", err)
	}
}
