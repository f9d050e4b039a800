package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
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
// quota (the suite sets none), and not being deleted.
func queued(ws *workspacesv1.WorkspaceDeployment) bool {
	return ws.DeletionTimestamp.IsZero() && ws.Status.Phase == workspacesv1.PhaseWaiting && ws.Status.ResolvedResources != nil &&
		ws.Status.ResolvedResources.PerReplica.GPUCount != nil && *ws.Status.ResolvedResources.PerReplica.GPUCount > 0
}

// checkQueue checks, after the round converged, that the waiters of the snapshot were admitted in
// queue order. The gate holds the requests of the waiters ahead of a workspace (the same GPUs of the
// same cluster), so the one behind may start only when the one ahead has: a workspace admitted while
// one ahead of it still waits is an inversion, and so is one admitted clearly before it. Admission
// times are whole seconds and are the start of the pass that admitted (a pass may wait for the
// gate's lock behind another), so "clearly" is more than admissionSlack. Workspaces deleted during
// the round are left out.
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
		for _, inv := range inversions(q[cd], now, deleted) {
			s.finding(r, "queue order on %s: %s", cd, inv)
			s.mu.Lock()
			s.fig.QueueInversions++
			s.mu.Unlock()
		}
	}
}

// admissionSlack is how much earlier than the workspace ahead of it one behind may show as admitted
// without being out of order (see checkQueue).
const admissionSlack = 10 * time.Second

// inversions lists the pairs of a queue (names in queue order) admitted out of order.
func inversions(queue []string, now map[string]*workspacesv1.WorkspaceDeployment, deleted map[string]bool) []string {
	var out []string
	for i, ahead := range queue {
		y := now[ahead]
		if y == nil || deleted[ahead] {
			continue
		}
		for _, behind := range queue[i+1:] {
			x := now[behind]
			if x == nil || deleted[behind] || !admitted(x) || x.Status.Admission == nil || x.Status.Admission.AdmittedAt == nil {
				continue
			}
			xAt := x.Status.Admission.AdmittedAt.Time
			switch {
			case !admitted(y) || y.Status.Admission == nil || y.Status.Admission.AdmittedAt == nil:
				out = append(out, fmt.Sprintf("%s admitted at %s while %s, ahead of it, is %s: %q", behind, xAt.UTC().Format("15:04:05"), ahead, y.Status.Phase, y.Status.Message))
			case y.Status.Admission.AdmittedAt.Sub(xAt) > admissionSlack:
				out = append(out, fmt.Sprintf("%s admitted at %s, before %s ahead of it (admitted at %s)", behind, xAt.UTC().Format("15:04:05"), ahead, y.Status.Admission.AdmittedAt.UTC().Format("15:04:05")))
			}
		}
	}
	return out
}

func sortedClusters(q queueSnapshot) []string {
	cds := make([]string, 0, len(q))
	for cd := range q {
		cds = append(cds, cd)
	}
	sort.Strings(cds)
	return cds
}
