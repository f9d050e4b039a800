package gate

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/priority"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// priorityCaps are the namespaces' priority caps (priority.Caps: the one rule, shared with the
// kubectl plugin); here never nil.
type priorityCaps priority.Caps

// priorityCaps reads the caps from the WorkspaceQuotas in the cache.
func (g *Gate) priorityCaps(ctx context.Context) (priorityCaps, error) {
	var list workspacesv1.WorkspaceQuotaList
	if err := g.client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil { // read-only
		return nil, fmt.Errorf("listing WorkspaceQuotas: %w", err)
	}
	return capsOf(list.Items), nil
}

// capsOf computes the caps from a list of quotas.
func capsOf(quotas []workspacesv1.WorkspaceQuota) priorityCaps {
	return priorityCaps(priority.CapsOf(quotas))
}

// effective is a workspace's priority as the queues count it: spec.priority, at most its namespace's
// cap.
func (c priorityCaps) effective(ws *workspacesv1.WorkspaceDeployment) int32 {
	return priority.Caps(c).Effective(ws)
}

// ahead reports whether a comes before b in a queue: higher effective priority first, then older
// (then by namespace and name, see owned.Older).
func (c priorityCaps) ahead(a, b *workspacesv1.WorkspaceDeployment) bool {
	if pa, pb := c.effective(a), c.effective(b); pa != pb {
		return pa > pb
	}
	return owned.Older(a, b)
}

// waitingForGPUs reports whether a workspace waits in its cluster's GPU queue (Queued).
func waitingForGPUs(ws *workspacesv1.WorkspaceDeployment) bool { return Queued(&ws.Status) }

// Queued reports whether a workspace with this status waits in its cluster's GPU queue: Waiting, and
// not for its namespace's quota, or stopped by a reclaim and waiting to start again (its phase stays
// Stopped, reason Reclaimed) (a quota waiter holds no place on the cluster, so that a tenant over
// quota never blocks another tenant's workspace). A waiter whose child cannot be reached, or whose
// matching nodes are cordoned or NotReady, stays Waiting and so keeps its place (its order is its
// priority, then its creation: nothing in its status decides it).
func Queued(st *workspacesv1.WorkspaceDeploymentStatus) bool {
	return (st.Phase == workspacesv1.PhaseWaiting && !waitingForQuota(st)) || owned.RestartsAfterReclaim(st)
}

// WaitingForQuota reports whether a workspace waits for its namespace's quota.
func WaitingForQuota(ws *workspacesv1.WorkspaceDeployment) bool { return waitingForQuota(&ws.Status) }

func waitingForQuota(st *workspacesv1.WorkspaceDeploymentStatus) bool {
	if st.Phase != workspacesv1.PhaseWaiting {
		return false
	}
	c := meta.FindStatusCondition(st.Conditions, workspacesv1.ReadyCondition)
	return c != nil && c.Reason == workspacesv1.ReasonQuotaExceeded
}

// listQuotas lists the WorkspaceQuotas of a namespace from the cache.
func listQuotas(ctx context.Context, c client.Reader, namespace string) ([]workspacesv1.WorkspaceQuota, error) {
	var list workspacesv1.WorkspaceQuotaList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing WorkspaceQuotas of %s: %w", namespace, err)
	}
	return list.Items, nil
}
