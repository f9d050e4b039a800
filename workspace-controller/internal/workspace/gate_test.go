package workspace

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// gateFixture is a namespace, a valid class and a ClusterDeployment on the shared child.
func gateFixture(t *testing.T) (ns, class, cd string) {
	t.Helper()
	ns = newNamespace(t)
	class = createClass(t, classSpec(name("gpu")), ns)
	return ns, class, createCluster(t, ns, child.Kubeconfig).Name
}

// TestGpuOfferingUnavailableHealsWhenNodesAppear fails a workspace whose GPU model no node has, and
// brings it back when such a node joins the child.
func TestGpuOfferingUnavailableHealsWhenNodesAppear(t *testing.T) {
	ns, class, cd := gateFixture(t)
	model := name("h200")
	key := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonGpuOfferingUnavailable)
	if fc := ws.Status.FailureContext; fc == nil || fc.Reason != workspacesv1.ReasonGpuOfferingUnavailable {
		t.Errorf("failureContext %+v", fc)
	}
	if f := ws.Status.Feasibility; f == nil || f.Feasible || f.MatchingNodes != 0 {
		t.Errorf("feasibility %+v", f)
	}
	gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	waitPhase(t, key, workspacesv1.PhaseDeploying, "")
}

// TestWaitingUntilGPUsFree waits while the GPUs are taken and proceeds when a pod finishes.
func TestWaitingUntilGPUsFree(t *testing.T) {
	ns, class, cd := gateFixture(t)
	model := name("l40s")
	node := gpuNode(t, child.Client, gpu.ResourceNVIDIA, 2, modelLabels(model))
	busy := gpuPod(t, child.Client, "busy", node, gpu.ResourceNVIDIA, 2)
	key := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, key, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	if c := condition(ws, workspacesv1.FeasibleCondition); c.Status != metav1.ConditionFalse || c.Reason != workspacesv1.ReasonWaitingForGpuCapacity {
		t.Errorf("Feasible %+v", c)
	}
	if ws.Status.FailureContext != nil {
		t.Errorf("a waiting workspace has a failure context: %+v", ws.Status.FailureContext)
	}
	must(t, childtest.SetPodPhase(ctxT(t), child.Client, "busy", busy, corev1.PodSucceeded))
	waitPhase(t, key, workspacesv1.PhaseDeploying, "")
}

// TestOldestWaitingGoesFirst: two workspaces wait for the same GPU; when one frees up the older one
// gets it and the younger keeps waiting.
func TestOldestWaitingGoesFirst(t *testing.T) {
	ns, class, cd := gateFixture(t)
	model := name("a10")
	node := gpuNode(t, child.Client, gpu.ResourceNVIDIA, 2, modelLabels(model))
	p1 := gpuPod(t, child.Client, "busy", node, gpu.ResourceNVIDIA, 1)
	gpuPod(t, child.Client, "busy", node, gpu.ResourceNVIDIA, 1)
	older := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, older, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	younger := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, younger, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)

	must(t, childtest.SetPodPhase(ctxT(t), child.Client, "busy", p1, corev1.PodSucceeded))
	waitPhase(t, older, workspacesv1.PhaseDeploying, "")
	// The younger is still Waiting from its decision before the GPU freed up; its next decision
	// counts the older one's reservation and keeps it Waiting.
	eventually(t, "the younger workspace waits behind the older one's reservation", func() error {
		ws := getWS(t, younger)
		if ws.Status.Phase != workspacesv1.PhaseWaiting || ws.Status.Feasibility == nil {
			return fmt.Errorf("phase %s, feasibility %+v", ws.Status.Phase, ws.Status.Feasibility)
		}
		return contains(ws.Status.Feasibility.Message, "1 reserved")
	})
	if getWS(t, younger).Status.Phase != workspacesv1.PhaseWaiting {
		t.Errorf("the younger workspace took the GPU the older one holds")
	}
}

