package suites

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// TestNodeReplacedUnderANewName: the node of a Running GPU workspace is replaced as Cluster API
// replaces a machine: the node goes, with its pod, and a node of the same kind joins under another
// name. The admission, pinned to the old node, no longer holds; the workspace is gated again,
// admitted on the new node, and Running there with its pod.
func TestNodeReplacedUnderANewName(t *testing.T) {
	localOnly(t, "replacing a simulated node")
	var ns string
	var child *childCluster
	const cd = "repl"
	f := features.New("a GPU node replaced under a new name").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "repl")
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			child = createClusterDeployment(ctx, t, ns, cd, w.ClusterConfig{Nodes: []w.NodePool{gpuPool("l4", "NVIDIA", "L4", 1, 1)}})
			return ctx
		}).
		Assess("the workspace is admitted again and Running on the new node", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			class := notebookClass("e2e-repl-"+ns, notebookTemplate, 1, workspacesv1.GPUVendorNVIDIA)
			createClass(ctx, t, class)
			mustCreate(ctx, t, workspace(ns, "gpu-nb", class.Name, cd, gpuOverride(1, "L4", nil)))
			got := waitRunning(ctx, t, ns, "gpu-nb")
			if got.Status.Admission == nil || len(got.Status.Admission.Nodes) != 1 {
				t.Fatalf("admission %+v: want one admitted node", got.Status.Admission)
			}
			old := got.Status.Admission.Nodes[0].Name
			replacement, err := child.local.ReplaceNode(ctx, old)
			if err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, "Running on node "+replacement, workspaceTimeout, func(ctx context.Context) (bool, string) {
				var ws workspacesv1.WorkspaceDeployment
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "gpu-nb"}, &ws); err != nil {
					return false, err.Error()
				}
				ad := ws.Status.Admission
				ok := ws.Status.Phase == workspacesv1.PhaseRunning && ad != nil && len(ad.Nodes) == 1 && ad.Nodes[0].Name == replacement
				return ok, fmt.Sprintf("phase %s, admission %+v, message %q", ws.Status.Phase, ad, ws.Status.Message)
			})
			pods := runningPods(ctx, t, child, "gpu-nb", 1)
			if pods[0].Spec.NodeName != replacement {
				t.Errorf("pod %s on node %s, want %s", pods[0].Name, pods[0].Spec.NodeName, replacement)
			}
			deleteAndWait(ctx, t, waitRunning(ctx, t, ns, "gpu-nb"), workspaceTimeout)
			return ctx
		}).Feature()
	testEnv.Test(t, f)
}
