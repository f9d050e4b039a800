package suites

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// TestGPUExamples applies the GPU examples of examples/ on top of the quick start, as a user would
// after `make run`, and follows each to a Running workspace whose pods ask for the GPUs on the right
// nodes. It removes what it added, leaving the quick start in place.
func TestGPUExamples(t *testing.T) {
	localOnly(t, "the examples target the simulator's ClusterTemplate and GPU node shapes")
	const ns = "demo"
	apply := func(ctx context.Context, t *testing.T, dir string) {
		t.Helper()
		if err := world.ApplyDir(ctx, filepath.Join(world.RepoRoot, "examples", dir)); err != nil {
			t.Fatalf("applying examples/%s: %v", dir, err)
		}
	}
	// checkPods asserts n running pods of a workspace, each requesting gpus of resource on a node of
	// pool whose labels hold the selector.
	checkPods := func(ctx context.Context, t *testing.T, child *childCluster, ws string, n int, resource corev1.ResourceName, gpus int64, selector map[string]string, pool string) {
		t.Helper()
		for _, p := range runningPods(ctx, t, child, ws, n) {
			var req int64
			for _, c := range p.Spec.Containers {
				q := c.Resources.Requests[resource]
				req += q.Value()
			}
			if req != gpus {
				t.Errorf("%s: pod %s requests %d %s, want %d", ws, p.Name, req, resource, gpus)
			}
			var node corev1.Node
			if err := child.Client().Get(ctx, types.NamespacedName{Name: p.Spec.NodeName}, &node); err != nil {
				t.Fatal(err)
			}
			if node.Labels[w.PoolLabel] != pool {
				t.Errorf("%s: pod %s runs on %s (pool %q), want pool %q", ws, p.Name, node.Name, node.Labels[w.PoolLabel], pool)
			}
			for k, v := range selector {
				if p.Spec.NodeSelector[k] != v || node.Labels[k] != v {
					t.Errorf("%s: pod %s nodeSelector %v / node labels lack %s=%s", ws, p.Name, p.Spec.NodeSelector, k, v)
				}
			}
		}
	}
	var gpuChild, amdChild *childCluster
	f := features.New("GPU examples").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			apply(ctx, t, "quickstart")
			gpuChild = waitChild(ctx, t, ns, "demo-gpu")
			return ctx
		}).
		Assess("gpu-type: two replicas of four A100 each, by the canonical model name", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			apply(ctx, t, "gpu-type")
			waitRunning(ctx, t, ns, "notebook-a100x4")
			checkPods(ctx, t, gpuChild, "notebook-a100x4", 2, "nvidia.com/gpu", 4, map[string]string{w.GPUModelLabel: "A100-SXM4-80GB"}, "a100")
			return ctx
		}).
		Assess("gpu-node-selector: two A100 by NVIDIA's product label", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			apply(ctx, t, "gpu-node-selector")
			waitRunning(ctx, t, ns, "notebook-by-product-label")
			checkPods(ctx, t, gpuChild, "notebook-by-product-label", 1, "nvidia.com/gpu", 2, map[string]string{w.NVIDIAProductLabel: "A100-SXM4-80GB"}, "a100")
			return ctx
		}).
		Assess("gpu-amd: two MI300X on the AMD Colony's cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			apply(ctx, t, "gpu-amd")
			amdChild = waitChild(ctx, t, ns, "amd-mi300")
			waitRunningOnNewCluster(ctx, t, ns, "notebook-mi300x")
			checkPods(ctx, t, amdChild, "notebook-mi300x", 1, "amd.com/gpu", 2, map[string]string{w.GPUModelLabel: "MI300X"}, "mi300x")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, name := range []string{"notebook-a100x4", "notebook-by-product-label", "notebook-mi300x"} {
				deleteAndWait(ctx, t, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, workspaceTimeout)
			}
			deleteAndWait(ctx, t, &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "amd"}}, clusterTimeout)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// TestSharedFleetExample applies examples/shared-fleet on top of the quick start: the platform's
// Colony of three clusters comes up, and both teams' `notebook` are placed on it from their own
// namespaces and run, each in its own release namespace. It removes the workspaces and the Colony.
func TestSharedFleetExample(t *testing.T) {
	localOnly(t, "the examples target the simulator's ClusterTemplate and GPU node shapes")
	const platform = "platform-fleet"
	f := features.New("shared-fleet example").
		Assess("both teams' notebooks run on the platform's fleet", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, dir := range []string{"quickstart", "shared-fleet"} {
				if err := world.ApplyDir(ctx, filepath.Join(world.RepoRoot, "examples", dir)); err != nil {
					t.Fatalf("applying examples/%s: %v", dir, err)
				}
			}
			waitColony(ctx, t, platform, "gpus", 3, 3)
			var releaseNamespaces []string
			for _, team := range []string{"team-a", "team-b"} {
				ws := waitRunningOnNewCluster(ctx, t, team, "notebook")
				if p := ws.Status.Placement; p == nil || p.Namespace != platform {
					t.Fatalf("%s/notebook placement %+v, want a cluster of %s", team, p, platform)
				}
				releaseNamespaces = append(releaseNamespaces, ws.Status.ReleaseNamespace)
			}
			if releaseNamespaces[0] == releaseNamespaces[1] {
				t.Errorf("both notebooks in release namespace %s", releaseNamespaces[0])
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, team := range []string{"team-a", "team-b"} {
				deleteAndWait(ctx, t, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "notebook"}}, workspaceTimeout)
			}
			deleteAndWait(ctx, t, &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "gpus"}}, clusterTimeout)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