// TestReservationRace: two workspaces race for the last GPU; exactly one passes the gate, and the
// other passes once the first is gone.
func TestReservationRace(t *testing.T) {
	ns, class, cd := gateFixture(t)
	model := name("h100")
	node := gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	a := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	b := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	var admitted, waiting types.NamespacedName
	eventually(t, "both workspaces decided", func() error {
		pa, pb := getWS(t, a).Status.Phase, getWS(t, b).Status.Phase
		switch {
		case pa == workspacesv1.PhaseDeploying && pb == workspacesv1.PhaseWaiting:
			admitted, waiting = a, b
		case pb == workspacesv1.PhaseDeploying && pa == workspacesv1.PhaseWaiting:
			admitted, waiting = b, a
		default:
			return fmt.Errorf("phases %s and %s", pa, pb)
		}
		return nil
	})
	// The admitted workspace's pod is bound: the GPU shows as used, and the waiter still waits.
	syncQuota(t, child.Client, owned.LocalReleaseNamespace(admitted.Name))
	pod := gpuPod(t, child.Client, owned.LocalReleaseNamespace(admitted.Name), node, gpu.ResourceNVIDIA, 1)
	waitPhase(t, waiting, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)

	// Deleting the admitted workspace uninstalls its release; the test API server has no kubelet, so
	// the test finishes the pod itself.
	must(t, k8s.Delete(ctxT(t), getWS(t, admitted)))
	eventually(t, "admitted workspace gone", func() error {
		err := k8s.Get(ctxT(t), admitted, &workspacesv1.WorkspaceDeployment{})
		if err == nil {
			return fmt.Errorf("still there")
		}
		return client.IgnoreNotFound(err)
	})
	must(t, childtest.SetPodPhase(ctxT(t), child.Client, owned.LocalReleaseNamespace(admitted.Name), pod, corev1.PodSucceeded))
	waitPhase(t, waiting, workspacesv1.PhaseDeploying, "")
}

// TestReplicaMustFitOnOneNode: two nodes of one GPU each can never hold a replica of two: Failed
// (GpuRequestNeverFits, naming the largest node), not Waiting; a node large enough heals it.
func TestReplicaMustFitOnOneNode(t *testing.T) {
	ns, class, cd := gateFixture(t)
	model := name("t4")
	gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	key := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(2, model) })
	ws := waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonGpuRequestNeverFits)
	if f := ws.Status.Feasibility; f.MatchingNodes != 2 || f.FreeGPUs != 2 || f.FittingReplicas != 0 {
		t.Errorf("feasibility %+v: want 2 nodes, 2 free GPUs, 0 fitting replicas", f)
	}
	if err := contains(ws.Status.Message, "has 1 in total"); err != nil {
		t.Error(err)
	}
	gpuNode(t, child.Client, gpu.ResourceNVIDIA, 2, modelLabels(model))
	waitPhase(t, key, workspacesv1.PhaseDeploying, "")
}

// TestRawSelectorAndAMD: a gpuNodeSelector without gpuType selects on the vendor label, AMD GPUs are
// counted in amd.com/gpu, and the chart receives the selector the gate checked.
func TestRawSelectorAndAMD(t *testing.T) {
	ns, class, cd := gateFixture(t)
	product := name("AMD-Instinct-MI300X")
	gpuNode(t, child.Client, gpu.ResourceAMD, 8, map[string]string{gpu.LabelAMDProductName: product})
	count := int32(4)
	key := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = &workspacesv1.ResourceOverrides{PerReplica: &workspacesv1.PerReplicaResources{
			GPUCount: &count, GPUVendor: workspacesv1.GPUVendorAMD, GPUNodeSelector: map[string]string{gpu.LabelAMDProductName: product},
		}}
	})
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	values := serviceSetValues(t, waitServiceSet(t, ws))
	ex := values["_exalsius"].(map[string]any)
	sel := ex["scheduling"].(map[string]any)["nodeSelector"].(map[string]any)
	per := ex["resources"].(map[string]any)["perReplica"].(map[string]any)
	if per["gpuResourceName"] != "amd.com/gpu" || len(sel) != 1 || sel[gpu.LabelAMDProductName] != product ||
		per["gpuCount"] != float64(4) || per["gpuVendor"] != "AMD" {
		t.Errorf("_exalsius %v", ex)
	}

	// The same selector with an NVIDIA request finds no node.
	nv := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = &workspacesv1.ResourceOverrides{PerReplica: &workspacesv1.PerReplicaResources{
			GPUCount: &count, GPUNodeSelector: map[string]string{gpu.LabelAMDProductName: product},
		}}
	})
	waitPhase(t, nv, workspacesv1.PhaseFailed, workspacesv1.ReasonGpuOfferingUnavailable)
}

