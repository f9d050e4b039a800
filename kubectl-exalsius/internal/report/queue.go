package report

import (
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/priority"
)

// Queue kinds: a workspace waits either in its cluster's GPU queue or in its namespace's quota queue.
const (
	QueueCluster = "cluster"
	QueueQuota   = "quota"
)

// QueuePosition is where a waiting workspace stands. The workspace-controller records no position in
// status, so it is derived here the way the GPU gate orders its queues: the waiters of the same queue,
// higher effective priority first (spec.priority capped by the namespace's WorkspaceQuotas'
// maxPriority), then older, then by namespace and name.
type QueuePosition struct {
	// Kind is QueueCluster or QueueQuota.
	Kind string `json:"kind"`
	// Queue names the queue: the cluster (namespace/name) or the namespace.
	Queue string `json:"queue"`
	// Position is 1 for the first waiter.
	Position int `json:"position"`
	// Ahead are the waiters before this one, first first.
	Ahead []QueuedWorkspace `json:"ahead,omitempty"`
}

// QueuedWorkspace is one waiter ahead.
type QueuedWorkspace struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	Priority  int32       `json:"priority"`
	GPUs      int64       `json:"gpus"`
	Created   metav1.Time `json:"created"`
}

// PriorityCaps are the namespaces' priority caps, counted as the GPU gate counts them
// (priority.Caps). Nil when the quotas could not be read: spec.priority is then taken as it is.
type PriorityCaps priority.Caps

// CapsOf computes the caps from WorkspaceQuotas.
func CapsOf(quotas []workspacesv1.WorkspaceQuota) PriorityCaps {
	return PriorityCaps(priority.CapsOf(quotas))
}

// Effective is the priority the queues count.
func (c PriorityCaps) Effective(ws *workspacesv1.WorkspaceDeployment) int32 {
	return priority.Caps(c).Effective(ws)
}

// ahead reports whether a comes before b.
func (c PriorityCaps) ahead(a, b *workspacesv1.WorkspaceDeployment) bool {
	if pa, pb := c.Effective(a), c.Effective(b); pa != pb {
		return pa > pb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// WaitingForQuota reports whether a workspace waits for its namespace's WorkspaceQuota.
func WaitingForQuota(ws *workspacesv1.WorkspaceDeployment) bool {
	return ws.Status.Phase == workspacesv1.PhaseWaiting && readyReason(ws) == workspacesv1.ReasonQuotaExceeded
}

// QueuedForGPUs reports whether a workspace waits in its cluster's GPU queue: Waiting, not for its
// quota, not suspended and not being deleted.
func QueuedForGPUs(ws *workspacesv1.WorkspaceDeployment) bool {
	return ws.Status.Phase == workspacesv1.PhaseWaiting && !WaitingForQuota(ws) && !ws.Spec.Suspend && ws.DeletionTimestamp.IsZero()
}

// ClusterOf is the ClusterDeployment (namespace/name) a workspace names or was placed on, or "" while
// it is not placed.
func ClusterOf(ws *workspacesv1.WorkspaceDeployment) string {
	if r := ws.Spec.ClusterDeploymentRef; r.Name != "" {
		return orDefault(r.Namespace, ws.Namespace) + "/" + r.Name
	}
	if p := ws.Status.Placement; p != nil && p.Cluster != "" {
		return orDefault(p.Namespace, ws.Namespace) + "/" + p.Cluster
	}
	return ""
}

// RequestedGPUs is the GPUs a workspace asks for: replicas x GPUs per replica, from its resolved
// resources (0 before they are resolved).
func RequestedGPUs(ws *workspacesv1.WorkspaceDeployment) int64 {
	r := ws.Status.ResolvedResources
	if r == nil || r.PerReplica.GPUCount == nil {
		return 0
	}
	return int64(r.Replicas) * int64(*r.PerReplica.GPUCount)
}

// sameGPUs reports whether two workspaces compete for the same GPUs: same vendor and node selector.
func sameGPUs(a, b *workspacesv1.WorkspaceDeployment) bool {
	ra, rb := a.Status.ResolvedResources, b.Status.ResolvedResources
	if ra == nil || rb == nil {
		return false
	}
	return ra.PerReplica.GPUVendor == rb.PerReplica.GPUVendor && sameMap(ra.NodeSelector, rb.NodeSelector)
}

// Queue returns where ws stands among all, or nil when it waits in no queue. In the cluster queue only
// waiters on the same cluster for the same GPUs (vendor and node selector) count, as in the GPU gate;
// a workspace not placed yet (a Colony or selector still looking) has no cluster queue. In the quota
// queue, the quota waiters of its namespace count.
func Queue(ws *workspacesv1.WorkspaceDeployment, all []workspacesv1.WorkspaceDeployment, caps PriorityCaps) *QueuePosition {
	var q QueuePosition
	var same func(o *workspacesv1.WorkspaceDeployment) bool
	switch {
	case WaitingForQuota(ws):
		q.Kind, q.Queue = QueueQuota, ws.Namespace
		same = func(o *workspacesv1.WorkspaceDeployment) bool {
			return o.Namespace == ws.Namespace && WaitingForQuota(o)
		}
	case QueuedForGPUs(ws) && ClusterOf(ws) != "":
		q.Kind, q.Queue = QueueCluster, ClusterOf(ws)
		same = func(o *workspacesv1.WorkspaceDeployment) bool {
			return QueuedForGPUs(o) && ClusterOf(o) == q.Queue && RequestedGPUs(o) > 0 && sameGPUs(o, ws)
		}
	default:
		return nil
	}
	var ahead []*workspacesv1.WorkspaceDeployment
	for i := range all {
		o := &all[i]
		if (o.Namespace == ws.Namespace && o.Name == ws.Name) || !same(o) || !caps.ahead(o, ws) {
			continue
		}
		ahead = append(ahead, o)
	}
	sort.Slice(ahead, func(i, j int) bool { return caps.ahead(ahead[i], ahead[j]) })
	q.Position = len(ahead) + 1
	for _, o := range ahead {
		q.Ahead = append(q.Ahead, QueuedWorkspace{Namespace: o.Namespace, Name: o.Name, Priority: caps.Effective(o),
			GPUs: RequestedGPUs(o), Created: o.CreationTimestamp})
	}
	return &q
}

func readyReason(ws *workspacesv1.WorkspaceDeployment) string {
	if c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReadyCondition); c != nil {
		return c.Reason
	}
	return ""
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
