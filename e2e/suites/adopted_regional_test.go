package suites

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// TestAdoptedAndRegionalClusters: a Colony with an adopted entry (a ClusterTemplate of provider
// infrastructure-internal: a SveltosCluster and the Credential's identity Secret, no
// `<cd>-kubeconfig`) and a regional entry (a Credential with a region: its `<cd>-kubeconfig` lives on
// the Region's cluster, itself a ClusterDeployment). Both become Ready, show their GPUs in the
// inventory, run a GPU workspace each, and are cleaned up.
func TestAdoptedAndRegionalClusters(t *testing.T) {
	localOnly(t, "the simulator provisions adopted and regional clusters")
	var ns, region string
	const colony = "kinds"
	f := features.New("adopted and regional clusters").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "kinds")
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			createClass(ctx, t, notebookClass("e2e-kinds-"+ns, notebookTemplate, 1, workspacesv1.GPUVendorNVIDIA))
			// The regional cluster is a ClusterDeployment of its own; the Region names it.
			createClusterDeployment(ctx, t, ns, "region-host", w.ClusterConfig{Nodes: []w.NodePool{{Name: "cpu"}}})
			region = "region-" + ns
			r := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
				"clusterDeployment": map[string]any{"name": "region-host", "namespace": ns}}}}
			r.SetGroupVersionKind(k0rdentv1beta1.GroupVersion.WithKind("Region"))
			r.SetName(region)
			mustCreate(ctx, t, r)
			mustCreate(ctx, t, &k0rdentv1beta1.Credential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regional-cred"},
				Spec: k0rdentv1beta1.CredentialSpec{Region: region,
					IdentityRef: &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: ns, Name: "sim-identity"}}})
			mustCreate(ctx, t, &k0rdentv1beta1.Credential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "adopted-cred"},
				Spec: k0rdentv1beta1.CredentialSpec{
					IdentityRef: &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: ns, Name: "adopted-kubeconf"}}})
			for _, cred := range []string{"regional-cred", "adopted-cred"} {
				eventually(ctx, t, "Credential "+cred+" ready", clusterTimeout, func(ctx context.Context) (bool, string) {
					var c k0rdentv1beta1.Credential
					if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: cred}, &c); err != nil {
						return false, err.Error()
					}
					return c.Status.Ready, "not ready"
				})
			}
			return ctx
		}).
		Assess("a Colony with an adopted and a regional entry becomes Ready", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			entry := func(name, template, cred string) infrav1.ColonyCluster {
				return infrav1.ColonyCluster{ClusterName: name, ClusterDeploymentSpec: *jsonOf(t, map[string]any{
					"template": template, "credential": cred,
					"config": w.ClusterConfig{Nodes: []w.NodePool{gpuPool("a100", "NVIDIA", "A100", 1, 4)}},
				})}
			}
			mustCreate(ctx, t, &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: colony},
				Spec: infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{
					entry("adopted", k0rdentsim.AdoptedClusterTemplateName, "adopted-cred"),
					entry("regional", k0rdentsim.ClusterTemplateName, "regional-cred"),
				}}})
			waitColony(ctx, t, ns, colony, 2, 2)
			// Neither kind has `<cd>-kubeconfig` on the management cluster.
			for _, cd := range []string{colony + "-adopted", colony + "-regional"} {
				err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: cd + "-kubeconfig"}, &corev1.Secret{})
				if !apierrors.IsNotFound(err) {
					t.Errorf("%s-kubeconfig on the management cluster: %v, want none", cd, err)
				}
			}
			sc := &unstructured.Unstructured{}
			sc.SetGroupVersionKind(k0rdentsim.SveltosClusterGVK)
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: colony + "-adopted"}, sc); err != nil {
				t.Errorf("SveltosCluster of the adopted cluster: %v", err)
			}
			host, err := tgt.Child(ctx, ns, "region-host")
			if err != nil || host == nil || host.local == nil {
				t.Fatalf("the regional cluster: %v", err)
			}
			if err := host.local.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: colony + "-regional-kubeconfig"}, &corev1.Secret{}); err != nil {
				t.Errorf("the regional child's kubeconfig Secret on the regional cluster: %v", err)
			}
			return ctx
		}).
		Assess("the inventory shows both clusters' GPUs", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			eventually(ctx, t, "gpuInventory of both entries", clusterTimeout, func(ctx context.Context) (bool, string) {
				var c infrav1.Colony
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: colony}, &c); err != nil {
					return false, err.Error()
				}
				for _, cd := range []string{colony + "-adopted", colony + "-regional"} {
					inv, ok := c.Status.GPUInventory[cd]
					if !ok || !inv.Reachable || len(inv.Offerings) != 1 || inv.Offerings[0].Model != "A100" || inv.Offerings[0].Total != 4 {
						return false, fmt.Sprintf("%s: %+v", cd, c.Status.GPUInventory)
					}
				}
				return true, ""
			})
			return ctx
		}).
		Assess("a GPU workspace runs on each, and is deleted with its release namespace", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, cd := range []string{"adopted", "regional"} {
				mustCreate(ctx, t, workspace(ns, "nb-"+cd, "e2e-kinds-"+ns, colony+"-"+cd, gpuOverride(1, "A100", nil)))
			}
			for _, cd := range []string{"adopted", "regional"} {
				waitRunning(ctx, t, ns, "nb-"+cd)
				child, err := tgt.Child(ctx, ns, colony+"-"+cd)
				if err != nil || child == nil {
					t.Fatalf("child of %s: %v", cd, err)
				}
				assertPod(ctx, t, child, "nb-"+cd, "nvidia.com/gpu", 1, map[string]string{w.GPUModelLabel: "A100"}, "a100")
			}
			for _, cd := range []string{"adopted", "regional"} {
				deleteAndWait(ctx, t, workspace(ns, "nb-"+cd, "", "", nil), workspaceTimeout)
				child, _ := tgt.Child(ctx, ns, colony+"-"+cd)
				eventually(ctx, t, "release namespace of nb-"+cd+" gone on its child", workspaceTimeout, func(ctx context.Context) (bool, string) {
					var n corev1.Namespace
					err := child.local.Client().Get(ctx, types.NamespacedName{Name: "ws-nb-" + cd}, &n)
					return apierrors.IsNotFound(err) || (err == nil && !n.DeletionTimestamp.IsZero()), fmt.Sprint(err)
				})
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			deleteAndWait(ctx, t, &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: colony}}, clusterTimeout)
			r := &unstructured.Unstructured{}
			r.SetGroupVersionKind(k0rdentv1beta1.GroupVersion.WithKind("Region"))
			r.SetName(region)
			_ = mgmt().Delete(ctx, r)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