// TestUnreachableChildStaysPending: a child that does not answer leaves the workspace Pending, never
// Failed, and it proceeds once the child is back.
func TestUnreachableChildStaysPending(t *testing.T) {
	other, err := testenv.StartChild("flaky")
	must(t, err)
	t.Cleanup(func() { _ = other.Stop() })
	model := name("v100")
	gpuNode(t, other.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	must(t, other.Pause())

	ns := newNamespace(t)
	class := createClass(t, classSpec(name("flaky")), ns)
	cd := createCluster(t, ns, other.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, key, workspacesv1.PhasePending, workspacesv1.ReasonClusterUnreachable)
	if err := contains(ws.Status.Message, "cannot reach the child cluster"); err != nil {
		t.Error(err)
	}
	must(t, other.Resume())
	waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	if ws := getWS(t, key); ws.Status.FailureContext != nil {
		t.Errorf("failureContext %+v", ws.Status.FailureContext)
	}
}

// spreadWorkspace makes a workspace of two replicas of n GPUs over two nodes of n GPUs each, admitted
// (Deploying) with pods that never bind (the test API server has no scheduler), and a one-GPU
// workspace that waits behind its reservation. It returns both and the spread one's ServiceSet,
// which carries KCM's finalizer.
func spreadWorkspace(t *testing.T, n int32) (spread, waiter types.NamespacedName, ssKey types.NamespacedName) {
	t.Helper()
	ns, class, cd := gateFixture(t)
	model := name("h20")
	gpuNode(t, child.Client, gpu.ResourceNVIDIA, int64(n), modelLabels(model))
	gpuNode(t, child.Client, gpu.ResourceNVIDIA, int64(n), modelLabels(model))
	spread = createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = gpuResources(n, model)
		r := int32(2)
		ws.Spec.Resources.Replicas = &r
	})
	ss := waitServiceSet(t, waitPhase(t, spread, workspacesv1.PhaseDeploying, ""))
	patch := client.MergeFrom(ss.DeepCopy())
	ss.Finalizers = append(ss.Finalizers, k0rdentv1beta1.ServiceSetFinalizer)
	must(t, k8s.Patch(ctxT(t), ss, patch))
	waiter = createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, waiter, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	return spread, waiter, client.ObjectKeyFromObject(ss)
}

