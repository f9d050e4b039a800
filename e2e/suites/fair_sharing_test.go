package suites

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// TestThreeTeamsShareAFleet plays the day of docs/fair-sharing.md: three teams, each guaranteed 8 of a
// platform cluster's 24 GPUs (three nodes of 8) in one cohort, may each borrow up to 16 more. Team a
// borrows while b is idle; c runs within its guarantee; b's workspace arrives, a's borrower gets its
// notice, is stopped after the grace period with its claim kept, b's workspace runs on the freed GPUs,
// and a's workspace comes back, with the same claim, when b's is deleted. The tenants are impersonated
// users bound only to the chart's edit role.
func TestThreeTeamsShareAFleet(t *testing.T) {
	localOnly(t, "simulated GPU nodes and the simulator's Helm releases")
	var platform, class string
	teams := map[string]string{}
	tenants := map[string]client.Client{}
	var child *childCluster
	var claim types.UID
	const cd = "fleet"
	eight := func() *workspacesv1.ResourceOverrides {
		res := gpuOverride(8, "H100", nil)
		storage := resource.MustParse("1Gi")
		res.PerReplica.Storage = &storage
		return res
	}
	create := func(ctx context.Context, t *testing.T, team, name string) {
		t.Helper()
		ws := workspace(teams[team], name, class, cd, eight())
		ws.Spec.ClusterDeploymentRef.Namespace = platform
		if err := tenants[teams[team]].Create(ctx, ws); err != nil {
			t.Fatalf("team %s creates %s: %v", team, name, err)
		}
	}
	running := func(ctx context.Context, t *testing.T, team, name string) *workspacesv1.WorkspaceDeployment {
		t.Helper()
		return tenantWaitPhase(ctx, t, tenants[teams[team]], teams[team], name, workspacesv1.PhaseRunning)
	}
	claimOf := func(ctx context.Context, t *testing.T, ws *workspacesv1.WorkspaceDeployment) types.UID {
		t.Helper()
		var uid types.UID
		eventually(ctx, t, "the claim of "+ws.Name+" bound", workspaceTimeout, func(ctx context.Context) (bool, string) {
			var pvcs corev1.PersistentVolumeClaimList
			if err := child.Client().List(ctx, &pvcs, client.InNamespace(ws.Status.ReleaseNamespace)); err != nil {
				return false, err.Error()
			}
			for _, p := range pvcs.Items {
				if p.Status.Phase == corev1.ClaimBound {
					uid = p.UID
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d claims in %s, none bound", len(pvcs.Items), ws.Status.ReleaseNamespace)
		})
		return uid
	}
	f := features.New("three teams share 24 GPUs").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			platform = newNamespace(ctx, t, "share-platform")
			for _, team := range []string{"a", "b", "c"} {
				teams[team] = newNamespace(ctx, t, "share-"+team)
			}
			grantWorkspacesFrom(ctx, t, platform, teams["a"]+", "+teams["b"]+", "+teams["c"])
			class = "e2e-share-" + platform
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", platform)
			child = createClusterDeployment(ctx, t, platform, cd, w.ClusterConfig{Nodes: []w.NodePool{gpuPool("h100", "NVIDIA", "H100", 3, 8)}})
			createClass(ctx, t, notebookClass(class, notebookTemplate, 8, workspacesv1.GPUVendorNVIDIA))
			guaranteed, borrowing := int64(8), int64(16)
			for _, ns := range teams {
				var n corev1.Namespace
				if err := mgmt().Get(ctx, types.NamespacedName{Name: ns}, &n); err != nil {
					t.Fatal(err)
				}
				patch := client.MergeFrom(n.DeepCopy())
				if n.Labels == nil {
					n.Labels = map[string]string{}
				}
				n.Labels[workspacesv1.CohortLabel] = "fleet-" + platform
				if err := mgmt().Patch(ctx, &n, patch); err != nil {
					t.Fatal(err)
				}
				mustCreate(ctx, t, &workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"},
					Spec: workspacesv1.WorkspaceQuotaSpec{
						GPUs: []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: 24, Guaranteed: &guaranteed, BorrowingLimit: &borrowing}},
						// The day runs in minutes: 20 seconds of notice stand for the page's 10 minutes.
						ReclaimGracePeriod: &metav1.Duration{Duration: 20 * time.Second},
					}})
			}
			editTenants(ctx, t, tenants, teams["a"], teams["b"], teams["c"])
			return ctx
		}).
		Assess("morning: a runs within its guarantee and borrows b's idle GPUs; c runs within its own", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			create(ctx, t, "a", "a-train")
			running(ctx, t, "a", "a-train")
			create(ctx, t, "a", "a-explore")
			ws := running(ctx, t, "a", "a-explore")
			if ad := ws.Status.Admission; ad == nil || ad.BorrowedGPUs != 8 {
				t.Fatalf("a-explore's admission %+v: want 8 borrowed GPUs", ad)
			}
			claim = claimOf(ctx, t, ws)
			create(ctx, t, "c", "c-serve")
			running(ctx, t, "c", "c-serve")
			return ctx
		}).
		Assess("noon: b's workspace arrives; a's borrower gets its notice and is stopped, its claim kept", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			create(ctx, t, "b", "b-notebook")
			eventually(ctx, t, "a-explore told to give its GPUs back", workspaceTimeout, func(ctx context.Context) (bool, string) {
				var ws workspacesv1.WorkspaceDeployment
				if err := tenants[teams["a"]].Get(ctx, types.NamespacedName{Namespace: teams["a"], Name: "a-explore"}, &ws); err != nil {
					return false, err.Error()
				}
				if r := ws.Status.Reclaim; r != nil {
					return true, ""
				}
				return false, fmt.Sprintf("phase %s: %s", ws.Status.Phase, ws.Status.Message)
			})
			ws := tenantWaitPhase(ctx, t, tenants[teams["a"]], teams["a"], "a-explore", workspacesv1.PhaseStopped)
			eventually(ctx, t, "a-explore Reclaimed, its GPUs given back", workspaceTimeout, func(ctx context.Context) (bool, string) {
				if err := tenants[teams["a"]].Get(ctx, client.ObjectKeyFromObject(ws), ws); err != nil {
					return false, err.Error()
				}
				c := condition(t, ws, workspacesv1.ReadyCondition)
				return c.Reason == workspacesv1.ReasonReclaimed && ws.Status.Admission == nil, c.Reason + ": " + c.Message
			})
			if ws.Spec.Stopped {
				t.Error("the reclaim wrote a-explore's spec.stopped")
			}
			running(ctx, t, "b", "b-notebook")
			running(ctx, t, "a", "a-train") // within its guarantee: never stopped
			if got := claimOf(ctx, t, ws); got != claim {
				t.Errorf("a-explore's claim %s after the stop, want %s", got, claim)
			}
			return ctx
		}).
		Assess("evening: b's workspace is deleted; a's comes back with the same claim", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if err := tenants[teams["b"]].Delete(ctx, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: teams["b"], Name: "b-notebook"}}); err != nil {
				t.Fatal(err)
			}
			ws := running(ctx, t, "a", "a-explore")
			if ws.Status.Reclaim != nil {
				t.Errorf("a-explore runs again with status.reclaim %+v", ws.Status.Reclaim)
			}
			if got := claimOf(ctx, t, ws); got != claim {
				t.Errorf("a-explore's claim %s after the start, want %s", got, claim)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, ns := range teams {
				var list workspacesv1.WorkspaceDeploymentList
				if err := mgmt().List(ctx, &list, client.InNamespace(ns)); err == nil {
					for i := range list.Items {
						deleteAndWait(ctx, t, &list.Items[i], workspaceTimeout)
					}
				}
			}
			deleteWorkspacesAndCluster(ctx, t, platform, cd)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
