package suites

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
	"github.com/exalsius/exalsius-operator/e2e/internal/stack"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// chartEditRole is the tenant role the chart ships (rbac.userRoles), aggregated into the built-in edit.
const chartEditRole = stack.ChartRelease + "-workspaces-edit"

// tenantWaitPhase waits, reading as the tenant, until its workspace reaches one of the phases at its
// current generation.
func tenantWaitPhase(ctx context.Context, t *testing.T, tc client.Client, ns, name string, phases ...workspacesv1.WorkspacePhase) *workspacesv1.WorkspaceDeployment {
	t.Helper()
	var ws workspacesv1.WorkspaceDeployment
	eventually(ctx, t, fmt.Sprintf("the tenant reads %s/%s in %v", ns, name, phases), workspaceTimeout, func(ctx context.Context) (bool, string) {
		if err := tc.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &ws); err != nil {
			return false, err.Error()
		}
		for _, p := range phases {
			if ws.Status.Phase == p && ws.Status.ObservedGeneration == ws.Generation {
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %q (generation %d observed %d) message %q", ws.Status.Phase, ws.Generation, ws.Status.ObservedGeneration, ws.Status.Message)
	})
	return &ws
}

// tenantPatch changes the tenant's workspace through the tenant's client.
func tenantPatch(ctx context.Context, t *testing.T, tc client.Client, ns, name string, change func(*workspacesv1.WorkspaceDeployment)) {
	t.Helper()
	var ws workspacesv1.WorkspaceDeployment
	if err := tc.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &ws); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ws.DeepCopy())
	change(&ws)
	if err := tc.Patch(ctx, &ws, patch); err != nil {
		t.Fatalf("the tenant patches its workspace: %v", err)
	}
}

// wantForbidden fails unless err is the API server's authorization refusal.
func wantForbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v, want Forbidden", what, err)
	}
}

