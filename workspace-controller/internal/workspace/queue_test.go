package workspace

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
)

// TestQueueAndQuotaMetrics: a workspace waiting on its named cluster and one waiting unplaced show in
// queue_length by cluster, namespace and the reason they wait for, the quota's limit and use are exported, and once GPUs free
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
		if v := metric(t, "exalsius_workspace_controller_queue_length", map[string]string{"cluster": cluster, "namespace": ns, "reason": workspacesv1.ReasonWaitingForGpuCapacity}); v != 1 {
			return fmt.Errorf("queue_length on the cluster = %v", v)
		}
		if v := metric(t, "exalsius_workspace_controller_queue_length", map[string]string{"cluster": "", "namespace": ns, "reason": workspacesv1.ReasonNoClusterFitsNow}); v != 1 {
			return fmt.Errorf("queue_length unplaced = %v", v)
		}
		if v := metric(t, "exalsius_workspace_controller_queue_oldest_wait_seconds", map[string]string{"cluster": cluster, "namespace": ns}); v < 0 {
			return fmt.Errorf("queue_oldest_wait_seconds = %v", v)
		}
		if v := metric(t, "exalsius_workspace_controller_gpus_requested", map[string]string{"namespace": ns, "vendor": "NVIDIA", "model": model}); v != 2 {
			return fmt.Errorf("gpus_requested = %v, want the two waiters' 2", v)
		}
		if v := metric(t, "exalsius_workspace_controller_quota_limit", quotaLabels("gpu/NVIDIA")); v != 5 {
			return fmt.Errorf("quota_limit{gpu/NVIDIA} = %v", v)
		}
		if v := metric(t, "exalsius_workspace_controller_quota_used", quotaLabels("workspaces")); v != 0 {
			return fmt.Errorf("quota_used{workspaces} = %v", v)
		}
		return nil
	})
	waitsBefore := metric(t, "exalsius_workspace_controller_wait_seconds", map[string]string{"namespace": ns})

	must(t, childtest.SetPodPhase(ctxT(t), child.Client, "busy", busy, corev1.PodSucceeded))
	eventually(t, "one of the two admitted", func() error {
		a, b := getWS(t, named).Status.Phase, getWS(t, placed).Status.Phase
		if (a == workspacesv1.PhaseDeploying) == (b == workspacesv1.PhaseDeploying) {
			return fmt.Errorf("phases %s and %s", a, b)
		}
		return nil
	})
	eventually(t, "wait time and quota use", func() error {
		if v := metric(t, "exalsius_workspace_controller_wait_seconds", map[string]string{"namespace": ns}); v < max(waitsBefore, 0)+1 {
			return fmt.Errorf("wait_seconds count = %v, was %v", v, waitsBefore)
		}
		if v := metric(t, "exalsius_workspace_controller_quota_used", quotaLabels("gpu/NVIDIA")); v != 1 {
			return fmt.Errorf("quota_used{gpu/NVIDIA} = %v", v)
		}
		if v := metric(t, "exalsius_workspace_controller_placements_total", map[string]string{"reason": workspacesv1.PlacementNamed}); v < 1 {
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

// setCordoned cordons or uncordons a node of a child, as kubectl cordon does.
func setCordoned(t *testing.T, c client.Client, node string, cordoned bool) {
	t.Helper()
	n := &corev1.Node{}
	must(t, c.Get(ctxT(t), client.ObjectKey{Name: node}, n))
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Unschedulable = cordoned
	must(t, c.Patch(ctxT(t), n, patch))
}

// waitsBehind waits until a Waiting workspace's latest decision counted GPUs reserved for another.
func waitsBehind(t *testing.T, key types.NamespacedName) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s waits behind a reservation", key), func() error {
		ws := getWS(t, key)
		if ws.Status.Phase != workspacesv1.PhaseWaiting || ws.Status.Feasibility == nil {
			return fmt.Errorf("phase %s, feasibility %+v", ws.Status.Phase, ws.Status.Feasibility)
		}
		return contains(ws.Status.Feasibility.Message, "1 reserved")
	})
}

