package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
)

// Borrowing and reclaim by stop. When the run has the reclaim fault, the chaos namespace shares a
// cohort with a second team's namespace (teamNS): the chaos namespace is guaranteed a third of the
// fleet's GPUs and may borrow the rest, the second team is guaranteed the rest and borrows nothing.
// Every round's rollout then fills the fleet by borrowing the second team's idle guarantee, whatever
// its fault. In the reclaim round the second team claims its guarantee: its workspaces arrive on
// cluster a while the chaos namespace holds every GPU, the chaos namespace's borrowers get their
// notice, the workspace controller is killed between the notice and the stop, and the borrowers are
// stopped (reason Reclaimed, their spec untouched), the second team's workspaces run on the freed
// GPUs, and, once those are deleted, the borrowers come back through the queue (the round's
// convergence). The sampler counts the second team's admissions too: a reclaim never double-books.

const (
	// teamNS is the second team's namespace.
	teamNS = "chaos-team-b"
	// cohortName is the cohort of the chaos namespace and teamNS.
	cohortName = "chaos"
	// reclaimGrace is teamNS's reclaimGracePeriod: the notice a borrower gets.
	reclaimGrace = 15 * time.Second
	// noticeBound bounds the wait for the first notice once the second team's workspaces exist.
	noticeBound = 2 * time.Minute
)

// hasFault reports whether the run injects the fault.
func (s *suite) hasFault(fault string) bool {
	for _, f := range s.set.faults {
		if f == fault {
			return true
		}
	}
	return false
}

// teamPlan is the second team's workspaces in round r: two of 2 GPUs on cluster a, within its
// guarantee. A reclaim stops only admissions that borrowed (status.admission.borrowedGPUs): the
// chaos namespace's admissions within its own guarantee (a third of the fleet) may all be on one
// cluster, so the team asks no more of a cluster than the chaos namespace must have borrowed there
// (cluster a's GPUs less the chaos namespace's guarantee).
func (s *suite) teamPlan(r int) []planned {
	return []planned{
		{name: fmt.Sprintf("r%02d-b0", r), cluster: cdName("a"), gpus: 2},
		{name: fmt.Sprintf("r%02d-b1", r), cluster: cdName("a"), gpus: 2},
	}
}

// guarantees returns the GPUs the chaos namespace and the second team are guaranteed.
func (s *suite) guarantees() (chaos, team int64) {
	fleet := s.set.gpusA + s.set.gpusB
	chaos = max(1, fleet/3)
	return chaos, fleet - chaos
}

// setupCohort labels the chaos namespace and the second team's into one cohort, lets the second team
// place workspaces on the chaos namespace's clusters, and gives both their WorkspaceQuota.
func (s *suite) setupCohort(ctx context.Context) {
	t := s.t
	own, theirs := s.guarantees()
	var asked int64
	for _, p := range s.teamPlan(0) {
		asked += p.gpus
		if p.gpus > s.gpus[p.cluster] {
			t.Fatalf("the second team's workspace asks %d GPUs of %s, which has %d", p.gpus, p.cluster, s.gpus[p.cluster])
		}
	}
	if borrowed := s.gpus[cdName("a")] - own; asked > borrowed {
		t.Fatalf("the second team asks %d GPUs of %s, where the chaos namespace surely borrows only %d: raise its GPUs", asked, cdName("a"), borrowed)
	}
	if asked > theirs {
		t.Fatalf("the second team asks %d GPUs, more than its guarantee of %d: raise the clusters' GPUs", asked, theirs)
	}
	if err := k0rdentsim.Ensure(ctx, s.c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamNS}}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{s.ns, teamNS} {
		if err := retry(ctx, time.Minute, func(ctx context.Context) error {
			var n corev1.Namespace
			if err := s.c.Get(ctx, types.NamespacedName{Name: ns}, &n); err != nil {
				return err
			}
			patch := client.MergeFrom(n.DeepCopy())
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[workspacesv1.CohortLabel] = cohortName
			if ns == s.ns {
				if n.Annotations == nil {
					n.Annotations = map[string]string{}
				}
				n.Annotations[workspacesv1.AllowWorkspacesFromAnnotation] = teamNS
			}
			return s.c.Patch(ctx, &n, patch)
		}); err != nil {
			t.Fatalf("labelling namespace %s: %v", ns, err)
		}
	}
	fleet, zero, grace := s.set.gpusA+s.set.gpusB, int64(0), metav1.Duration{Duration: reclaimGrace}
	borrow := fleet - own
	quotas := []*workspacesv1.WorkspaceQuota{
		{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "chaos"}, Spec: workspacesv1.WorkspaceQuotaSpec{
			GPUs: []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: fleet, Guaranteed: &own, BorrowingLimit: &borrow}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: teamNS, Name: "team-b"}, Spec: workspacesv1.WorkspaceQuotaSpec{
			GPUs:               []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: theirs, Guaranteed: &theirs, BorrowingLimit: &zero}},
			ReclaimGracePeriod: &grace}},
	}
	if err := k0rdentsim.Ensure(ctx, s.c, quotas[0], quotas[1]); err != nil {
		t.Fatal(err)
	}
	s.progress("cohort %s: %s guaranteed %d GPUs, borrows up to %d; %s guaranteed %d, reclaim grace %s", cohortName, s.ns, own, borrow, teamNS, theirs, reclaimGrace)
}

