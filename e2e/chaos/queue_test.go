package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	chaoslib "github.com/exalsius/exalsius-operator/e2e/internal/chaos"
)

// queueSnapshot is, per ClusterDeployment, the round's workspaces waiting in its GPU queue at one
// moment, in queue order. Every workspace of the suite has priority 0, so the order is the order of
// creation, which the suite makes the order of the names (r<round>-w<index>, created one after the
// other; on a tie of creation seconds the gate orders by name too).
type queueSnapshot map[string][]string

// takeQueue records the round's GPU queues once: the first call of a round wins (a fault that holds,
// such as the cordon, takes them before it ends; the round takes them after any other fault).
func (s *suite) takeQueue(ctx context.Context, r int) {
	s.mu.Lock()
	_, taken := s.queues[r]
	s.mu.Unlock()
	if taken {
		return
	}
	list, err := s.roundWorkspaces(ctx, r)
	if err != nil {
		s.progress("round %d: queue not taken: %v", r, err)
		return
	}
	q := queueSnapshot{}
	for i := range list {
		ws := &list[i]
		if !queued(ws) {
			continue
		}
		cd := ws.Spec.ClusterDeploymentRef.Name
		q[cd] = append(q[cd], ws.Name)
	}
	for cd := range q {
		sort.Strings(q[cd])
	}
	s.mu.Lock()
	if s.queues == nil {
		s.queues = map[int]queueSnapshot{}
	}
	if _, taken := s.queues[r]; !taken {
		s.queues[r] = q
	}
	s.mu.Unlock()
	var parts []string
	for cd, names := range q {
		parts = append(parts, fmt.Sprintf("%s: %d waiting", cd, len(names)))
	}
	sort.Strings(parts)
	s.progress("round %d: GPU queues taken (%s)", r, strings.Join(parts, ", "))
}

// queued reports whether a workspace waits in its cluster's GPU queue: Waiting for GPUs, not for a
// quota (the cohort's quotas, when set, leave the chaos namespace the whole fleet once the second
// team's workspaces are gone), and not being deleted.
func queued(ws *workspacesv1.WorkspaceDeployment) bool {
	return ws.DeletionTimestamp.IsZero() && ws.Status.Phase == workspacesv1.PhaseWaiting && ws.Status.ResolvedResources != nil &&
		ws.Status.ResolvedResources.PerReplica.GPUCount != nil && *ws.Status.ResolvedResources.PerReplica.GPUCount > 0
}

// checkQueue checks, after the round converged, that the waiters of the snapshot were admitted in
// queue order. The gate holds the requests of the waiters ahead of a workspace (the same GPUs of the
// same cluster) where they fit now; a request ahead that fits nowhere now holds nothing, so a smaller
// one behind may use GPUs it cannot (backfill). Each of the suite's clusters has one GPU node, so a
// workspace ahead that asks no more GPUs than one behind would have fit wherever that one went: for
// such pairs, the one behind admitted while the one ahead still waits is an inversion, and so is one
// admitted clearly before it. Admission times are whole seconds and are the start of the pass that
// admitted (a pass may wait for the gate's lock behind another), so "clearly" is more than
// chaoslib.AdmissionSlack. Workspaces deleted during the round are left out.
func (s *suite) checkQueue(ctx context.Context, r int, deleted map[string]bool) {
	s.mu.Lock()
	q := s.queues[r]
	s.mu.Unlock()
	if len(q) == 0 {
		return
	}
	list, err := s.roundWorkspaces(ctx, r)
	if err != nil {
		s.finding(r, "queue order: listing workspaces: %v", err)
		return
	}
	now := map[string]*workspacesv1.WorkspaceDeployment{}
	for i := range list {
		now[list[i].Name] = &list[i]
	}
	for _, cd := range sortedClusters(q) {
		for _, inv := range chaoslib.Inversions(q[cd], now, deleted) {
			s.finding(r, "queue order on %s: %s", cd, inv)
			s.mu.Lock()
			s.fig.QueueInversions++
			s.mu.Unlock()
		}
	}
}

func sortedClusters(q queueSnapshot) []string {
	cds := make([]string, 0, len(q))
	for cd := range q {
		cds = append(cds, cd)
	}
	sort.Strings(cds)
	return cds
}