// TestFailedReleaseDuringChildOutageKeepsReservation: k0rdent reports a release Failed while it
// cannot reach the child's API server, and keeps reporting it until its retry after the outage; the
// workspace, admitted onto a node with its pods not made yet, is Failed once the child is back.
// k0rdent's retry may still bind its pods there, and a later Deployed heals it: its replicas that are
// not bound yet still reserve their GPUs, so a workspace gated after the outage waits instead of
// being admitted onto them (seen in make chaos, round 16: a node's GPUs admitted twice after a child
// API outage).
func TestFailedReleaseDuringChildOutageKeepsReservation(t *testing.T) {
	other, err := testenv.StartChild("outage")
	must(t, err)
	t.Cleanup(func() { _ = other.Resume(); _ = other.Stop() })
	model := name("gb200")
	node := gpuNode(t, other.Client, gpu.ResourceNVIDIA, 4, modelLabels(model))
	gpuPod(t, other.Client, "busy", node, gpu.ResourceNVIDIA, 2) // a running workspace's pod
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("outage")), ns)
	cd := createCluster(t, ns, other.Kubeconfig).Name
	two := func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(2, model) }
	admitted := createWorkspace(t, ns, class, cd, two)
	ss := waitServiceSet(t, waitPhase(t, admitted, workspacesv1.PhaseDeploying, ""))

	must(t, other.Pause())
	setServiceState(t, client.ObjectKeyFromObject(ss), k0rdentv1beta1.ServiceStateFailed, "cannot reach the cluster: connection refused")
	eventually(t, "the outage and the failed release seen by the workspace's pass", func() error {
		ws := getWS(t, admitted)
		if c := condition(ws, workspacesv1.ReleaseNamespaceReadyCondition); c.Reason != workspacesv1.ReasonClusterUnreachable {
			return fmt.Errorf("ReleaseNamespaceReady %s: %s", c.Reason, c.Message)
		}
		if c := condition(ws, workspacesv1.HelmReleaseReadyCondition); c.Reason != workspacesv1.ReasonHelmReleaseFailed {
			return fmt.Errorf("HelmReleaseReady %s: %s", c.Reason, c.Message)
		}
		return nil
	})
	must(t, other.Resume())
	if ws := waitPhase(t, admitted, workspacesv1.PhaseFailed, ""); ws.Status.Admission == nil {
		t.Fatal("a failed workspace whose ServiceSet exists dropped its admission")
	}

	next := createWorkspace(t, ns, class, cd, two)
	var ws *workspacesv1.WorkspaceDeployment
	eventually(t, "the next workspace gated", func() error {
		ws = getWS(t, next)
		if ws.Status.Phase != workspacesv1.PhaseWaiting && ws.Status.Phase != workspacesv1.PhaseDeploying {
			return fmt.Errorf("phase %s: %s", ws.Status.Phase, ws.Status.Message)
		}
		return nil
	})
	if ws.Status.Phase != workspacesv1.PhaseWaiting || ws.Status.Admission != nil {
		t.Fatalf("the next workspace is %s with admission %+v: admitted onto the failed workspace's GPUs (%s)",
			ws.Status.Phase, ws.Status.Admission, ws.Status.Message)
	}
	if err := contains(ws.Status.Feasibility.Message, "2 reserved"); err != nil {
		t.Errorf("feasibility: %v", err)
	}

	// k0rdent's retry deploys the release: the failed workspace heals.
	setServiceState(t, client.ObjectKeyFromObject(ss), k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, admitted, workspacesv1.PhaseDeploying, "")
	if p := getWS(t, next).Status.Phase; p != workspacesv1.PhaseWaiting {
		t.Errorf("the next workspace is %s, want Waiting", p)
	}
}

// TestFailedReleaseReservesUntilDeployDeadline: a spread workspace whose release k0rdent reports
// Failed (its pods never bind) keeps its replicas not bound yet reserved while its rollout is within
// its class's deployTimeout (k0rdent retries it), and no longer once the deadline passed: the
// workspace says so, and a waiter behind it (of another class, on no event of its own) is brought
// back and admitted onto the GPUs the failed one never took.
func TestFailedReleaseReservesUntilDeployDeadline(t *testing.T) {
	ns := newNamespace(t)
	model := name("a30")
	gpuNode(t, child.Client, gpu.ResourceNVIDIA, 2, modelLabels(model))
	gpuNode(t, child.Client, gpu.ResourceNVIDIA, 2, modelLabels(model))
	spec := classSpec(name("deadline"))
	spec.DeployTimeout = &metav1.Duration{Duration: time.Hour}
	class := createClass(t, spec, ns)
	waiterClass := createClass(t, classSpec(name("waiter")), ns)
	cd := createCluster(t, ns, child.Kubeconfig).Name
	stuck := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = gpuResources(2, model)
		r := int32(2)
		ws.Spec.Resources.Replicas = &r
	})
	ss := waitServiceSet(t, waitPhase(t, stuck, workspacesv1.PhaseDeploying, ""))
	setServiceState(t, client.ObjectKeyFromObject(ss), k0rdentv1beta1.ServiceStateFailed, "pods were not scheduled")
	waitPhase(t, stuck, workspacesv1.PhaseFailed, "")

	waiter := createWorkspace(t, ns, waiterClass, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, waiter, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	if err := contains(ws.Status.Feasibility.Message, "4 reserved"); err != nil {
		t.Errorf("within the deadline: %v", err)
	}

	// Two hours later (the rollout's start moved back, as the class's spec cannot change): its
	// deadline passed.
	ss = &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), client.ObjectKeyFromObject(waitServiceSet(t, getWS(t, stuck))), ss))
	patch := client.MergeFrom(ss.DeepCopy())
	ss.Annotations[owned.AnnotationRolloutStarted] = time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	must(t, k8s.Patch(ctxT(t), ss, patch))
	eventually(t, "the failed release past its deploy deadline", func() error {
		c := condition(getWS(t, stuck), workspacesv1.HelmReleaseReadyCondition)
		if c.Reason != workspacesv1.ReasonDeployTimeout {
			return fmt.Errorf("HelmReleaseReady %s: %s", c.Reason, c.Message)
		}
		return contains(c.Message, "hold no GPUs")
	})
	waitPhase(t, waiter, workspacesv1.PhaseDeploying, "")
}

