package workspace

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
)

// TestQueueAndQuotaMetrics: a workspace waiting on its named cluster and one waiting unplaced show in
// queue_length by cluster and namespace, the quota's limit and use are exported, and once GPUs free
// up the wait time and the placement are counted.
func TestQueueAndQuotaMetrics(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("queue")), ns)
	sel := map[string]string{"pool": name("queue")}
	cd := createCluster(t, ns, child.Kubeconfig, labelled(sel))
	model := name("q100")
	node := pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 1, model)
	busy := gpuPod(t, child.Client, "busy", node, gpu.ResourceNVIDIA, 1)
	q := createQuota(t, ns, workspacesv1.WorkspaceQuotaSpec{
		GPUs: []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: 5}}, Workspaces: ptr(int32(5))})
	named := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, named, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	placed := createWorkspace(t, ns, class, "", placedBy(sel, gpuRes(1, workspacesv1.GPUVendorNVIDIA, model)))
	waitPhase(t, placed, workspacesv1.PhaseWaiting, workspacesv1.ReasonNoClusterFitsNow)

	cluster := types.NamespacedName{Namespace: ns, Name: cd.Name}.String()
	quotaLabels := func(res string) map[string]string {
		return map[string]string{"namespace": ns, "quota": q.Name, "resource": res}
	}
	eventually(t, "queue and quota gauges", func() error {
		if v := metric(t, "workspace_controller_queue_length", map[string]string{"cluster": cluster, "namespace": ns}); v != 1 {
			return fmt.Errorf("queue_length on the cluster = %v", v)
		}
		if v := metric(t, "workspace_controller_queue_length", map[string]string{"cluster": "", "namespace": ns}); v != 1 {
			return fmt.Errorf("queue_length unplaced = %v", v)
		}
		if v := metric(t, "workspace_controller_queue_oldest_wait_seconds", map[string]string{"cluster": cluster, "namespace": ns}); v < 0 {
			return fmt.Errorf("queue_oldest_wait_seconds = %v", v)
		}
		if v := metric(t, "workspace_controller_quota_limit", quotaLabels("gpu/NVIDIA")); v != 5 {
			return fmt.Errorf("quota_limit{gpu/NVIDIA} = %v", v)
		}
		if v := metric(t, "workspace_controller_quota_used", quotaLabels("workspaces")); v != 0 {
			return fmt.Errorf("quota_used{workspaces} = %v", v)
		}
		return nil
	})
	waitsBefore := metric(t, "workspace_controller_wait_seconds", map[string]string{"namespace": ns})

	must(t, childtest.SetPodPhase(ctxT(t), child.Client, "busy", busy, corev1.PodSucceeded))
	eventually(t, "one of the two admitted", func() error {
		a, b := getWS(t, named).Status.Phase, getWS(t, placed).Status.Phase
		if (a == workspacesv1.PhaseDeploying) == (b == workspacesv1.PhaseDeploying) {
			return fmt.Errorf("phases %s and %s", a, b)
		}
		return nil
	})
	eventually(t, "wait time and quota use", func() error {
		if v := metric(t, "workspace_controller_wait_seconds", map[string]string{"namespace": ns}); v < max(waitsBefore, 0)+1 {
			return fmt.Errorf("wait_seconds count = %v, was %v", v, waitsBefore)
		}
		if v := metric(t, "workspace_controller_quota_used", quotaLabels("gpu/NVIDIA")); v != 1 {
			return fmt.Errorf("quota_used{gpu/NVIDIA} = %v", v)
		}
		if v := metric(t, "workspace_controller_placements_total", map[string]string{"reason": workspacesv1.PlacementNamed}); v < 1 {
			return fmt.Errorf("placements_total{Named} = %v", v)
		}
		return nil
	})
}

// TestPlacementOnColony places a workspace that names a Colony on the Colony's cluster
// (status.clusterDeploymentRefs), and leaves it Pending while the Colony does not exist.
func TestPlacementOnColony(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("colony")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	model := name("c100")
	pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 2, model)
	colonyName := name("fleet")
	key := createWorkspace(t, ns, class, "", func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{}
		ws.Spec.ColonyRef = &workspacesv1.ColonyRef{Name: colonyName}
		ws.Spec.Resources = gpuResources(1, model)
	})
	waitPhase(t, key, workspacesv1.PhasePending, workspacesv1.ReasonColonyNotFound)
	createColony(t, ns, colonyName, cd.Name)
	if p := waitPlaced(t, key); p.Cluster != cd.Name || p.Reason != workspacesv1.PlacementOnlyFit {
		t.Errorf("placed on %s (%s), want %s", p.Cluster, p.Reason, cd.Name)
	}
	waitPhase(t, key, workspacesv1.PhaseDeploying, "")
}

// createColony creates an empty Colony whose status names the ClusterDeployments, as the
// colony-controller would write it.
func createColony(t *testing.T, ns, colonyName string, clusters ...string) {
	t.Helper()
	c := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: colonyName}}
	must(t, k8s.Create(ctxT(t), c))
	for _, cd := range clusters {
		c.Status.ClusterDeploymentRefs = append(c.Status.ClusterDeploymentRefs, infrav1.ObjectRef{Name: cd, Namespace: ns})
	}
	must(t, k8s.Status().Update(ctxT(t), c))
}
