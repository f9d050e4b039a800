package suites

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// TestSharedFleet: a platform namespace runs a Colony of three GPU clusters and grants two tenant
// namespaces its use; each tenant has a WorkspaceQuota. The tenants, impersonated users bound only to
// the chart's edit role, place workspaces on the fleet from their own namespaces, by colonyRef and by
// clusterSelector naming the platform namespace: they are placed and run there, each tenant's quota
// holds them back on its own, and no Secret is ever made in a tenant namespace. A namespace the
// platform did not grant is refused, naming the field.
func TestSharedFleet(t *testing.T) {
	localOnly(t, "Colony entries of the simulator's ClusterTemplate with GPU node pools")
	var platform, nsA, nsB, nsC, class string
	tenants := map[string]client.Client{}
	f := features.New("a shared fleet placed from two tenant namespaces").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			platform = newNamespace(ctx, t, "fleet-platform")
			nsA, nsB, nsC = newNamespace(ctx, t, "fleet-a"), newNamespace(ctx, t, "fleet-b"), newNamespace(ctx, t, "fleet-c")
			grantWorkspacesFrom(ctx, t, platform, nsA+", "+nsB)
			class = "e2e-shared-fleet-" + platform
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", platform)
			mustCreate(ctx, t, &infrav1.Colony{
				ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "fleet"},
				Spec: infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{
					colonyEntry(t, "x", gpuPool("l4", "NVIDIA", "L4", 1, 2)),
					colonyEntry(t, "y", gpuPool("l4", "NVIDIA", "L4", 1, 2)),
					colonyEntry(t, "z", gpuPool("l4", "NVIDIA", "L4", 1, 1)),
				}},
			})
			waitColony(ctx, t, platform, "fleet", 3, 3)
			createClass(ctx, t, notebookClass(class, notebookTemplate, 1, workspacesv1.GPUVendorNVIDIA))
			for ns, limit := range map[string]int64{nsA: 2, nsB: 1} {
				mustCreate(ctx, t, &workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"},
					Spec: workspacesv1.WorkspaceQuotaSpec{GPUs: []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: limit}}}})
			}
			editTenants(ctx, t, tenants, nsA, nsB, nsC)
			return ctx
		}).
		Assess("both tenants place on the platform's fleet, each within its own quota", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			byColony := func(ns, name string) *workspacesv1.WorkspaceDeployment {
				ws := workspace(ns, name, class, "", gpuOverride(1, "L4", nil))
				ws.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{}
				ws.Spec.ColonyRef = &workspacesv1.ColonyRef{Name: "fleet", Namespace: platform}
				return ws
			}
			bySelector := func(ns, name string) *workspacesv1.WorkspaceDeployment {
				ws := workspace(ns, name, class, "", gpuOverride(1, "L4", nil))
				ws.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{}
				ws.Spec.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{infrav1.ColonyLabel: "fleet"}}
				ws.Spec.ClusterSelectorNamespace = platform
				return ws
			}
			create := func(ws *workspacesv1.WorkspaceDeployment) {
				t.Helper()
				if err := tenants[ws.Namespace].Create(ctx, ws); err != nil {
					t.Fatalf("tenant %s creates workspace %s: %v", ws.Namespace, ws.Name, err)
				}
			}
			placed := func(ns, name string) *workspacesv1.WorkspaceDeployment {
				t.Helper()
				ws := tenantWaitPhase(ctx, t, tenants[ns], ns, name, workspacesv1.PhaseRunning)
				p := ws.Status.Placement
				if p == nil || p.Namespace != platform || !strings.HasPrefix(p.Cluster, "fleet-") {
					t.Fatalf("%s/%s placement %+v, want a cluster of Colony %s/fleet", ns, name, p, platform)
				}
				child := waitChild(ctx, t, platform, p.Cluster)
				var pods corev1.PodList
				eventually(ctx, t, fmt.Sprintf("a Running pod of %s/%s on %s", ns, name, p.Cluster), workspaceTimeout, func(ctx context.Context) (bool, string) {
					if err := child.Client().List(ctx, &pods, client.InNamespace(ws.Status.ReleaseNamespace)); err != nil {
						return false, err.Error()
					}
					for _, pod := range pods.Items {
						if pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
							return true, ""
						}
					}
					return false, fmt.Sprintf("%d pods in %s", len(pods.Items), ws.Status.ReleaseNamespace)
				})
				return ws
			}
			quotaWaiter := func(ns, name string) {
				t.Helper()
				ws := tenantWaitPhase(ctx, t, tenants[ns], ns, name, workspacesv1.PhaseWaiting)
				eventually(ctx, t, ns+"/"+name+" waits for its quota, unplaced", workspaceTimeout, func(ctx context.Context) (bool, string) {
					if err := tenants[ns].Get(ctx, client.ObjectKeyFromObject(ws), ws); err != nil {
						return false, err.Error()
					}
					c := condition(t, ws, workspacesv1.ReadyCondition)
					return ws.Status.Phase == workspacesv1.PhaseWaiting && c.Reason == workspacesv1.ReasonQuotaExceeded && ws.Status.Placement == nil,
						fmt.Sprintf("phase %s %s: %s", ws.Status.Phase, c.Reason, c.Message)
				})
			}

			create(byColony(nsA, "a1"))
			create(bySelector(nsA, "a2"))
			create(byColony(nsB, "b1"))
			placed(nsA, "a1")
			placed(nsA, "a2")
			placed(nsB, "b1")
			// Five GPUs in the fleet, three held: the quotas, not the fleet, keep these waiting.
			create(byColony(nsA, "a3"))
			create(bySelector(nsB, "b2"))
			quotaWaiter(nsA, "a3")
			quotaWaiter(nsB, "b2")
			for ns, used := range map[string]int64{nsA: 2, nsB: 1} {
				eventually(ctx, t, "tenant "+ns+" reads its quota", workspaceTimeout, func(ctx context.Context) (bool, string) {
					var q workspacesv1.WorkspaceQuota
					if err := tenants[ns].Get(ctx, types.NamespacedName{Namespace: ns, Name: "team"}, &q); err != nil {
						return false, err.Error()
					}
					return len(q.Status.GPUs) == 1 && q.Status.GPUs[0].Used == used && q.Status.Waiting == 1, "status " + q.Status.Summary
				})
			}

			// A namespace the platform did not grant is refused, naming the field.
			err := tenants[nsC].Create(ctx, byColony(nsC, "c1"))
			if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || err == nil || !strings.Contains(err.Error(), "spec.colonyRef.namespace") {
				t.Errorf("a workspace of an ungranted namespace on the fleet: %v, want a refusal naming spec.colonyRef.namespace", err)
			}

			// Nothing of the fleet's credentials, and no values Secret, is ever made in a tenant namespace.
			for _, ns := range []string{nsA, nsB} {
				var secrets corev1.SecretList
				if err := mgmt().List(ctx, &secrets, client.InNamespace(ns)); err != nil {
					t.Fatal(err)
				}
				for _, s := range secrets.Items {
					t.Errorf("Secret %s/%s in a tenant namespace", ns, s.Name)
				}
			}

			for _, k := range []types.NamespacedName{{Namespace: nsA, Name: "a1"}, {Namespace: nsA, Name: "a2"}, {Namespace: nsA, Name: "a3"},
				{Namespace: nsB, Name: "b1"}, {Namespace: nsB, Name: "b2"}} {
				ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
				if err := tenants[k.Namespace].Delete(ctx, ws); err != nil {
					t.Fatalf("tenant %s deletes %s: %v", k.Namespace, k.Name, err)
				}
			}
			for _, k := range []types.NamespacedName{{Namespace: nsA, Name: "a1"}, {Namespace: nsA, Name: "a2"}, {Namespace: nsA, Name: "a3"},
				{Namespace: nsB, Name: "b1"}, {Namespace: nsB, Name: "b2"}} {
				deleteAndWait(ctx, t, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}, workspaceTimeout)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			deleteAndWait(ctx, t, &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "fleet"}}, clusterTimeout)
			return ctx
		}).Feature()
	testEnv.Test(t, f)
}
