package chartnode

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// checkQuickstart applies examples/quickstart and waits for its workspace to run: the colony-
// controller's pod creates the ClusterDeployment, the inventory-collector's pod reads the child API
// server's GPU nodes, and the workspace-controller's pod deploys the notebook.
func checkQuickstart(ctx context.Context, t *testing.T) {
	if err := w.ApplyDir(ctx, filepath.Join(w.RepoRoot, "examples", "quickstart")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually(ctx, t, "workspace demo/my-notebook Running", 10*time.Minute, func(ctx context.Context) (bool, string) {
		var ws workspacesv1.WorkspaceDeployment
		if err := w.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "my-notebook"}, &ws); err != nil {
			return false, err.Error()
		}
		return ws.Status.Phase == workspacesv1.PhaseRunning, fmt.Sprintf("phase %s: %s", ws.Status.Phase, ws.Status.Message)
	})
	t.Logf("quick start Running %s after apply", time.Since(start).Round(time.Second))
}
