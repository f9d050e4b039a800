package suites

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/e2e/internal/stack"
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

// TestQuickstartKubectlPlugin runs the built kubectl-exalsius, as kubectl runs a plugin on PATH,
// against the quick start's notebook (TestQuickstart): status, open and fleet print what the
// notebook's and the Colony's status say.
func TestQuickstartKubectlPlugin(t *testing.T) {
	localOnly(t, "examples/quickstart targets the simulator's ClusterTemplate and regional cluster")
	const ns, wsName, url = "demo", "my-notebook", "https://my-notebook.demo.exalsius.localhost"
	f := features.New("kubectl exalsius on the quick start").
		Assess("status and open show the running notebook and its URL", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			eventually(ctx, t, "the notebook Running with its URL", workspaceTimeout, func(ctx context.Context) (bool, string) {
				var ws workspacesv1.WorkspaceDeployment
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: wsName}, &ws); err != nil {
					return false, err.Error()
				}
				return ws.Status.Phase == workspacesv1.PhaseRunning && len(ws.Status.Access) > 0 && ws.Status.Access[0].URL == url,
					fmt.Sprintf("phase %q access %+v", ws.Status.Phase, ws.Status.Access)
			})
			out := kubectlPlugin(ctx, t, "-n", ns, "status", wsName)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 2 || !slices.Equal(strings.Fields(lines[0]), []string{"NAME", "PHASE", "READY", "REASON", "CLUSTER", "GPUS", "QUEUE", "URL"}) ||
				!slices.Equal(strings.Fields(lines[1]), []string{wsName, "Running", "True", workspacesv1.ReasonRunning, "demo/demo-gpu", "1/1", "-", url}) {
				t.Errorf("kubectl exalsius status:\n%s", out)
			}
			if out := kubectlPlugin(ctx, t, "-n", ns, "open", wsName); out != url+"\n" {
				t.Errorf("kubectl exalsius open: %q, want %q", out, url)
			}
			return ctx
		}).
		Assess("fleet shows the Colony's GPUs and the notebook's admitted GPU", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var rows []struct {
				Cluster, Model           string
				Total, Admitted, Waiting int64
				Reachable                bool
			}
			if err := json.Unmarshal([]byte(kubectlPlugin(ctx, t, "-n", ns, "fleet", "demo", "-o", "json")), &rows); err != nil {
				t.Fatal(err)
			}
			var admitted int64
			for _, r := range rows {
				if r.Cluster != "demo-gpu" || !r.Reachable || r.Total <= 0 || r.Waiting != 0 {
					t.Errorf("fleet row %+v: want a reachable demo-gpu offering with GPUs and no waiter", r)
				}
				admitted += r.Admitted
			}
			if len(rows) == 0 || admitted != 1 {
				t.Errorf("kubectl exalsius fleet demo: want the notebook's 1 GPU admitted, got %+v", rows)
			}
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

var (
	pluginOnce sync.Once
	pluginDir  string
	pluginErr  error
)

// kubectlPlugin runs `kubectl exalsius <args>` with the built plugin first on PATH (built from the
// current sources once per run, into EXALSIUS_BIN_DIR when set) and the world's kubeconfig, and
// returns its standard output; a failure fails the test with both outputs.
func kubectlPlugin(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	pluginOnce.Do(func() {
		pluginDir, pluginErr = stack.EnsureBinaries(ctx, world.RepoRoot, os.Getenv("EXALSIUS_BIN_DIR"), []string{"kubectl-exalsius"}, os.Stdout)
	})
	if pluginErr != nil {
		t.Fatalf("building kubectl-exalsius: %v", pluginErr)
	}
	bin, err := w.FindTool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"exalsius", "--kubeconfig", tgt.Kubeconfig()}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl exalsius %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
