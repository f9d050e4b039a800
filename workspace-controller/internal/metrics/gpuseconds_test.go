package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// admitted is a workspace holding gpus NVIDIA A100 GPUs since at.
func admitted(ns, name string, gpus int64, at time.Time) workspacesv1.WorkspaceDeployment {
	return workspace(ns, name, workspacesv1.PhaseRunning, func(w *workspacesv1.WorkspaceDeployment) {
		w.UID = types.UID(ns + "/" + name)
		w.Status.Admission = &workspacesv1.Admission{GPUVendor: workspacesv1.GPUVendorNVIDIA, GPUModel: "A100", GPUs: gpus,
			AdmittedAt: &metav1.Time{Time: at}}
	})
}

// TestGPUSeconds: each holding admission adds its GPUs times the time since the last scrape, its
// admission or the process's start, whichever is latest; a released one stops adding, and its
// namespace's counter keeps what it counted.
func TestGPUSeconds(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	now := t0
	var items []workspacesv1.WorkspaceDeployment
	list := func() listWorkspaces { return static(items...) }
	c := newGPUSecondsCollector(func(ctx context.Context) ([]*workspacesv1.WorkspaceDeployment, error) { return list()(ctx) }, func() time.Time { return now })
	scrape := func(want string) {
		t.Helper()
		head := "# HELP exalsius_workspace_controller_gpu_seconds_total GPU-seconds held by the namespace's admitted workspaces (GPUs admitted x seconds, counted at each scrape), by the admitted nodes' GPU model: the figure to bill GPU-hours from.\n# TYPE exalsius_workspace_controller_gpu_seconds_total counter\n"
		if err := testutil.CollectAndCompare(c, strings.NewReader(head+want), "exalsius_workspace_controller_gpu_seconds_total"); err != nil {
			t.Error(err)
		}
	}
	// Admitted an hour before the process started: counted from the start.
	items = []workspacesv1.WorkspaceDeployment{admitted("team-a", "old", 2, t0.Add(-time.Hour))}
	now = t0.Add(10 * time.Second)
	scrape(`exalsius_workspace_controller_gpu_seconds_total{model="A100",namespace="team-a",vendor="NVIDIA"} 20` + "\n")
	// A second workspace admitted 5 s ago; the first goes on from the last scrape.
	items = append(items, admitted("team-b", "new", 4, t0.Add(25*time.Second)))
	now = t0.Add(30 * time.Second)
	scrape(`exalsius_workspace_controller_gpu_seconds_total{model="A100",namespace="team-a",vendor="NVIDIA"} 60
exalsius_workspace_controller_gpu_seconds_total{model="A100",namespace="team-b",vendor="NVIDIA"} 20
`)
	// team-a's workspace is released: its counter stays, team-b's goes on.
	items = items[1:]
	now = t0.Add(40 * time.Second)
	scrape(`exalsius_workspace_controller_gpu_seconds_total{model="A100",namespace="team-a",vendor="NVIDIA"} 60
exalsius_workspace_controller_gpu_seconds_total{model="A100",namespace="team-b",vendor="NVIDIA"} 60
`)
	// Admitted again later: counted from its new admission, not from its first count.
	items = append(items, admitted("team-a", "old", 2, t0.Add(100*time.Second)))
	now = t0.Add(110 * time.Second)
	scrape(`exalsius_workspace_controller_gpu_seconds_total{model="A100",namespace="team-a",vendor="NVIDIA"} 80
exalsius_workspace_controller_gpu_seconds_total{model="A100",namespace="team-b",vendor="NVIDIA"} 340
`)
}