// teamWorkspaces lists the second team's workspaces of round r.
func (s *suite) teamWorkspaces(ctx context.Context, r int) ([]workspacesv1.WorkspaceDeployment, error) {
	return s.workspacesOfRound(ctx, teamNS, r)
}

// reclaimStopped reports whether a workspace says a reclaim stopped it: phase Stopped, Ready reason
// Reclaimed, which claims that no pod of its release holds a GPU.
func reclaimStopped(ws *workspacesv1.WorkspaceDeployment) bool {
	if ws.Status.Phase != workspacesv1.PhaseStopped {
		return false
	}
	c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReadyCondition)
	return c != nil && c.Reason == workspacesv1.ReasonReclaimed
}

// reclaim plays the second team claiming its guarantee while the chaos namespace borrows it (see the
// top of this file).
func (s *suite) reclaim(ctx context.Context, r int) error {
	byName := map[string]planned{}
	for _, p := range s.plan(r) {
		byName[p.name] = p
	}
	// The chaos namespace fills every cluster first, so that the second team's GPUs are lent out.
	full, last := poll(ctx, s.set.converge, func(ctx context.Context) (bool, string) {
		list, err := s.roundWorkspaces(ctx, r)
		if err != nil {
			return false, err.Error()
		}
		got := admittedGPUs(list, byName)
		return got[cdName("a")] == s.gpus[cdName("a")] && got[cdName("b")] == s.gpus[cdName("b")], "admitted " + fmtGPUs(got)
	})
	if !full {
		return fmt.Errorf("the round did not fill the clusters within %s (%s): nothing would be reclaimed", s.set.converge, last)
	}
	team := s.teamPlan(r)
	for _, p := range team {
		obj := s.workspaceObj(p)
		obj.Namespace = teamNS
		if err := retry(ctx, s.set.converge, func(ctx context.Context) error {
			return client.IgnoreAlreadyExists(s.c.Create(ctx, obj.DeepCopy()))
		}); err != nil {
			return fmt.Errorf("creating %s/%s: %w", teamNS, p.name, err)
		}
	}
	defer s.deleteTeam(ctx, r, team)
	s.progress("round %d: %s claims its guarantee with %d workspaces", r, teamNS, len(team))

	// The controller is killed between a notice and its stop: nothing may be lost.
	var noticed string
	seen, last := poll(ctx, noticeBound, func(ctx context.Context) (bool, string) {
		list, err := s.roundWorkspaces(ctx, r)
		if err != nil {
			return false, err.Error()
		}
		for i := range list {
			if n := list[i].Status.Reclaim; n != nil && n.StoppedAt == nil && !reclaimStopped(&list[i]) {
				noticed = fmt.Sprintf("%s (stop at %s, for %s)", list[i].Name, n.At.UTC().Format("15:04:05"), n.For)
				return true, ""
			}
		}
		return false, "no workspace of the round told to give GPUs back"
	})
	if !seen {
		s.finding(r, "no reclaim notice within %s of the second team's workspaces: %s", noticeBound, last)
	} else {
		s.progress("round %d: notice to %s; killing the workspace controller before the stop", r, noticed)
		c := s.st.Components["workspace-controller"]
		if err := c.Kill(); err != nil {
			return err
		}
		if err := c.Start(ctx); err != nil {
			return err
		}
	}

	ok, last := poll(ctx, s.set.converge, func(ctx context.Context) (bool, string) {
		list, err := s.teamWorkspaces(ctx, r)
		if err != nil {
			return false, err.Error()
		}
		var pending []string
		for _, ws := range list {
			if ws.Status.Phase != workspacesv1.PhaseRunning {
				pending = append(pending, fmt.Sprintf("%s %s %q", ws.Name, ws.Status.Phase, ws.Status.Message))
			}
		}
		if len(list) < len(team) {
			pending = append(pending, fmt.Sprintf("only %d of %d exist", len(list), len(team)))
		}
		return len(pending) == 0, strings.Join(pending, "; ")
	})
	if !ok {
		s.finding(r, "the second team's workspaces within its guarantee not Running within %s: %s", s.set.converge, last)
	}
	reclaimed := s.checkReclaimed(ctx, r)

	// While the second team runs, no reclaimed workspace may hold a GPU on its child.
	s.sampleStopped(ctx, r, reclaimed, reclaimStopped, "Reclaimed")
	return nil
}

