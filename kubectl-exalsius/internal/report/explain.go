package report

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
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
	// Borrowers are, for a workspace that waits for its namespace's WorkspaceQuota in a cohort, the
	// workspaces of the other members that hold borrowed GPUs, most borrowed first.
	Borrowers []Borrower `json:"borrowers,omitempty"`
	// Lines are the explanation in sentences, as printed.
	Lines []string `json:"lines"`
}

// Borrower is a workspace that holds GPUs above its namespace's guarantee (status.admission.borrowedGPUs).
type Borrower struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Borrowed is how many of its GPUs are borrowed.
	Borrowed int64 `json:"borrowed"`
	// Policy is its spec.preemptionPolicy.
	Policy workspacesv1.PreemptionPolicy `json:"preemptionPolicy,omitempty"`
	// AdmittedAt is when the gate admitted it.
	AdmittedAt *metav1.Time `json:"admittedAt,omitempty"`
}

// Cohorts maps a namespace to its cohort, as its WorkspaceQuotas' status shows it.
type Cohorts map[string]string

// CohortsOf reads the cohorts from WorkspaceQuotas.
func CohortsOf(quotas []workspacesv1.WorkspaceQuota) Cohorts {
	out := Cohorts{}
	for i := range quotas {
		if c := quotas[i].Status.Cohort; c != "" {
			out[quotas[i].Namespace] = c
		}
	}
	return out
}

// waitingPhases are the phases in which a workspace waits for something outside itself.
var waitingPhases = map[workspacesv1.WorkspacePhase]bool{
	workspacesv1.PhaseWaiting: true, workspacesv1.PhasePending: true, workspacesv1.PhaseInstallingPrerequisites: true,
}

// ExplainWait explains ws; all are the workspaces its queue is derived from, cohorts the cohorts of
// their namespaces.
func ExplainWait(ws *workspacesv1.WorkspaceDeployment, all []workspacesv1.WorkspaceDeployment, caps PriorityCaps, cohorts Cohorts) Explanation {
	e := Explanation{Status: Status(ws, all, caps), Waiting: waitingPhases[ws.Status.Phase], Feasibility: ws.Status.Feasibility}
	s := e.Status
	if !e.Waiting {
		e.Lines = append(e.Lines, fmt.Sprintf("%s/%s is %s, not waiting (Ready %s, %s).", s.Namespace, s.Name, orDefault(s.Phase, "without a phase yet"),
			s.Ready, orDefault(s.Reason, "no reason")))
		e.Lines = append(e.Lines, borrowing(ws, cohorts)...)
		e.Lines = append(e.Lines, reclaimLines(ws)...)
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
	if c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.WithinQuotaCondition); c != nil && c.Status == metav1.ConditionFalse {
		if cohort := cohorts[ws.Namespace]; cohort != "" {
			e.Borrowers = borrowersIn(cohort, ws.Namespace, all, cohorts)
			if len(e.Borrowers) == 0 {
				e.Lines = append(e.Lines, fmt.Sprintf("No workspace of the other members of cohort %s that you may list borrows GPUs.", cohort))
			} else {
				e.Lines = append(e.Lines, fmt.Sprintf("Borrowing in cohort %s (GPUs above their namespace's guarantee):", cohort))
			}
			for _, b := range e.Borrowers {
				e.Lines = append(e.Lines, fmt.Sprintf("  %s/%s borrows %d GPUs (preemptionPolicy %s, admitted %s)", b.Namespace, b.Name, b.Borrowed,
					orDefault(string(b.Policy), string(workspacesv1.PreemptionReclaimable)), timeOf(b.AdmittedAt)))
			}
		}
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
	e.Lines = append(e.Lines, borrowing(ws, cohorts)...)
	e.Lines = append(e.Lines, reclaimLines(ws)...)
	return e
}

// reclaimLines say what a reclaim does to the workspace: the borrowers it stops for the GPUs within
// its guarantee (status.reclaiming), or when it is stopped to give borrowed GPUs back, and for whom
// (status.reclaim).
func reclaimLines(ws *workspacesv1.WorkspaceDeployment) []string {
	var out []string
	if rc := ws.Status.Reclaiming; rc != nil {
		out = append(out, fmt.Sprintf("It reclaims GPUs within its namespace's guarantee on cluster %s (since %s); the GPUs these borrowers free are held for it:",
			rc.Cluster, timeOf(&rc.Since)))
		for _, b := range rc.Borrowers {
			out = append(out, fmt.Sprintf("  %s/%s (%d GPUs) is stopped at %s", b.Namespace, b.Name, b.GPUs, timeOf(&b.At)))
		}
	}
	if r := ws.Status.Reclaim; r != nil {
		if r.StoppedAt != nil {
			out = append(out, fmt.Sprintf("It was stopped at %s to give the GPUs it borrowed back to %s; it starts again, with its volumes and URLs, once the GPU gate admits it.",
				timeOf(r.StoppedAt), r.For))
		} else {
			out = append(out, fmt.Sprintf("It borrows GPUs that %s needs within its guarantee: it is stopped at %s (told at %s), keeping its volumes and URLs.",
				r.For, timeOf(&r.At), timeOf(&r.NoticedAt)))
		}
	}
	return out
}

// borrowing says how much of a workspace's admission is borrowed, and above which guarantee.
func borrowing(ws *workspacesv1.WorkspaceDeployment, cohorts Cohorts) []string {
	ad := ws.Status.Admission
	if ad == nil || ad.BorrowedGPUs <= 0 {
		return nil
	}
	line := fmt.Sprintf("It borrows %d of its %d GPUs from cohort %s: they are above the guarantee of namespace %s's WorkspaceQuota.",
		ad.BorrowedGPUs, ad.GPUs, orDefault(cohorts[ws.Namespace], "(not shown: its WorkspaceQuota cannot be read)"), ws.Namespace)
	out := []string{line}
	if c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.WithinQuotaCondition); c != nil && c.Message != "" {
		out = append(out, "  "+c.Message)
	}
	return out
}

// borrowersIn are the workspaces of cohort's members other than self that hold borrowed GPUs, most
// borrowed first, then the youngest admission first.
func borrowersIn(cohort, self string, all []workspacesv1.WorkspaceDeployment, cohorts Cohorts) []Borrower {
	var out []Borrower
	for i := range all {
		w := &all[i]
		ad := w.Status.Admission
		if w.Namespace == self || cohorts[w.Namespace] != cohort || ad == nil || ad.BorrowedGPUs <= 0 {
			continue
		}
		out = append(out, Borrower{Namespace: w.Namespace, Name: w.Name, Borrowed: ad.BorrowedGPUs, Policy: w.Spec.PreemptionPolicy, AdmittedAt: ad.AdmittedAt})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Borrowed != out[j].Borrowed {
			return out[i].Borrowed > out[j].Borrowed
		}
		if ti, tj := out[i].AdmittedAt, out[j].AdmittedAt; ti != nil && tj != nil && !ti.Equal(tj) {
			return tj.Before(ti)
		}
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// timeOf formats a time for a line, "unknown" when unset.
func timeOf(t *metav1.Time) string {
	if t == nil {
		return "at an unknown time"
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}

func replicas(ws *workspacesv1.WorkspaceDeployment) int32 {
	if r := ws.Status.ResolvedResources; r != nil {
		return r.Replicas
	}
	return 0
}
