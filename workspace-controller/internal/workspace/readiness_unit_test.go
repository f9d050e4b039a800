package workspace

import (
	"strings"
	"testing"
	"time"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// TestFailedUntilDeadline: a release reported Failed in a rollout never deployed keeps its reason and
// is passed again exactly at the rollout's deadline; at and past the deadline it says DeployTimeout
// and that its unbound replicas hold no GPUs; a rollout deployed before keeps its reason and asks no
// pass; a deadline unknown (no rollout stamp) counts as passed.
func TestFailedUntilDeadline(t *testing.T) {
	now := time.Date(2026, 12, 5, 5, 0, 0, 0, time.UTC)
	const timeout = 15 * time.Minute
	for _, tc := range []struct {
		name           string
		deadline       time.Time
		deployedBefore bool
		wantReason     string
		wantAfter      time.Duration
		wantGivenUp    bool
	}{
		{"within the deadline", now.Add(90 * time.Second), false, workspacesv1.ReasonHelmReleaseFailed, 90 * time.Second, false},
		{"at the deadline", now, false, workspacesv1.ReasonDeployTimeout, 0, true},
		{"past the deadline", now.Add(-time.Hour), false, workspacesv1.ReasonDeployTimeout, 0, true},
		{"no deadline known", time.Time{}, false, workspacesv1.ReasonDeployTimeout, 0, true},
		{"deployed before, within", now.Add(time.Minute), true, workspacesv1.ReasonHelmReleaseFailed, 0, false},
		{"deployed before, past", now.Add(-time.Minute), true, workspacesv1.ReasonHelmReleaseFailed, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, reason, after := failedUntilDeadline(now, tc.deadline, timeout, tc.deployedBefore, "release failed", workspacesv1.ReasonHelmReleaseFailed)
			if reason != tc.wantReason || after != tc.wantAfter {
				t.Errorf("reason %s, pass after %s; want %s, %s", reason, after, tc.wantReason, tc.wantAfter)
			}
			if !strings.HasPrefix(msg, "release failed") {
				t.Errorf("message %q lost k0rdent's word", msg)
			}
			if given := strings.Contains(msg, "hold no GPUs any more"); given != tc.wantGivenUp {
				t.Errorf("message %q: says the GPUs are given up %t, want %t", msg, given, tc.wantGivenUp)
			}
		})
	}
}

// The look at a Deploying workspace comes after DeployingRecheck and at most a fifth later, and a herd
// of workspaces one child event brought back together is spread out after a few looks, instead of
// filling the queue together every DeployingRecheck.
func TestDeployingRecheckSpreadsAHerd(t *testing.T) {
	const d = 2 * time.Minute
	const n = 1000
	at := make([]time.Duration, n) // all brought back at 0
	for look := 0; look < 5; look++ {
		for i := range at {
			next := deployingRecheck(d)
			if next < d || next > d+d/5 {
				t.Fatalf("look after %v, want within [%v, %v]", next, d, d+d/5)
			}
			at[i] += next
		}
	}
	perSecond := map[time.Duration]int{}
	most := 0
	for _, a := range at {
		s := a.Truncate(time.Second)
		perSecond[s]++
		most = max(most, perSecond[s])
	}
	if most > n/10 {
		t.Fatalf("after 5 looks, %d of %d workspaces are looked at in the same second, want at most %d", most, n, n/10)
	}
}
