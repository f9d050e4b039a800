package report

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// Explanation says why a workspace is not running yet: its state, the conditions that hold it back,
// the GPU gate's last decision and the queue it waits in.
type Explanation struct {
	Status WorkspaceStatus `json:"status"`
	// Waiting is true when the workspace is Waiting, Pending or InstallingPrerequisites.
	Waiting bool `json:"waiting"`
	// Blocking are the conditions that are not True (Ready first), in status order.
	Blocking []metav1.Condition `json:"blocking,omitempty"`
	// Feasibility is status.feasibility, the GPU gate's last decision.
	Feasibility *workspacesv1.Feasibility `json:"feasibility,omitempty"`
	// Lines are the explanation in sentences, as printed.
	Lines []string `json:"lines"`
}

// waitingPhases are the phases in which a workspace waits for something outside itself.
var waitingPhases = map[workspacesv1.WorkspacePhase]bool{
	workspacesv1.PhaseWaiting: true, workspacesv1.PhasePending: true, workspacesv1.PhaseInstallingPrerequisites: true,
}

// ExplainWait explains ws; all are the workspaces its queue is derived from.
func ExplainWait(ws *workspacesv1.WorkspaceDeployment, all []workspacesv1.WorkspaceDeployment, caps PriorityCaps) Explanation {
	e := Explanation{Status: Status(ws, all, caps), Waiting: waitingPhases[ws.Status.Phase], Feasibility: ws.Status.Feasibility}
	s := e.Status
	if !e.Waiting {
		e.Lines = append(e.Lines, fmt.Sprintf("%s/%s is %s, not waiting (Ready %s, %s).", s.Namespace, s.Name, orDefault(s.Phase, "without a phase yet"),
			s.Ready, orDefault(s.Reason, "no reason")))
		return e
	}
	e.Lines = append(e.Lines, fmt.Sprintf("%s/%s is %s: %s.", s.Namespace, s.Name, s.Phase, orDefault(s.Reason, "no reason recorded yet")))
	if s.Message != "" {
		e.Lines = append(e.Lines, "  "+s.Message)
	}
	for _, c := range ws.Status.Conditions {
		if c.Status == metav1.ConditionTrue || c.Type == workspacesv1.ReadyCondition ||
			c.Type == workspacesv1.ReconcilingCondition || c.Type == workspacesv1.StalledCondition {
			continue
		}
		e.Blocking = append(e.Blocking, c)
		e.Lines = append(e.Lines, fmt.Sprintf("%s is %s: %s: %s", c.Type, c.Status, c.Reason, orDefault(c.Message, "(no message)")))
	}
	if f := ws.Status.Feasibility; f != nil && !f.Feasible {
		e.Lines = append(e.Lines, fmt.Sprintf("GPU gate: %d of %d replicas fit; %d matching nodes, %d GPUs free there after reservations (%s).",
			f.FittingReplicas, replicas(ws), f.MatchingNodes, f.FreeGPUs, orDefault(f.Reason, "no reason")))
	}
	if q := s.Queue; q != nil {
		switch q.Kind {
		case QueueQuota:
			e.Lines = append(e.Lines, fmt.Sprintf("Waiting for the WorkspaceQuota of namespace %s: position %d.", q.Queue, q.Position))
		default:
			e.Lines = append(e.Lines, fmt.Sprintf("Waiting for %d GPUs on cluster %s: position %d.", s.Requested, q.Queue, q.Position))
		}
		for _, a := range q.Ahead {
			e.Lines = append(e.Lines, fmt.Sprintf("  ahead: %s/%s (priority %d, %d GPUs, created %s)", a.Namespace, a.Name, a.Priority, a.GPUs,
				a.Created.UTC().Format("2006-01-02T15:04:05Z")))
		}
	}
	return e
}

func replicas(ws *workspacesv1.WorkspaceDeployment) int32 {
	if r := ws.Status.ResolvedResources; r != nil {
		return r.Replicas
	}
	return 0
}