// TestCordonedNodesKeepTheQueue: two workspaces wait for the one GPU of a node; a drain cordons the
// node. They stay Waiting (WaitingForGpuNodes, naming the cordoned node), not Failed, and keep their
// places: once the node is uncordoned with its GPU free, the higher priority goes first although it
// queued later.
func TestCordonedNodesKeepTheQueue(t *testing.T) {
	ns, class, cd := gateFixture(t)
	createQuota(t, ns, workspacesv1.WorkspaceQuotaSpec{MaxPriority: ptr(int32(10))})
	model := name("c200")
	node := pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 1, model)
	busy := gpuPod(t, child.Client, "busy", node, gpu.ResourceNVIDIA, 1)
	older := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, older, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	higher := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = gpuResources(1, model)
		ws.Spec.Priority = 5
	})
	waitPhase(t, higher, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)

	setCordoned(t, child.Client, node, true)
	for _, key := range []types.NamespacedName{older, higher} {
		ws := waitPhase(t, key, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuNodes)
		if err := contains(ws.Status.Message, "1 matching node is cordoned ("+node+")"); err != nil {
			t.Error(err)
		}
		if c := condition(ws, workspacesv1.FeasibleCondition); c.Reason != workspacesv1.ReasonWaitingForGpuNodes {
			t.Errorf("%s: Feasible %+v", key, c)
		}
	}
	// The GPU frees up while the node is cordoned: nobody may take it yet.
	must(t, childtest.SetPodPhase(ctxT(t), child.Client, "busy", busy, corev1.PodSucceeded))
	setCordoned(t, child.Client, node, false)
	waitPhase(t, higher, workspacesv1.PhaseDeploying, "")
	waitsBehind(t, older)
}

// headHoldsTheFreeGPU queues a waiter of priority 5 with two replicas of one GPU behind next (which
// waits for the GPU pod busy holds in namespace busy), frees that GPU, and returns the head once it
// holds the freed GPU for itself: it cannot go, and next waits behind it.
func headHoldsTheFreeGPU(t *testing.T, ns, class, cd, model, busy string, next types.NamespacedName) types.NamespacedName {
	t.Helper()
	head := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = gpuResources(1, model)
		ws.Spec.Resources.Replicas = ptr(int32(2))
		ws.Spec.Priority = 5
	})
	waitPhase(t, head, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	must(t, childtest.SetPodPhase(ctxT(t), child.Client, "busy", busy, corev1.PodSucceeded))
	waitsBehind(t, next)
	waitPhase(t, head, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	return head
}

// TestLoweredPriorityWakesTheNextWaiter: a waiter ahead in the queue that cannot go itself (two
// replicas, one free GPU) holds the free GPU for itself; when it lowers its priority below the next
// waiter's, that one is woken and admitted with no other event.
func TestLoweredPriorityWakesTheNextWaiter(t *testing.T) {
	ns, class, cd := gateFixture(t)
	createQuota(t, ns, workspacesv1.WorkspaceQuotaSpec{MaxPriority: ptr(int32(10))})
	model := name("p200")
	node := pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 1, model)
	busy := gpuPod(t, child.Client, "busy", node, gpu.ResourceNVIDIA, 1)
	// Priority 3, so that once the head is lowered to 0 the order does not hang on creation times,
	// which have seconds: two workspaces made in one second are ordered by name.
	next := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = gpuResources(1, model)
		ws.Spec.Priority = 3
	})
	waitPhase(t, next, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	head := headHoldsTheFreeGPU(t, ns, class, cd, model, busy, next)

	ws := getWS(t, head)
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Spec.Priority = 0
	must(t, k8s.Patch(ctxT(t), ws, patch))
	waitPhase(t, next, workspacesv1.PhaseDeploying, "")
	waitPhase(t, head, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
}

// TestLoweredMaxPriorityWakesAnotherNamespace: one child cluster reached by two ClusterDeployments of
// two namespaces is one queue. A waiter of namespace A ahead in it (priority 5 under A's cap of 10,
// two replicas for the one free GPU) holds the GPU against B's waiter (priority 3); lowering A's
// maxPriority to 1 puts it behind, and B's waiter is woken and admitted at once: no event of its own,
// its namespace, or its ClusterDeployment brings it back, and its timer retry is a minute away.
func TestLoweredMaxPriorityWakesAnotherNamespace(t *testing.T) {
	nsA, classA, cdA := gateFixture(t)
	quota := createQuota(t, nsA, workspacesv1.WorkspaceQuotaSpec{MaxPriority: ptr(int32(10))})
	nsB, classB, cdB := gateFixture(t)
	createQuota(t, nsB, workspacesv1.WorkspaceQuotaSpec{MaxPriority: ptr(int32(3))})
	model := name("p300")
	node := pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 1, model)
	busy := gpuPod(t, child.Client, "busy", node, gpu.ResourceNVIDIA, 1)
	next := createWorkspace(t, nsB, classB, cdB, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = gpuResources(1, model)
		ws.Spec.Priority = 3
	})
	waitPhase(t, next, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	head := headHoldsTheFreeGPU(t, nsA, classA, cdA, model, busy, next)

	patch := client.MergeFrom(quota.DeepCopy())
	quota.Spec.MaxPriority = ptr(int32(1))
	must(t, k8s.Patch(ctxT(t), quota, patch))
	lowered := time.Now()
	waitPhase(t, next, workspacesv1.PhaseDeploying, "")
	if since := time.Since(lowered); since > DefaultWaitingRetry/2 {
		t.Errorf("admitted %s after the cap was lowered: the quota's event did not wake the waiter, its %s retry did", since.Round(time.Second), DefaultWaitingRetry)
	}
	waitPhase(t, head, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
}
