package suites

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// colonyEntry is one Colony entry of the simulator's template.
func colonyEntry(t *testing.T, name string, pools ...w.NodePool) infrav1.ColonyCluster {
	return infrav1.ColonyCluster{ClusterName: name, ClusterDeploymentSpec: *jsonOf(t, map[string]any{
		"template":   k0rdentsim.ClusterTemplateName,
		"credential": k0rdentsim.CredentialName,
		"config":     w.ClusterConfig{Nodes: pools},
	})}
}

// TestColony adds and removes clusters, uses the aggregated kubeconfig with kubectl and reads the
// GPU inventory.
func TestColony(t *testing.T) {
	localOnly(t, "Colony entries of the simulator's ClusterTemplate with GPU node pools")
	var ns string
	f := features.New("Colony").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "colony")
			return ctx
		}).
		Assess("two clusters become Ready with their ClusterDeployments", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := &infrav1.Colony{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
				Spec: infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{
					colonyEntry(t, "a", gpuPool("a100", "NVIDIA", "A100", 1, 4)),
					colonyEntry(t, "b", w.NodePool{Name: "cpu"}),
				}},
			}
			mustCreate(ctx, t, c)
			waitColony(ctx, t, ns, "fleet", 2, 2)
			for _, cd := range []string{"fleet-a", "fleet-b"} {
				var obj k0rdentv1beta1.ClusterDeployment
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: cd}, &obj); err != nil {
					t.Fatalf("ClusterDeployment %s: %v", cd, err)
				}
				if ref := metav1.GetControllerOf(&obj); ref == nil || ref.Kind != "Colony" || ref.Name != "fleet" {
					t.Errorf("ClusterDeployment %s controller %v, want Colony fleet", cd, ref)
				}
				// The Cluster API Cluster the template made, which the Colony reads too.
				var capi clusterv1.Cluster
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: cd}, &capi); err != nil {
					t.Fatalf("Cluster API Cluster %s: %v", cd, err)
				}
				if !meta.IsStatusConditionTrue(capi.Status.Conditions, clusterv1.ClusterAvailableCondition) {
					t.Errorf("Cluster API Cluster %s not Available: %+v", cd, capi.Status.Conditions)
				}
			}
			return ctx
		}).
		Assess("the aggregated kubeconfig works with kubectl for every cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			path := colonyKubeconfig(ctx, t, ns, "fleet", 2)
			out, err := kubectlWith(ctx, path, "config", "get-contexts", "-o", "name")
			if err != nil {
				t.Fatalf("kubectl config get-contexts: %v\n%s", err, out)
			}
			contexts := strings.Fields(out)
			if len(contexts) != 2 {
				t.Fatalf("contexts %v, want 2", contexts)
			}
			for _, c := range contexts {
				if out, err := kubectlWith(ctx, path, "--context", c, "get", "nodes", "-o", "name"); err != nil || !strings.Contains(out, "node/") {
					t.Errorf("kubectl --context %s get nodes: %v\n%s", c, err, out)
				}
			}
			return ctx
		}).
		Assess("the GPU inventory lists the A100 offering", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			eventually(ctx, t, "gpuInventory of fleet-a", clusterTimeout, func(ctx context.Context) (bool, string) {
				var c infrav1.Colony
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "fleet"}, &c); err != nil {
					return false, err.Error()
				}
				inv, ok := c.Status.GPUInventory["fleet-a"]
				if !ok || !inv.Reachable {
					return false, fmt.Sprintf("inventory %+v", c.Status.GPUInventory)
				}
				for _, o := range inv.Offerings {
					if o.Model == "A100" && o.Vendor == "NVIDIA" && o.ResourceName == "nvidia.com/gpu" && o.Total == 4 && o.Nodes == 1 {
						return true, ""
					}
				}
				return false, fmt.Sprintf("offerings %+v", inv.Offerings)
			})
			return ctx
		}).
		Assess("removing an entry deletes its ClusterDeployment and its child", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var c infrav1.Colony
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "fleet"}, &c); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(c.DeepCopy())
			c.Spec.ColonyClusters = c.Spec.ColonyClusters[:1]
			if err := mgmt().Patch(ctx, &c, patch); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, "ClusterDeployment fleet-b gone", clusterTimeout, func(ctx context.Context) (bool, string) {
				err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "fleet-b"}, &k0rdentv1beta1.ClusterDeployment{})
				return apierrors.IsNotFound(err), fmt.Sprint(err)
			})
			if world.World.Child(k0rdentsim.ChildName(ns, "fleet-b")) != nil {
				t.Error("child fleet-b still runs")
			}
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "fleet-b"}, &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
				t.Errorf("Cluster API Cluster fleet-b: %v, want it gone", err)
			}
			waitColony(ctx, t, ns, "fleet", 1, 1)
			colonyKubeconfig(ctx, t, ns, "fleet", 1)
			return ctx
		}).
		Assess("deleting the Colony deletes its ClusterDeployments", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			deleteAndWait(ctx, t, &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"}}, clusterTimeout)
			var cds k0rdentv1beta1.ClusterDeploymentList
			if err := mgmt().List(ctx, &cds, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			if len(cds.Items) != 0 {
				t.Errorf("%d ClusterDeployment(s) left", len(cds.Items))
			}
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// waitColony waits for a Colony to be Ready with the counts given.
func waitColony(ctx context.Context, t *testing.T, ns, name string, ready, total int32) {
	t.Helper()
	eventually(ctx, t, fmt.Sprintf("Colony %s Ready %d/%d", name, ready, total), clusterTimeout, func(ctx context.Context) (bool, string) {
		var c infrav1.Colony
		if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &c); err != nil {
			return false, err.Error()
		}
		return c.Status.Phase == infrav1.ColonyPhaseReady && c.Status.ReadyClusters == ready && c.Status.TotalClusters == total,
			fmt.Sprintf("phase %s ready %d total %d conditions %v", c.Status.Phase, c.Status.ReadyClusters, c.Status.TotalClusters, c.Status.Conditions)
	})
}

// colonyKubeconfig waits for the Colony's kubeconfig Secret to hold contexts clusters and writes its
// merged kubeconfig into a file.
func colonyKubeconfig(ctx context.Context, t *testing.T, ns, name string, clusters int) string {
	t.Helper()
	var data []byte
	eventually(ctx, t, "Colony kubeconfig Secret", clusterTimeout, func(ctx context.Context) (bool, string) {
		var c infrav1.Colony
		if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &c); err != nil {
			return false, err.Error()
		}
		if c.Status.KubeconfigSecretName == "" {
			return false, "no status.kubeconfigSecretName"
		}
		var s corev1.Secret
		if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: c.Status.KubeconfigSecretName}, &s); err != nil {
			return false, err.Error()
		}
		data = s.Data["kubeconfig"]
		// The index names each ready cluster's Secret, one line each.
		indexed := strings.Count(string(s.Data["index"]), "\n")
		return len(data) > 0 && indexed == clusters, fmt.Sprintf("keys %d, %d clusters indexed, merged %d bytes", len(s.Data), indexed, len(data))
	})
	return writeTemp(t, "colony.kubeconfig", string(data))
}

// kubectlWith runs kubectl with a given kubeconfig.
func kubectlWith(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return kubectlRaw(ctx, append([]string{"--kubeconfig", kubeconfig}, args...)...)
}