// deleteTeam deletes the second team's workspaces of round r and waits until they are gone: the
// workspaces they reclaimed GPUs from come back through the queue (the round's convergence).
func (s *suite) deleteTeam(ctx context.Context, r int, team []planned) {
	s.progress("round %d: deleting %s's workspaces", r, teamNS)
	for _, p := range team {
		if err := retry(ctx, s.set.converge, func(ctx context.Context) error {
			return client.IgnoreNotFound(s.c.Delete(ctx, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: teamNS, Name: p.name}}))
		}); err != nil {
			s.finding(r, "deleting %s/%s: %v", teamNS, p.name, err)
		}
	}
	gone, last := poll(ctx, s.set.converge, func(ctx context.Context) (bool, string) {
		list, err := s.teamWorkspaces(ctx, r)
		if err != nil {
			return false, err.Error()
		}
		if len(list) > 0 {
			return false, fmt.Sprintf("%d still there, e.g. %s (%s)", len(list), list[0].Name, list[0].Status.Phase)
		}
		return true, ""
	})
	if !gone {
		s.finding(r, "the second team's workspaces not deleted within %s: %s", s.set.converge, last)
		s.mu.Lock()
		s.fig.Lost++
		s.mu.Unlock()
	}
}

// checkReclaimed checks the round's workspaces a reclaim stopped: each names the second team, kept
// its spec (the reclaim never writes spec.stopped), and says when it was stopped; at least one was
// stopped. It returns their names.
func (s *suite) checkReclaimed(ctx context.Context, r int) []string {
	list, err := s.roundWorkspaces(ctx, r)
	if err != nil {
		s.finding(r, "listing the reclaimed workspaces: %v", err)
		return nil
	}
	var names []string
	for i := range list {
		ws := &list[i]
		if !reclaimStopped(ws) {
			continue
		}
		names = append(names, ws.Name)
		switch n := ws.Status.Reclaim; {
		case ws.Spec.Stopped:
			s.finding(r, "the reclaim of %s wrote its spec.stopped", ws.Name)
		case n == nil || n.StoppedAt == nil:
			s.finding(r, "workspace %s says Reclaimed without status.reclaim.stoppedAt: %+v", ws.Name, n)
		case !strings.Contains(n.For, teamNS):
			s.finding(r, "workspace %s was reclaimed for %q, not for %s", ws.Name, n.For, teamNS)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		s.finding(r, "the second team's workspaces run, yet no workspace of the round says Reclaimed")
	}
	s.mu.Lock()
	s.fig.Reclaimed += len(names)
	s.mu.Unlock()
	s.progress("round %d: reclaimed %s", r, strings.Join(names, ", "))
	return names
}
