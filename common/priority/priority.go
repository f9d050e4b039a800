// Package priority holds the one rule for a workspace's priority as the queues count it: its
// spec.priority, at most the cap its namespace's WorkspaceQuotas allow. The workspace-controller's
// GPU gate orders its queues by it, and the kubectl plugin shows queue positions with it.
package priority

import (
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// Caps are the highest priorities the namespaces' WorkspaceQuotas allow: spec.maxPriority, the
// lowest when several quotas of a namespace set it. A namespace without one is capped at 0. The
// webhook refuses a higher spec.priority; the controller also counts at most the cap, so that a cap
// lowered later, or a webhook that was bypassed, never lets a tenant outrank others.
//
// A nil Caps means the quotas are not known (a reader who may not list them): priorities are then
// taken as written.
type Caps map[string]int32

// CapsOf computes the caps from WorkspaceQuotas; never nil.
func CapsOf(quotas []workspacesv1.WorkspaceQuota) Caps {
	caps := Caps{}
	for i := range quotas {
		q := &quotas[i]
		if q.Spec.MaxPriority == nil {
			continue
		}
		if c, ok := caps[q.Namespace]; !ok || *q.Spec.MaxPriority < c {
			caps[q.Namespace] = *q.Spec.MaxPriority
		}
	}
	return caps
}

// Effective is a workspace's priority as the queues count it: spec.priority, at most its
// namespace's cap (0 without one); spec.priority as written when c is nil.
func (c Caps) Effective(ws *workspacesv1.WorkspaceDeployment) int32 {
	if c == nil {
		return ws.Spec.Priority
	}
	return min(ws.Spec.Priority, c[ws.Namespace])
}
