package suites

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// TestValuesContract follows a GPU notebook from the workspace to the pod on the child: the chart
// reads the _exalsius contract as the published workspace charts do, so the pod requests exactly the
// resolved resources on the gated nodes; the password travels in a Secret, never in the ServiceSet;
// a template-looking value arrives verbatim; and rotating the password rolls the release out.
func TestValuesContract(t *testing.T) {
	localOnly(t, "simulated GPU nodes and the simulator's Helm releases")
	var ns string
	var child *childCluster
	const cd = "contract"
	const password, rotated = "hunter2-contract", "correct-horse-battery"
	const verbatim = "{{ .Release.Name }} stays {{- as written -}}"
	f := features.New("values contract").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "contract")
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			child = createClusterDeployment(ctx, t, ns, cd, w.ClusterConfig{Nodes: []w.NodePool{gpuPool("a100", "NVIDIA", "A100", 1, 8)}})
			return ctx
		}).
		Assess("a GPU notebook's pod requests what the workspace resolved, on the gated nodes", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			class := notebookClass("e2e-contract-"+ns, notebookTemplate, 0, "")
			class.Spec.UserFacingConfig = []workspacesv1.UserFacingConfig{
				{HelmValuePath: "notebook.password", DisplayName: "Password", Type: workspacesv1.UserFacingConfigSecret, Required: true},
			}
			createClass(ctx, t, class)
			pw := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "notebook-password"},
				StringData: map[string]string{"values.yaml": "notebook:\n  password: " + password + "\n"}}
			mustCreate(ctx, t, pw)

			cpu, mem := resource.MustParse("8"), resource.MustParse("16Gi")
			res := gpuOverride(1, "A100", nil)
			res.PerReplica.CPU, res.PerReplica.Memory = &cpu, &mem
			ws := workspace(ns, "gpu-notebook", class.Name, cd, res)
			ws.Spec.Values = jsonOf(t, map[string]any{"greeting": verbatim})
			ws.Spec.ValuesFrom = []workspacesv1.ValuesFromSource{{Kind: workspacesv1.ValuesSourceSecret, Name: pw.Name}}
			mustCreate(ctx, t, ws)
			got := waitRunning(ctx, t, ns, ws.Name)

			gated := got.Status.ResolvedResources.NodeSelector
			if len(gated) == 0 || gated[w.GPUModelLabel] != "A100" {
				t.Fatalf("resolved node selector %v, want the A100 selector the gate checked", gated)
			}
			// The chart applies _exalsius.scheduling.nodeSelector verbatim: the selector the gate checked
			// plus, when the admission counted every replica on one node, that node's hostname (the pin,
			// docs/RECONCILIATION.md). One replica of one GPU on a one-node pool is always pinned.
			ad := got.Status.Admission
			if ad == nil || len(ad.Nodes) != 1 || ad.Nodes[0].Hostname == "" {
				t.Fatalf("admission %+v, want the one node the replica was counted on", ad)
			}
			pinned := map[string]string{corev1.LabelHostname: ad.Nodes[0].Hostname}
			for k, v := range gated {
				pinned[k] = v
			}
			pod := runningPods(ctx, t, child, ws.Name, 1)[0]
			if !reflect.DeepEqual(pod.Spec.NodeSelector, pinned) {
				t.Errorf("pod nodeSelector %v, want exactly the gated selector and the pin %v", pod.Spec.NodeSelector, pinned)
			}
			if pod.Spec.NodeName != ad.Nodes[0].Name {
				t.Errorf("pod on node %s, admitted on %s", pod.Spec.NodeName, ad.Nodes[0].Name)
			}
			want := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, "nvidia.com/gpu": resource.MustParse("1")}
			c := pod.Spec.Containers[0]
			for name, q := range want {
				if r := c.Resources.Requests[name]; r.Cmp(q) != 0 {
					t.Errorf("request %s = %s, want %s", name, r.String(), q.String())
				}
				if l := c.Resources.Limits[name]; l.Cmp(q) != 0 {
					t.Errorf("limit %s = %s, want %s", name, l.String(), q.String())
				}
			}

			rel := release(t, child, got)
			if v := dig(rel.Config, "notebook", "password"); v != password {
				t.Errorf("release notebook.password did not come from the Secret (got %d characters)", len(fmt.Sprint(v)))
			}
			ss := workspaceServiceSet(ctx, t, got)
			for _, svc := range ss.Spec.Services {
				if strings.Contains(svc.Values, password) {
					t.Errorf("ServiceSet %s holds the password inline", ss.Name)
				}
			}
			if len(ss.Spec.Services[0].ValuesFrom) != 1 || ss.Spec.Services[0].ValuesFrom[0].Kind != k0rdentv1beta1.ValuesFromSecret {
				t.Fatalf("ServiceSet valuesFrom %+v, want the workspace's values Secret", ss.Spec.Services[0].ValuesFrom)
			}
			var vs corev1.Secret
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: ss.Spec.Services[0].ValuesFrom[0].Name}, &vs); err != nil {
				t.Fatal(err)
			}
			if len(vs.OwnerReferences) != 1 || vs.OwnerReferences[0].UID != ss.UID {
				t.Errorf("values Secret owners %+v, want the ServiceSet", vs.OwnerReferences)
			}
			return ctx
		}).
		Assess("rotating the password Secret rolls the release out", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var ws workspacesv1.WorkspaceDeployment
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "gpu-notebook"}, &ws); err != nil {
				t.Fatal(err)
			}
			before := release(t, child, &ws).Version
			var pw corev1.Secret
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "notebook-password"}, &pw); err != nil {
				t.Fatal(err)
			}
			pw.Data = map[string][]byte{"values.yaml": []byte("notebook:\n  password: " + rotated + "\n")}
			if err := mgmt().Update(ctx, &pw); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, "the release carries the rotated password", workspaceTimeout, func(ctx context.Context) (bool, string) {
				rel := release(t, child, &ws)
				if rel.Version <= before {
					return false, fmt.Sprintf("release revision %d", rel.Version)
				}
				return dig(rel.Config, "notebook", "password") == rotated, fmt.Sprintf("revision %d without the rotated password", rel.Version)
			})
			return ctx
		}).
		// Last, so that the assessments above run whatever the simulator does with templates: it must
		// render values as Go templates the way Sveltos does for this to pass.
		Assess("a template-looking value reaches the chart verbatim", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var ws workspacesv1.WorkspaceDeployment
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "gpu-notebook"}, &ws); err != nil {
				t.Fatal(err)
			}
			if v := dig(release(t, child, &ws).Config, "greeting"); v != verbatim {
				t.Errorf("greeting reached the chart as %q, want %q verbatim", v, verbatim)
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

// workspaceServiceSet returns the ServiceSet named in a workspace's status.
func workspaceServiceSet(ctx context.Context, t *testing.T, ws *workspacesv1.WorkspaceDeployment) *k0rdentv1beta1.ServiceSet {
	t.Helper()
	var ss k0rdentv1beta1.ServiceSet
	key := types.NamespacedName{Namespace: ws.Spec.ClusterDeploymentRef.Namespace, Name: ws.Status.ServiceSetName}
	if err := mgmt().Get(ctx, key, &ss); err != nil {
		t.Fatalf("ServiceSet %s: %v", key, err)
	}
	return &ss
}