// TestDeletedSpreadWorkspaceReleasesAtOnce: a workspace being deleted whose pods hold no GPU on the
// child releases its reservation at once, while k0rdent still uninstalls its release (its
// ServiceSet held by KCM's finalizer).
func TestDeletedSpreadWorkspaceReleasesAtOnce(t *testing.T) {
	spread, waiter, ssKey := spreadWorkspace(t, 5)
	must(t, k8s.Delete(ctxT(t), getWS(t, spread)))
	waitPhase(t, spread, workspacesv1.PhaseDeleting, workspacesv1.ReasonDeleting)
	waitPhase(t, waiter, workspacesv1.PhaseDeploying, "")
	if err := k8s.Get(ctxT(t), ssKey, &k0rdentv1beta1.ServiceSet{}); err != nil {
		t.Fatalf("the ServiceSet is gone before the waiter was admitted (%v): the test shows nothing", err)
	}
	dropFinalizers(t, ssKey)
	waitGone(t, "workspace", spread, &workspacesv1.WorkspaceDeployment{})
}

// dropFinalizers plays KCM finishing with a ServiceSet: its finalizer goes.
func dropFinalizers(t *testing.T, key types.NamespacedName) {
	t.Helper()
	ss := &k0rdentv1beta1.ServiceSet{}
	if err := k8s.Get(ctxT(t), key, ss); err != nil {
		must(t, client.IgnoreNotFound(err))
		return
	}
	patch := client.MergeFrom(ss.DeepCopy())
	ss.Finalizers = nil
	must(t, k8s.Patch(ctxT(t), ss, patch))
}

// TestOneGatePerChildCluster: two ClusterDeployments in two namespaces reach one child cluster. A
// workspace admitted through one holds the node's only GPU; a workspace through the other waits for
// it, and gets it when the first is gone. Each admission records the child's identity, the UID of its
// kube-system namespace.
func TestOneGatePerChildCluster(t *testing.T) {
	ns1, class, cd1 := gateFixture(t)
	ns2 := newNamespace(t)
	class2 := createClass(t, classSpec(name("gpu")), ns2)
	cd2 := createCluster(t, ns2, child.Kubeconfig).Name
	model := name("b200")
	gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	var system corev1.Namespace
	must(t, child.Client.Get(ctxT(t), types.NamespacedName{Name: metav1.NamespaceSystem}, &system))

	first := createWorkspace(t, ns1, class, cd1, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, first, workspacesv1.PhaseDeploying, "")
	if ad := ws.Status.Admission; ad == nil || ad.ClusterIdentity != system.UID {
		t.Errorf("admission %+v: want clusterIdentity %s", ad, system.UID)
	}
	second := createWorkspace(t, ns2, class2, cd2, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws = waitPhase(t, second, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	if err := contains(ws.Status.Feasibility.Message, "1 reserved"); err != nil {
		t.Errorf("feasibility: %v", err)
	}

	must(t, k8s.Delete(ctxT(t), getWS(t, first)))
	ws = waitPhase(t, second, workspacesv1.PhaseDeploying, "")
	if ad := ws.Status.Admission; ad == nil || ad.Cluster != ns2+"/"+cd2 || ad.ClusterIdentity != system.UID {
		t.Errorf("admission %+v: want cluster %s/%s on identity %s", ad, ns2, cd2, system.UID)
	}
}
