package suites

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

const gpuRequestTemplate = "e2e-gpu-request-0-1-0"

// allowFromAll lets workspaces of every namespace target the ClusterDeployments of ns.
func allowFromAll(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	grantWorkspacesFrom(ctx, t, ns, "*")
}

// TestLifecycleRealSequences runs the sequences that used to lose data or double-book GPUs against
// the local world: the same workspace name from two namespaces on one cluster, ServiceSet names that
// joined with "-" would collide, a workspace-controller killed right after an admission, and a chart
// value that asks for more GPUs than the gate admitted.
func TestLifecycleRealSequences(t *testing.T) {
	localOnly(t, "kills the workspace-controller process of the local world")
	var cdNS, otherNS string
	var child *childCluster
	const cd = "real"
	f := features.New("lifecycle under real sequences").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			cdNS = newNamespace(ctx, t, "real")
			otherNS = newNamespace(ctx, t, "team")
			allowFromAll(ctx, t, cdNS)
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", cdNS)
			serviceTemplate(ctx, t, gpuRequestTemplate, "gpu-request", "0.1.0", "kcm-system", cdNS)
			child = createClusterDeployment(ctx, t, cdNS, cd, w.ClusterConfig{Nodes: []w.NodePool{gpuPool("l40", "NVIDIA", "L40S", 1, 2)}})
			return ctx
		}).
		Assess("the same name from another namespace runs next to the owner; deleting it leaves the owner's namespace and release", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			class := notebookClass("e2e-owner-"+cdNS, notebookTemplate, 0, "")
			createClass(ctx, t, class)
			mustCreate(ctx, t, workspace(cdNS, "same", class.Name, cd, nil))
			owner := waitRunning(ctx, t, cdNS, "same")
			other := workspace(otherNS, "same", class.Name, cd, nil)
			other.Spec.ClusterDeploymentRef.Namespace = cdNS
			mustCreate(ctx, t, other)
			got := waitRunning(ctx, t, otherNS, "same")
			if got.Status.ReleaseNamespace == "ws-same" || !strings.HasPrefix(got.Status.ReleaseNamespace, "wst-same-") {
				t.Errorf("the other namespace's workspace installs into %q, want its own wst-same-<qualifier>", got.Status.ReleaseNamespace)
			}
			release(t, child, got)
			deleteAndWait(ctx, t, other, workspaceTimeout)

			var ns corev1.Namespace
			if err := child.Client().Get(ctx, types.NamespacedName{Name: "ws-same"}, &ns); err != nil {
				t.Fatalf("the owner's namespace ws-same: %v", err)
			}
			if ns.DeletionTimestamp != nil {
				t.Fatal("deleting the other namespace's workspace deleted the owner's namespace ws-same")
			}
			if ns.Labels[workspacesv1.WorkspaceUIDLabel] != string(owner.UID) || ns.Labels["pod-security.kubernetes.io/enforce"] != "baseline" {
				t.Errorf("ws-same labels %v: want the owner's uid and Pod Security baseline", ns.Labels)
			}
			runningPods(ctx, t, child, "same", 1)
			release(t, child, waitRunning(ctx, t, cdNS, "same"))
			deleteAndWait(ctx, t, owner, workspaceTimeout)
			return ctx
		}).
		Assess("team/x and team-x get their own ServiceSets and releases", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			class := notebookClass("e2e-names-"+cdNS, notebookTemplate, 0, "")
			createClass(ctx, t, class)
			// otherNS/x and cdNS/<otherNS>-x: joined with "-" both were <cd>-ws-<otherNS>-x.
			a := workspace(otherNS, "x", class.Name, cd, nil)
			a.Spec.ClusterDeploymentRef.Namespace = cdNS
			b := workspace(cdNS, otherNS+"-x", class.Name, cd, nil)
			mustCreate(ctx, t, a)
			mustCreate(ctx, t, b)
			ra := waitRunning(ctx, t, otherNS, "x")
			rb := waitRunning(ctx, t, cdNS, otherNS+"-x")
			if ra.Status.ServiceSetName == rb.Status.ServiceSetName || len(ra.Status.ServiceSetName) > 63 {
				t.Fatalf("ServiceSets %q and %q", ra.Status.ServiceSetName, rb.Status.ServiceSetName)
			}
			for _, ws := range []*workspacesv1.WorkspaceDeployment{ra, rb} {
				var ss k0rdentv1beta1.ServiceSet
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: cdNS, Name: ws.Status.ServiceSetName}, &ss); err != nil {
					t.Fatal(err)
				}
				if ss.Labels[workspacesv1.WorkspaceLabel] != ws.Name || ss.Labels[workspacesv1.WorkspaceNamespaceLabel] != ws.Namespace {
					t.Errorf("ServiceSet %s labelled %v, want %s/%s", ss.Name, ss.Labels, ws.Namespace, ws.Name)
				}
				release(t, child, ws)
			}
			deleteAndWait(ctx, t, ra, workspaceTimeout)
			deleteAndWait(ctx, t, rb, workspaceTimeout)
			return ctx
		}).
		Assess("an admission survives a workspace-controller restart: one GPU is never given twice", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			class := notebookClass("e2e-hold-"+cdNS, notebookTemplate, 2, workspacesv1.GPUVendorNVIDIA)
			createClass(ctx, t, class)
			first := workspace(cdNS, "first", class.Name, cd, gpuOverride(2, "L40S", nil))
			mustCreate(ctx, t, first)
			eventually(ctx, t, "first admitted", workspaceTimeout, func(ctx context.Context) (bool, string) {
				var ws workspacesv1.WorkspaceDeployment
				if err := mgmt().Get(ctx, client.ObjectKeyFromObject(first), &ws); err != nil {
					return false, err.Error()
				}
				return ws.Status.Admission != nil, fmt.Sprintf("phase %s: %s", ws.Status.Phase, ws.Status.Message)
			})
			// Killed right after the admission was recorded, maybe before anything was installed.
			if err := world.Components["workspace-controller"].Restart(ctx, true); err != nil {
				t.Fatal(err)
			}
			second := workspace(cdNS, "second", class.Name, cd, gpuOverride(2, "L40S", nil))
			mustCreate(ctx, t, second)
			waitPhase(ctx, t, cdNS, "second", workspaceTimeout, workspacesv1.PhaseWaiting)
			waitRunning(ctx, t, cdNS, "first")
			runningPods(ctx, t, child, "first", 1)
			got := waitPhase(ctx, t, cdNS, "second", time.Minute, workspacesv1.PhaseWaiting)
			if got.Status.Admission != nil {
				t.Fatalf("the second workspace holds an admission for GPUs the first one holds: %+v", got.Status.Admission)
			}
			deleteAndWait(ctx, t, first, workspaceTimeout)
			waitRunning(ctx, t, cdNS, "second")
			deleteAndWait(ctx, t, second, workspaceTimeout)
			return ctx
		}).
		Assess("a chart value asking more GPUs than admitted: the child refuses the pods and the workspace says why", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			one := int32(1)
			class := &workspacesv1.WorkspaceClass{
				ObjectMeta: metav1.ObjectMeta{Name: "e2e-quota-" + cdNS},
				Spec: workspacesv1.WorkspaceClassSpec{
					DisplayName:     "GPU request",
					ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: gpuRequestTemplate, Namespace: "kcm-system"},
					DefaultResources: workspacesv1.DefaultResources{Replicas: &one, PerReplica: &workspacesv1.PerReplicaResources{
						GPUCount: &one, GPUVendor: workspacesv1.GPUVendorNVIDIA}},
					ResourceInjection: &workspacesv1.ResourceInjection{GPUCount: []string{"gpus"}, Replicas: []string{"replicas"}},
					DeployTimeout:     &metav1.Duration{Duration: 3 * time.Minute},
					HelmOptions:       jsonOf(t, map[string]any{"wait": true, "timeout": "1m"}),
				},
			}
			createClass(ctx, t, class)
			greedy := workspace(cdNS, "greedy", class.Name, cd, nil)
			greedy.Spec.Values = jsonOf(t, map[string]any{"extraGPUs": 1})
			mustCreate(ctx, t, greedy)
			eventually(ctx, t, "the workspace names the quota refusal", workspaceTimeout, func(ctx context.Context) (bool, string) {
				var ws workspacesv1.WorkspaceDeployment
				if err := mgmt().Get(ctx, client.ObjectKeyFromObject(greedy), &ws); err != nil {
					return false, err.Error()
				}
				for _, c := range ws.Status.Conditions {
					if c.Type == workspacesv1.HelmReleaseReadyCondition && c.Reason == workspacesv1.ReasonGpuQuotaExceeded {
						return strings.Contains(ws.Status.Message, "exceeded quota"), ws.Status.Message
					}
				}
				return false, fmt.Sprintf("phase %s: %s", ws.Status.Phase, ws.Status.Message)
			})
			pods, err := workspacePods(ctx, child, "greedy")
			if err != nil {
				t.Fatal(err)
			}
			if len(pods) != 0 {
				t.Errorf("%d pod(s) of the greedy workspace exist on the child; the quota must refuse them", len(pods))
			}
			var q corev1.ResourceQuota
			if err := child.Client().Get(ctx, types.NamespacedName{Namespace: "ws-greedy", Name: "workspace-gpus"}, &q); err != nil {
				t.Fatal(err)
			}
			if got := q.Spec.Hard["requests.nvidia.com/gpu"]; got.Value() != 1 {
				t.Errorf("quota %v: want requests.nvidia.com/gpu=1", q.Spec.Hard)
			}
			deleteAndWait(ctx, t, greedy, workspaceTimeout)
			return ctx
		}).Feature()
	testEnv.Test(t, f)
}
