package chaos

import (
	"fmt"
	"time"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// Admitted reports whether a workspace holds its GPUs: Running or Deploying, and not being deleted
// (a workspace being deleted gives its GPUs back; its pods hold them until they are gone, and the
// scheduler keeps a newly admitted workspace's pods Pending until then).
func Admitted(ws *workspacesv1.WorkspaceDeployment) bool {
	return ws.DeletionTimestamp.IsZero() && (ws.Status.Phase == workspacesv1.PhaseRunning || ws.Status.Phase == workspacesv1.PhaseDeploying)
}

// AdmissionSlack is how much earlier than the workspace ahead of it one behind may show as admitted
// without being out of order (see checkQueue).
const AdmissionSlack = 10 * time.Second

// Inversions lists the pairs of a queue (names in queue order) admitted out of order.
func Inversions(queue []string, now map[string]*workspacesv1.WorkspaceDeployment, deleted map[string]bool) []string {
	var out []string
	for i, ahead := range queue {
		y := now[ahead]
		if y == nil || deleted[ahead] {
			continue
		}
		for _, behind := range queue[i+1:] {
			x := now[behind]
			if x == nil || deleted[behind] || !Admitted(x) || x.Status.Admission == nil || x.Status.Admission.AdmittedAt == nil ||
				RequestedGPUs(y) > RequestedGPUs(x) {
				continue
			}
			xAt := x.Status.Admission.AdmittedAt.Time
			switch {
			case !Admitted(y) || y.Status.Admission == nil || y.Status.Admission.AdmittedAt == nil:
				out = append(out, fmt.Sprintf("%s admitted at %s while %s, ahead of it, is %s: %q", behind, xAt.UTC().Format("15:04:05"), ahead, y.Status.Phase, y.Status.Message))
			case y.Status.Admission.AdmittedAt.Sub(xAt) > AdmissionSlack:
				out = append(out, fmt.Sprintf("%s admitted at %s, before %s ahead of it (admitted at %s)", behind, xAt.UTC().Format("15:04:05"), ahead, y.Status.Admission.AdmittedAt.UTC().Format("15:04:05")))
			}
		}
	}
	return out
}

// RequestedGPUs is the GPUs a workspace asks in all (its resolved resources).
func RequestedGPUs(ws *workspacesv1.WorkspaceDeployment) int64 {
	res := ws.Status.ResolvedResources
	if res == nil || res.PerReplica.GPUCount == nil {
		return 0
	}
	return int64(*res.PerReplica.GPUCount) * int64(res.Replicas)
}