// TestTenantsDay: a tenant's whole day, as an impersonated user whose only right is a RoleBinding in
// its namespace to the edit role the chart ships. It creates a GPU workspace, changes its values,
// stops and starts it, reads its namespace's WorkspaceQuota and deletes the workspace; it cannot write
// status, a WorkspaceQuota, a ServiceSet or a Colony, nor create a workspace in another namespace; a
// class for other namespaces (spec.allowedNamespaces) and a value path a class does not declare
// (valuesPolicy Declared) are refused, naming the field; a class that injects the scheduling entries
// into the chart's paths overrides the node selector and tolerations the tenant set.
func TestTenantsDay(t *testing.T) {
	localOnly(t, "simulated GPU nodes and the simulator's Helm releases")
	var ns, other string
	var child *childCluster
	var tc client.Client
	const cd = "day"
	f := features.New("a tenant's day with the chart's edit role").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "tenant-day")
			other = ns + "-elsewhere" // authorization refuses before the namespace is looked up
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			child = createClusterDeployment(ctx, t, ns, cd, w.ClusterConfig{Nodes: []w.NodePool{gpuPool("l4", "NVIDIA", "L4", 1, 1)}})
			createClass(ctx, t, notebookClass("e2e-day-"+ns, notebookTemplate, 1, workspacesv1.GPUVendorNVIDIA))
			two, three := int64(2), int32(3)
			mustCreate(ctx, t, &workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"},
				Spec: workspacesv1.WorkspaceQuotaSpec{GPUs: []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: two}}, Workspaces: &three}})
			var err error
			tc, err = testenv.TenantBoundTo(ctx, mgmt(), tgt.Config(), ns, "tenant-"+ns, chartEditRole, rbacv1.PolicyRule{
				APIGroups: []string{workspacesv1.GroupVersion.Group}, Resources: []string{"workspacedeployments"}, Verbs: []string{"create"}})
			if err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("create, change values, stop, start, read the quota, delete", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ws := workspace(ns, "nb", "e2e-day-"+ns, cd, nil)
			ws.Spec.Values = jsonOf(t, map[string]any{"notebook": map[string]any{"ui": "lab"}})
			if err := tc.Create(ctx, ws); err != nil {
				t.Fatalf("the tenant creates a workspace: %v", err)
			}
			got := tenantWaitPhase(ctx, t, tc, ns, "nb", workspacesv1.PhaseRunning)

			tenantPatch(ctx, t, tc, ns, "nb", func(ws *workspacesv1.WorkspaceDeployment) {
				ws.Spec.Values = jsonOf(t, map[string]any{"notebook": map[string]any{"ui": "tree"}})
			})
			eventually(ctx, t, "the release carries the tenant's new values", workspaceTimeout, func(ctx context.Context) (bool, string) {
				rel, err := k0rdentsim.Release(child.KubeconfigPath, "ws-nb", got.Status.ReleaseName)
				if err != nil || rel == nil {
					return false, fmt.Sprint("release: ", err)
				}
				return dig(rel.Config, "notebook", "ui") == "tree", fmt.Sprintf("notebook.ui %v", dig(rel.Config, "notebook", "ui"))
			})
			tenantWaitPhase(ctx, t, tc, ns, "nb", workspacesv1.PhaseRunning)

			tenantPatch(ctx, t, tc, ns, "nb", func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Stopped = true })
			tenantWaitPhase(ctx, t, tc, ns, "nb", workspacesv1.PhaseStopped)
			waitReleaseReplicas(ctx, t, child, got, 0)
			tenantPatch(ctx, t, tc, ns, "nb", func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Stopped = false })
			tenantWaitPhase(ctx, t, tc, ns, "nb", workspacesv1.PhaseRunning)

			eventually(ctx, t, "the tenant reads its quota's use", workspaceTimeout, func(ctx context.Context) (bool, string) {
				var q workspacesv1.WorkspaceQuota
				if err := tc.Get(ctx, types.NamespacedName{Namespace: ns, Name: "team"}, &q); err != nil {
					return false, err.Error()
				}
				ok := q.Status.Workspaces == 1 && len(q.Status.GPUs) == 1 && q.Status.GPUs[0].Used == 1
				return ok, "status " + q.Status.Summary
			})

			var mine workspacesv1.WorkspaceDeployment
			if err := tc.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nb"}, &mine); err != nil {
				t.Fatal(err)
			}
			if err := tc.Delete(ctx, &mine); err != nil {
				t.Fatalf("the tenant deletes its workspace: %v", err)
			}
			eventually(ctx, t, "the tenant's workspace gone", workspaceTimeout, func(ctx context.Context) (bool, string) {
				err := tc.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nb"}, &workspacesv1.WorkspaceDeployment{})
				return apierrors.IsNotFound(err), fmt.Sprint(err)
			})
			return ctx
		}).
		Assess("what the edit role never grants", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ws := workspace(ns, "forged", "e2e-day-"+ns, cd, nil)
			if err := tc.Create(ctx, ws); err != nil {
				t.Fatalf("the tenant creates a workspace: %v", err)
			}
			patch := client.MergeFrom(ws.DeepCopy())
			ws.Status.Admission = &workspacesv1.Admission{Cluster: ns + "/" + cd, GPUs: 8, Replicas: 1}
			wantForbidden(t, "status write", tc.Status().Patch(ctx, ws, patch))
			wantForbidden(t, "WorkspaceQuota create", tc.Create(ctx, &workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "more"}}))
			var q workspacesv1.WorkspaceQuota
			if err := tc.Get(ctx, types.NamespacedName{Namespace: ns, Name: "team"}, &q); err != nil {
				t.Fatal(err)
			}
			qp := client.MergeFrom(q.DeepCopy())
			q.Spec.GPUs[0].Limit = 100
			wantForbidden(t, "WorkspaceQuota patch", tc.Patch(ctx, &q, qp))
			wantForbidden(t, "ServiceSet create", tc.Create(ctx, &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"},
				Spec: k0rdentv1beta1.ServiceSetSpec{Cluster: cd}}))
			wantForbidden(t, "Colony create", tc.Create(ctx, &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"}}))
			wantForbidden(t, "workspace in another namespace", tc.Create(ctx, workspace(other, "nb", "e2e-day-"+ns, cd, nil)))
			deleteAndWait(ctx, t, ws, workspaceTimeout)
			return ctx
		}).
		Assess("a class for other namespaces is refused, naming the field", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			internal := notebookClass("e2e-day-internal-"+ns, notebookTemplate, 0, "")
			internal.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"exalsius.ai/tier": "internal"}}
			createClass(ctx, t, internal)
			wantDenied(t, tc.Create(ctx, workspace(ns, "privileged", internal.Name, cd, nil)), "spec.workspaceClassRef")
			return ctx
		}).
		Assess("a class that declares its values refuses any other path", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			declared := notebookClass("e2e-day-declared-"+ns, notebookTemplate, 0, "")
			declared.Spec.ValuesPolicy = workspacesv1.ValuesPolicyDeclared
			declared.Spec.UserFacingConfig = []workspacesv1.UserFacingConfig{{HelmValuePath: "notebook.ui", DisplayName: "UI", Type: workspacesv1.UserFacingConfigString}}
			createClass(ctx, t, declared)
			ws := workspace(ns, "escape", declared.Name, cd, nil)
			ws.Spec.Values = jsonOf(t, map[string]any{"notebook": map[string]any{"ui": "lab"}, "namespaceOverride": "kube-system"})
			err := tc.Create(ctx, ws)
			wantDenied(t, err, "spec.values.namespaceOverride")
			if strings.Contains(err.Error(), "kube-system") {
				t.Errorf("the denial quotes the value: %v", err)
			}
			return ctx
		}).
		Assess("a class's scheduling injection overrides the tenant's node selector and tolerations", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			pinned := notebookClass("e2e-day-pinned-"+ns, notebookTemplate, 1, workspacesv1.GPUVendorNVIDIA)
			pinned.Spec.ResourceInjection = &workspacesv1.ResourceInjection{
				NodeSelector: []string{"nodeSelector"}, Affinity: []string{"affinity"}, Tolerations: []string{"tolerations"}}
			pinned.Spec.ComputeQuota = &workspacesv1.ComputeQuota{HeadroomReplicas: 1}
			createClass(ctx, t, pinned)
			ws := workspace(ns, "steer", pinned.Name, cd, nil)
			ws.Spec.Values = jsonOf(t, map[string]any{
				"nodeSelector": map[string]any{"kubernetes.io/hostname": "someone-elses-gpu-node"},
				"tolerations":  []any{map[string]any{"operator": "Exists"}},
			})
			if err := tc.Create(ctx, ws); err != nil {
				t.Fatalf("the tenant creates a workspace: %v", err)
			}
			got := tenantWaitPhase(ctx, t, tc, ns, "steer", workspacesv1.PhaseRunning)
			ad := got.Status.Admission
			if ad == nil || len(ad.Nodes) != 1 || ad.Nodes[0].Hostname == "" {
				t.Fatalf("admission %+v, want one node with its hostname", ad)
			}
			host := ad.Nodes[0].Hostname
			rel, err := k0rdentsim.Release(child.KubeconfigPath, got.Status.ReleaseNamespace, got.Status.ReleaseName)
			if err != nil || rel == nil {
				t.Fatalf("release: %v", err)
			}
			if h := dig(rel.Config, "nodeSelector", "kubernetes.io/hostname"); h != host {
				t.Errorf("the release's nodeSelector hostname is %v, want the admitted node %s", h, host)
			}
			if tol := fmt.Sprint(rel.Config["tolerations"]); !strings.Contains(tol, "nvidia.com/gpu") || !strings.Contains(tol, "NoSchedule") {
				t.Errorf("the release's tolerations are %s, want the GPU taint's only", tol)
			}
			if aff := fmt.Sprint(rel.Config["affinity"]); !strings.Contains(aff, host) {
				t.Errorf("the release's affinity %s does not require the admitted node %s", aff, host)
			}
			for _, p := range runningPods(ctx, t, child, "steer", 1) {
				a := p.Spec.Affinity
				if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
					!strings.Contains(fmt.Sprint(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution), host) || p.Spec.NodeName != ad.Nodes[0].Name {
					t.Errorf("pod %s on %s with affinity %+v, want it required onto %s", p.Name, p.Spec.NodeName, a, ad.Nodes[0].Name)
				}
			}
			// The class's ComputeQuota: the chart sets requests on its container, so its pod runs
			// under a quota of one replica plus one of headroom.
			var q corev1.ResourceQuota
			if err := child.Client().Get(ctx, types.NamespacedName{Namespace: got.Status.ReleaseNamespace, Name: "workspace-gpus"}, &q); err != nil {
				t.Fatal(err)
			}
			if pods, cpu := q.Spec.Hard[corev1.ResourcePods], q.Spec.Hard[corev1.ResourceRequestsCPU]; pods.Value() != 2 || cpu.IsZero() {
				t.Errorf("the quota of %s: %v, want pods=2 and a CPU cap", got.Status.ReleaseNamespace, q.Spec.Hard)
			}
			c := condition(t, got, workspacesv1.ResourcesInjectedCondition)
			if !strings.Contains(c.Message, "nodeSelector") || !strings.Contains(c.Message, "tolerations") {
				t.Errorf("ResourcesInjected %s: %q, want the overwritten paths named", c.Reason, c.Message)
			}
			deleteAndWait(ctx, t, got, workspaceTimeout)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
