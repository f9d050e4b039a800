package suites

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// fleetWorkspace is a one-L4 workspace placed on any cluster of the Colony fleet.
func fleetWorkspace(ns, name, class string, priority int32) *workspacesv1.WorkspaceDeployment {
	ws := workspace(ns, name, class, "", gpuOverride(1, "L4", nil))
	ws.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{}
	ws.Spec.ColonyRef = &workspacesv1.ColonyRef{Name: "fleet"}
	ws.Spec.Priority = priority
	return ws
}

// waitPlaced waits for a workspace to be Running and checks its placement.
func waitPlaced(ctx context.Context, t *testing.T, ns, name, cluster, reason string) *workspacesv1.WorkspaceDeployment {
	t.Helper()
	ws := waitRunning(ctx, t, ns, name)
	p := ws.Status.Placement
	if p == nil || p.Cluster != cluster || p.Namespace != ns || p.Reason != reason {
		t.Fatalf("workspace %s placement %+v, want cluster %s/%s reason %s", name, p, ns, cluster, reason)
	}
	return ws
}

// waitQuotaWaiter waits for a workspace to be Waiting for the namespace's quota, unplaced.
func waitQuotaWaiter(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	eventually(ctx, t, "workspace "+name+" Waiting/QuotaExceeded", workspaceTimeout, func(ctx context.Context) (bool, string) {
		var ws workspacesv1.WorkspaceDeployment
		if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &ws); err != nil {
			return false, err.Error()
		}
		if ws.Status.Phase == workspacesv1.PhaseRunning || ws.Status.Phase == workspacesv1.PhaseFailed {
			t.Fatalf("workspace %s is %s (%s), want Waiting for the quota", name, ws.Status.Phase, ws.Status.Message)
		}
		c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReadyCondition)
		if c == nil {
			return false, "no Ready condition yet"
		}
		return ws.Status.Phase == workspacesv1.PhaseWaiting && c.Reason == workspacesv1.ReasonQuotaExceeded &&
				ws.Status.Placement == nil && ws.Status.Admission == nil,
			fmt.Sprintf("phase %s %s: %s, placement %+v", ws.Status.Phase, c.Reason, c.Message, ws.Status.Placement)
	})
}

// waitQuotaUse waits for the WorkspaceQuota's status to show used of its NVIDIA limit and waiting
// workspaces.
func waitQuotaUse(ctx context.Context, t *testing.T, ns, name string, used int64, waiting int32) {
	t.Helper()
	eventually(ctx, t, fmt.Sprintf("WorkspaceQuota %s: %d NVIDIA GPUs used, %d waiting", name, used, waiting), workspaceTimeout, func(ctx context.Context) (bool, string) {
		var q workspacesv1.WorkspaceQuota
		if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &q); err != nil {
			return false, err.Error()
		}
		return len(q.Status.GPUs) == 1 && q.Status.GPUs[0].Used == used && q.Status.Waiting == waiting,
			fmt.Sprintf("status %+v", q.Status)
	})
}

