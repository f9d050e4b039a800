package suites

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// TestQuickstart applies examples/quickstart exactly as `make run` does and follows it to a Running
// notebook on the A100 nodes.
func TestQuickstart(t *testing.T) {
	localOnly(t, "examples/quickstart targets the simulator's ClusterTemplate")
	const ns, cd, wsName = "demo", "demo-gpu", "my-notebook"
	var child *childCluster
	f := features.New("quick start").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if err := world.ApplyDir(ctx, filepath.Join(world.RepoRoot, "examples", "quickstart")); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("the Colony provisions its cluster and becomes Ready", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			child = waitChild(ctx, t, ns, cd)
			eventually(ctx, t, "Colony demo Ready 1/1", clusterTimeout, func(ctx context.Context) (bool, string) {
				var c infrav1.Colony
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "demo"}, &c); err != nil {
					return false, err.Error()
				}
				return c.Status.Phase == infrav1.ColonyPhaseReady && c.Status.ReadyClusters == 1 && c.Status.TotalClusters == 1,
					string(c.Status.Phase)
			})
			return ctx
		}).
		Assess("the workspace reaches Running", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// The workspace is applied with its Colony, so the gate may first see the child before its GPU
			// nodes are Ready: Failed/GpuOfferingUnavailable, which heals when they are (the child's node
			// events bring the workspace back). Any other failure is final.
			var ws workspacesv1.WorkspaceDeployment
			eventually(ctx, t, "workspace "+wsName+" Running", workspaceTimeout, func(ctx context.Context) (bool, string) {
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: wsName}, &ws); err != nil {
					return false, err.Error()
				}
				return ws.Status.Phase == workspacesv1.PhaseRunning || ws.Status.Phase == workspacesv1.PhaseFailed &&
						(ws.Status.FailureContext == nil || ws.Status.FailureContext.Reason != workspacesv1.ReasonGpuOfferingUnavailable),
					fmt.Sprintf("phase %q message %q", ws.Status.Phase, ws.Status.Message)
			})
			if ws.Status.Phase != workspacesv1.PhaseRunning {
				t.Fatalf("workspace Failed: %s (%+v)", ws.Status.Message, ws.Status.FailureContext)
			}
			return ctx
		}).
		Assess("its pod asks one GPU and runs on an A100 node", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			pods := runningPods(ctx, t, child, wsName, 1)
			p := pods[0]
			if got := p.Spec.NodeSelector[w.GPUModelLabel]; got != "A100-SXM4-80GB" {
				t.Errorf("nodeSelector %v, want %s=A100-SXM4-80GB", p.Spec.NodeSelector, w.GPUModelLabel)
			}
			req := p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]
			if req.Value() != 1 {
				t.Errorf("nvidia.com/gpu request = %s, want 1", req.String())
			}
			var node corev1.Node
			if err := child.Client().Get(ctx, types.NamespacedName{Name: p.Spec.NodeName}, &node); err != nil {
				t.Fatal(err)
			}
			if node.Labels[w.PoolLabel] != "a100" {
				t.Errorf("pod scheduled on %s (pool %q), want an a100 node", node.Name, node.Labels[w.PoolLabel])
			}
			return ctx
		}).
		Assess("kubectl get exalsius -A lists the three kinds", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			out, err := kubectl(ctx, "get", "exalsius", "-A")
			if err != nil {
				t.Fatalf("kubectl: %v\n%s", err, out)
			}
			for _, want := range []string{"colony.infra.exalsius.ai/demo", "workspaceclass.workspaces.exalsius.ai/jupyter-notebook-0-3-0", "workspacedeployment.workspaces.exalsius.ai/my-notebook", "Running"} {
				if !strings.Contains(out, want) {
					t.Errorf("kubectl get exalsius -A lacks %q:\n%s", want, out)
				}
			}
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
