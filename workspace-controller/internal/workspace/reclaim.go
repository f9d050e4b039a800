package workspace

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/metrics"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// Reclaim by stop, the borrower's side (docs/design/fair-sharing.md). The gate decides, in the
// reclaimer's pass, which borrowers stop and records them in the reclaimer's status.reclaiming; each
// borrower's own pass reads that, writes its notice (status.reclaim, the Reclaiming condition, an
// Event), and at the notice's time stops through the stop of spec.stopped without writing its spec.
// A reclaimer that no longer names it (admitted, deleted, suspended) withdraws the notice.

// reclaimNotice brings the workspace's notice in line with the reclaimers that name it; part of the
// "stop" step, before it decides whether the workspace stops. A workspace a reclaim stopped already
// keeps its notice until the gate admits it again (applyGate).
func (r *Reconciler) reclaimNotice(ctx context.Context, s *scope) error {
	st := &s.ws.Status
	if owned.ReclaimStopped(st) {
		return nil
	}
	by, err := r.reclaimersOf(ctx, s.ws)
	if err != nil {
		return err
	}
	if len(by) == 0 {
		if st.Reclaim != nil {
			st.Reclaim = nil
			meta.RemoveStatusCondition(&st.Conditions, workspacesv1.ReclaimingCondition)
			r.event(s, corev1.EventTypeNormal, "ReclaimWithdrawn", "Reclaim",
				"the workspace that needed its borrowed GPUs no longer does; it is not stopped")
		}
		return nil
	}
	first := by[0]
	notice := &workspacesv1.ReclaimNotice{At: first.at, For: first.forWhom, NoticedAt: metav1.NewTime(s.now.UTC().Truncate(time.Second))}
	told := st.Reclaim != nil
	if told {
		notice.NoticedAt = st.Reclaim.NoticedAt
	}
	st.Reclaim = notice
	if s.now.Before(first.at.Time) {
		msg := fmt.Sprintf("the workspace borrows GPUs from its cohort and %s needs them within its guarantee: it is stopped at %s, keeping its volumes and URLs, and starts again through the GPU queue",
			first.forWhom, first.at.UTC().Format(time.RFC3339))
		s.setTrue(workspacesv1.ReclaimingCondition, workspacesv1.ReasonReclaimScheduled, msg)
		if !told {
			r.event(s, corev1.EventTypeWarning, workspacesv1.ReasonReclaimScheduled, "Reclaim", msg)
		}
		s.reclaimAt = first.at.Time
		return nil
	}
	stopped := metav1.NewTime(s.now.UTC().Truncate(time.Second))
	notice.StoppedAt = &stopped
	meta.RemoveStatusCondition(&st.Conditions, workspacesv1.ReclaimingCondition)
	metrics.Reclaims.WithLabelValues("Guarantee").Inc()
	r.event(s, corev1.EventTypeWarning, workspacesv1.ReasonReclaimed, "Stop",
		fmt.Sprintf("stopped to give its borrowed GPUs back to %s; its volumes and URLs are kept, and it starts again through the GPU queue", first.forWhom))
	return nil
}

// reclaimer is one workspace whose reclaim names the workspace of the pass.
type reclaimer struct {
	at      metav1.Time
	forWhom string
}

// reclaimersOf lists the reclaims that name ws (by its UID), earliest stop first.
func (r *Reconciler) reclaimersOf(ctx context.Context, ws *workspacesv1.WorkspaceDeployment) ([]reclaimer, error) {
	var list workspacesv1.WorkspaceDeploymentList
	if err := r.Client.List(ctx, &list, client.MatchingFields{owned.IndexReclaimedBy: ws.Namespace + "/" + ws.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the workspaces that reclaim GPUs from %s: %w", ws.Name, err)
	}
	var out []reclaimer
	for i := range list.Items {
		o := &list.Items[i]
		rc := gate.Reclaims(o)
		if rc == nil {
			continue
		}
		for _, b := range rc.Borrowers {
			if b.UID != ws.UID {
				continue
			}
			// Another team's workspace is named by its namespace only (docs/design/fair-sharing.md).
			who := "a workspace of namespace " + o.Namespace
			if o.Namespace == ws.Namespace {
				who = "workspace " + o.Namespace + "/" + o.Name
			}
			out = append(out, reclaimer{at: b.At, forWhom: who})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(&out[j].at) })
	return out, nil
}

// stopRequested reports whether the workspace is to be stopped: spec.stopped, or a reclaim stopped it.
func (s *scope) stopRequested() bool {
	return s.ws.Spec.Stopped || owned.ReclaimStopped(&s.ws.Status)
}

// event records an Event on the workspace when a recorder is set.
func (r *Reconciler) event(s *scope, kind, reason, action, msg string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(s.ws, nil, kind, reason, action, "%s", msg)
	}
}