// TestFleet runs placement, a WorkspaceQuota, priorities and stop/start together on a Colony of two
// GPU clusters: fleet-a with 4 L4s, fleet-b with 2. One-GPU workspaces go to fleet-b (the tightest
// fit, not the first by name); the namespace's quota of 2 NVIDIA GPUs keeps two more waiting, unplaced;
// a stop frees a GPU and the higher-priority waiter gets it, though the other is older and first by
// name; the stopped workspace, started while the quota and its cluster are full, waits and runs again
// on the same cluster when a GPU frees.
func TestFleet(t *testing.T) {
	localOnly(t, "Colony entries of the simulator's ClusterTemplate with GPU node pools")
	var ns, class string
	f := features.New("fleet: placement, quota, priority, stop and start").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "fleet")
			class = "e2e-fleet-" + ns
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			mustCreate(ctx, t, &infrav1.Colony{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
				Spec: infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{
					colonyEntry(t, "a", gpuPool("l4", "NVIDIA", "L4", 1, 4)),
					colonyEntry(t, "b", gpuPool("l4", "NVIDIA", "L4", 1, 2)),
				}},
			})
			waitColony(ctx, t, ns, "fleet", 2, 2)
			waitChild(ctx, t, ns, "fleet-a")
			waitChild(ctx, t, ns, "fleet-b")
			maxPriority := int32(10)
			mustCreate(ctx, t, &workspacesv1.WorkspaceQuota{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"},
				Spec: workspacesv1.WorkspaceQuotaSpec{
					GPUs:        []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: 2}},
					MaxPriority: &maxPriority,
				},
			})
			createClass(ctx, t, notebookClass(class, notebookTemplate, 1, workspacesv1.GPUVendorNVIDIA))
			return ctx
		}).
		Assess("placed by tightest fit on the smaller cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			mustCreate(ctx, t, fleetWorkspace(ns, "first", class, 0))
			waitPlaced(ctx, t, ns, "first", "fleet-b", workspacesv1.PlacementTightestFit)
			mustCreate(ctx, t, fleetWorkspace(ns, "second", class, 0))
			waitPlaced(ctx, t, ns, "second", "fleet-b", workspacesv1.PlacementTightestFit)
			child := waitChild(ctx, t, ns, "fleet-b")
			runningPods(ctx, t, child, "first", 1)
			runningPods(ctx, t, child, "second", 1)
			waitQuotaUse(ctx, t, ns, "team", 2, 0)
			return ctx
		}).
		Assess("the quota full: two more wait, unplaced, though fleet-a has 4 free GPUs", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			mustCreate(ctx, t, fleetWorkspace(ns, "batch", class, 0))
			waitQuotaWaiter(ctx, t, ns, "batch")
			mustCreate(ctx, t, fleetWorkspace(ns, "urgent", class, 5))
			waitQuotaWaiter(ctx, t, ns, "urgent")
			waitQuotaUse(ctx, t, ns, "team", 2, 2)
			return ctx
		}).
		Assess("a stop frees a GPU: the higher-priority waiter is admitted before the older one", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			setStopped(ctx, t, ns, "first", true)
			first := waitPhase(ctx, t, ns, "first", workspaceTimeout, workspacesv1.PhaseStopped)
			waitReleaseReplicas(ctx, t, waitChild(ctx, t, ns, "fleet-b"), first, 0)
			// batch is older and first by name: only the priority puts urgent ahead of it.
			eventually(ctx, t, "urgent admitted, batch still waiting", workspaceTimeout, func(ctx context.Context) (bool, string) {
				var urgent, batch workspacesv1.WorkspaceDeployment
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "batch"}, &batch); err != nil {
					return false, err.Error()
				}
				if batch.Status.Admission != nil || batch.Status.Phase != workspacesv1.PhaseWaiting {
					t.Fatalf("batch (priority 0) is %s with admission %+v before urgent (priority 5)", batch.Status.Phase, batch.Status.Admission)
				}
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "urgent"}, &urgent); err != nil {
					return false, err.Error()
				}
				return urgent.Status.Admission != nil, fmt.Sprintf("urgent %s: %s", urgent.Status.Phase, urgent.Status.Message)
			})
			// fleet-b has the freed GPU, fleet-a 4: the tightest fit is fleet-b again.
			waitPlaced(ctx, t, ns, "urgent", "fleet-b", workspacesv1.PlacementTightestFit)
			waitQuotaUse(ctx, t, ns, "team", 2, 1)
			waitQuotaWaiter(ctx, t, ns, "batch")
			// The older waiter was not needed for the test's last step; removing it leaves the
			// start's wait to the quota and the cluster alone.
			deleteAndWait(ctx, t, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "batch"}}, workspaceTimeout)
			return ctx
		}).
		Assess("started while full it waits; a GPU freed, it runs again on its cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			setStopped(ctx, t, ns, "first", false)
			ws := waitPhase(ctx, t, ns, "first", workspaceTimeout, workspacesv1.PhaseWaiting, workspacesv1.PhaseRunning, workspacesv1.PhaseFailed)
			if ws.Status.Phase != workspacesv1.PhaseWaiting {
				t.Fatalf("started workspace first is %s (%s), want Waiting (the quota and fleet-b are full)", ws.Status.Phase, ws.Status.Message)
			}
			if p := ws.Status.Placement; p == nil || p.Cluster != "fleet-b" {
				t.Fatalf("started workspace first placement %+v, want fleet-b kept", p)
			}
			child := waitChild(ctx, t, ns, "fleet-b")
			waitReleaseReplicas(ctx, t, child, ws, 0)
			deleteAndWait(ctx, t, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "urgent"}}, workspaceTimeout)
			ws = waitPlaced(ctx, t, ns, "first", "fleet-b", workspacesv1.PlacementTightestFit)
			waitReleaseReplicas(ctx, t, child, ws, 1)
			runningPods(ctx, t, child, "first", 1)
			waitQuotaUse(ctx, t, ns, "team", 2, 0)
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if ns == "" {
				return ctx
			}
			var list workspacesv1.WorkspaceDeploymentList
			if err := mgmt().List(ctx, &list, client.InNamespace(ns)); err != nil {
				t.Error(err)
			}
			for i := range list.Items {
				deleteAndWait(ctx, t, &list.Items[i], workspaceTimeout)
			}
			deleteAndWait(ctx, t, &workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"}}, workspaceTimeout)
			deleteAndWait(ctx, t, &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"}}, clusterTimeout)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
