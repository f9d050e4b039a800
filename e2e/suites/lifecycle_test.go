package suites

import (
	"context"
	"fmt"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

const (
	prereqTemplate = "e2e-prereq-1-0-0"
	brokenTemplate = "e2e-broken-0-1-0"
)

// TestWorkspaceLifecycle covers values injection, a rolled-out spec edit, deletion, a broken chart
// and prerequisites on one child cluster.
func TestWorkspaceLifecycle(t *testing.T) {
	localOnly(t, "simulated GPU nodes and the simulator's Helm releases")
	var ns string
	var child *childCluster
	const cd = "life"
	f := features.New("workspace lifecycle").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "life")
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			serviceTemplate(ctx, t, prereqTemplate, "example-prerequisite", "1.0.0", "kcm-system", ns)
			serviceTemplate(ctx, t, brokenTemplate, "broken", "0.1.0", "kcm-system", ns)
			child = createClusterDeployment(ctx, t, ns, cd, w.ClusterConfig{Nodes: []w.NodePool{gpuPool("a100", "NVIDIA", "A100", 2, 8)}})
			return ctx
		}).
		Assess("values: class defaults, user values, _exalsius and injection paths reach the release", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			class := notebookClass("e2e-values-"+ns, notebookTemplate, 1, workspacesv1.GPUVendorNVIDIA)
			class.Spec.DefaultValues = jsonOf(t, map[string]any{"notebook": map[string]any{"ui": "tree", "password": "default"}})
			class.Spec.ResourceInjection = &workspacesv1.ResourceInjection{GPUCount: []string{"notebook.gpus"}, Replicas: []string{"replicaCount"}}
			createClass(ctx, t, class)
			ws := workspace(ns, "values", class.Name, cd, gpuOverride(2, "A100", nil))
			ws.Spec.Values = jsonOf(t, map[string]any{"notebook": map[string]any{"ui": "lab"}})
			mustCreate(ctx, t, ws)
			got := waitRunning(ctx, t, ns, "values")
			rel := release(t, child, got)
			vals := rel.Config
			if v := dig(vals, "notebook", "ui"); v != "lab" {
				t.Errorf("notebook.ui = %v, want the user's lab over the class default", v)
			}
			if v := dig(vals, "notebook", "password"); v != "default" {
				t.Errorf("notebook.password = %v, want the class default", v)
			}
			if v := dig(vals, "notebook", "gpus"); fmt.Sprint(v) != "2" {
				t.Errorf("notebook.gpus (injected gpuCount) = %v, want 2", v)
			}
			if v := dig(vals, "replicaCount"); fmt.Sprint(v) != "1" {
				t.Errorf("replicaCount (injected replicas) = %v, want 1", v)
			}
			if v := dig(vals, "_exalsius", "resources", "replicas"); fmt.Sprint(v) != "1" {
				t.Errorf("_exalsius.resources.replicas = %v, want 1", v)
			}
			if v := dig(vals, "_exalsius", "resources", "perReplica", "gpuResourceName"); v != "nvidia.com/gpu" {
				t.Errorf("_exalsius.resources.perReplica.gpuResourceName = %v", v)
			}
			if v := dig(vals, "_exalsius", "scheduling", "nodeSelector", w.GPUModelLabel); v != "A100" {
				t.Errorf("_exalsius.scheduling.nodeSelector = %v", dig(vals, "_exalsius", "scheduling"))
			}
			return ctx
		}).
		Assess("a spec edit is rolled out as Helm revision 2", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var ws workspacesv1.WorkspaceDeployment
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "values"}, &ws); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(ws.DeepCopy())
			ws.Spec.Values = jsonOf(t, map[string]any{"notebook": map[string]any{"ui": "tree"}})
			if err := mgmt().Patch(ctx, &ws, patch); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, "release revision 2 with notebook.ui=tree", workspaceTimeout, func(ctx context.Context) (bool, string) {
				rel, err := k0rdentsim.Release(child.KubeconfigPath, "ws-values", ws.Status.ReleaseName)
				if err != nil || rel == nil {
					return false, fmt.Sprint("release: ", err)
				}
				return rel.Version == 2 && dig(rel.Config, "notebook", "ui") == "tree", fmt.Sprintf("revision %d ui %v", rel.Version, dig(rel.Config, "notebook", "ui"))
			})
			eventually(ctx, t, "workspace Running at the new generation", workspaceTimeout, func(ctx context.Context) (bool, string) {
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "values"}, &ws); err != nil {
					return false, err.Error()
				}
				return ws.Status.Phase == workspacesv1.PhaseRunning && ws.Status.ObservedGeneration == ws.Generation,
					fmt.Sprintf("phase %s observedGeneration %d generation %d", ws.Status.Phase, ws.Status.ObservedGeneration, ws.Generation)
			})
			return ctx
		}).
		Assess("deletion removes the ServiceSet, the release and ws-<name>", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var ws workspacesv1.WorkspaceDeployment
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "values"}, &ws); err != nil {
				t.Fatal(err)
			}
			ssName, relName := ws.Status.ServiceSetName, ws.Status.ReleaseName
			deleteAndWait(ctx, t, &ws, workspaceTimeout)
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: ssName}, &k0rdentv1beta1.ServiceSet{}); !apierrors.IsNotFound(err) {
				t.Errorf("ServiceSet %s still there: %v", ssName, err)
			}
			if rel, err := k0rdentsim.Release(child.KubeconfigPath, "ws-values", relName); err != nil || rel != nil {
				t.Errorf("release ws-values/%s still there: %v %v", relName, rel, err)
			}
			eventually(ctx, t, "namespace ws-values gone on the child", time.Minute, func(ctx context.Context) (bool, string) {
				var n corev1.Namespace
				err := child.Client().Get(ctx, types.NamespacedName{Name: "ws-values"}, &n)
				return apierrors.IsNotFound(err), fmt.Sprintf("phase %s err %v", n.Status.Phase, err)
			})
			return ctx
		}).
		Assess("a broken chart: Failed with failureContext", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			createClass(ctx, t, notebookClass("e2e-broken-"+ns, brokenTemplate, 0, ""))
			mustCreate(ctx, t, workspace(ns, "broken", "e2e-broken-"+ns, cd, nil))
			ws := waitPhase(ctx, t, ns, "broken", workspaceTimeout, workspacesv1.PhaseFailed, workspacesv1.PhaseRunning)
			if ws.Status.Phase != workspacesv1.PhaseFailed {
				t.Fatalf("phase %s, want Failed", ws.Status.Phase)
			}
			fc := ws.Status.FailureContext
			if fc == nil || fc.PhaseWhenFailed == "" || fc.Reason == "" || fc.ServiceSetStatus == nil {
				t.Fatalf("failureContext incomplete: %+v", fc)
			}
			if c := condition(t, ws, workspacesv1.HelmReleaseReadyCondition); c.Reason != workspacesv1.ReasonHelmReleaseFailed {
				t.Errorf("HelmReleaseReady reason %q, want %s", c.Reason, workspacesv1.ReasonHelmReleaseFailed)
			}
			deleteAndWait(ctx, t, ws, workspaceTimeout)
			return ctx
		}).
		Assess("prerequisites: shared by two classes, conflicting in another namespace", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, c := range []struct{ name, ns string }{{"e2e-pre-a-" + ns, "prereq-system"}, {"e2e-pre-b-" + ns, "prereq-system"}, {"e2e-pre-c-" + ns, "elsewhere"}} {
				class := notebookClass(c.name, notebookTemplate, 0, "")
				class.Spec.Prerequisites = []workspacesv1.Prerequisite{{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: prereqTemplate}, Namespace: c.ns}}
				createClass(ctx, t, class)
			}
			mustCreate(ctx, t, workspace(ns, "pre-a", "e2e-pre-a-"+ns, cd, nil))
			mustCreate(ctx, t, workspace(ns, "pre-b", "e2e-pre-b-"+ns, cd, nil))
			a := waitRunning(ctx, t, ns, "pre-a")
			b := waitRunning(ctx, t, ns, "pre-b")
			if len(a.Status.Prerequisites) != 1 || len(b.Status.Prerequisites) != 1 ||
				a.Status.Prerequisites[0].ServiceSetName == "" || a.Status.Prerequisites[0].ServiceSetName != b.Status.Prerequisites[0].ServiceSetName {
				t.Errorf("prerequisites not shared: %+v vs %+v", a.Status.Prerequisites, b.Status.Prerequisites)
			}
			var sets k0rdentv1beta1.ServiceSetList
			if err := mgmt().List(ctx, &sets, client.InNamespace(ns), client.HasLabels{workspacesv1.PrerequisiteLabel}); err != nil {
				t.Fatal(err)
			}
			if len(sets.Items) != 1 {
				t.Errorf("%d prerequisite ServiceSets, want 1", len(sets.Items))
			}
			var cm corev1.ConfigMapList
			if err := child.Client().List(ctx, &cm, client.InNamespace("prereq-system")); err != nil || len(cm.Items) == 0 {
				t.Errorf("the prerequisite chart is not installed in prereq-system: %v", err)
			}
			mustCreate(ctx, t, workspace(ns, "pre-c", "e2e-pre-c-"+ns, cd, nil))
			c := waitPhase(ctx, t, ns, "pre-c", workspaceTimeout, workspacesv1.PhaseFailed, workspacesv1.PhaseRunning)
			if c.Status.Phase != workspacesv1.PhaseFailed {
				t.Fatalf("pre-c is %s, want Failed", c.Status.Phase)
			}
			if cond := condition(t, c, workspacesv1.PrerequisitesMetCondition); cond.Reason != workspacesv1.ReasonPrerequisiteNamespaceConflict {
				t.Errorf("PrerequisitesMet reason %q, want %s", cond.Reason, workspacesv1.ReasonPrerequisiteNamespaceConflict)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			deleteWorkspacesAndCluster(ctx, t, ns, cd)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

type releaseT = helmrelease.Release

// release returns a workspace's Helm release on the child.
func release(t *testing.T, child *childCluster, ws *workspacesv1.WorkspaceDeployment) *releaseT {
	t.Helper()
	if ws.Status.ReleaseName == "" {
		t.Fatalf("workspace %s has no status.releaseName", ws.Name)
	}
	ns := ws.Status.ReleaseNamespace
	if ns == "" {
		ns = "ws-" + ws.Name
	}
	rel, err := k0rdentsim.Release(child.KubeconfigPath, ns, ws.Status.ReleaseName)
	if err != nil || rel == nil {
		t.Fatalf("release %s/%s: %v %v", ns, ws.Status.ReleaseName, rel, err)
	}
	return rel
}

// dig walks nested maps.
func dig(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}
