package suites

import (
	"context"
	"testing"

	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// TestNVIDIARuntimeClass: the example chart, as the published catalog's, asks runtimeClassName
// nvidia for NVIDIA GPUs; a child of the local world with NVIDIA GPU nodes carries that RuntimeClass,
// as NVIDIA's GPU operator creates it, so the workspace's pod is created and runs.
func TestNVIDIARuntimeClass(t *testing.T) {
	localOnly(t, "simulated NVIDIA GPU nodes and the simulator's Helm releases")
	var ns string
	var child *childCluster
	const cd = "rtc"
	f := features.New("runtimeClassName nvidia on an NVIDIA child").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "rtc")
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			child = createClusterDeployment(ctx, t, ns, cd, w.ClusterConfig{Nodes: []w.NodePool{gpuPool("l4", "NVIDIA", "L4", 1, 1)}})
			return ctx
		}).
		Assess("the chart's runtimeClassName nvidia: the pod runs and the workspace is Running", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			class := notebookClass("e2e-rtc-"+ns, notebookTemplate, 1, workspacesv1.GPUVendorNVIDIA)
			createClass(ctx, t, class)
			ws := workspace(ns, "gpu-nb", class.Name, cd, gpuOverride(1, "L4", nil))
			mustCreate(ctx, t, ws)
			got := waitRunning(ctx, t, ns, "gpu-nb")
			if c := condition(t, got, workspacesv1.HelmReleaseReadyCondition); c.Reason != workspacesv1.ReasonHelmReleaseDeployed {
				t.Errorf("HelmReleaseReady %s: %s", c.Reason, c.Message)
			}
			pods := runningPods(ctx, t, child, "gpu-nb", 1)
			if rcn := pods[0].Spec.RuntimeClassName; rcn == nil || *rcn != w.NVIDIARuntimeClass {
				t.Errorf("pod %s runtimeClassName %v, want %s (the chart asks it for NVIDIA GPUs)", pods[0].Name, rcn, w.NVIDIARuntimeClass)
			}
			var rc nodev1.RuntimeClass
			if err := child.Client().Get(ctx, types.NamespacedName{Name: w.NVIDIARuntimeClass}, &rc); err != nil {
				t.Fatalf("the NVIDIA child's RuntimeClass %s: %v", w.NVIDIARuntimeClass, err)
			}
			if rc.Handler != "nvidia" {
				t.Errorf("RuntimeClass %s has handler %q, want nvidia", rc.Name, rc.Handler)
			}
			deleteAndWait(ctx, t, got, workspaceTimeout)
			return ctx
		}).Feature()
	testEnv.Test(t, f)
}
