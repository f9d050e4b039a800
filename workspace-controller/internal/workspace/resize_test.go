package workspace

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// runningOn makes a workspace of replicas x gpus GPUs of the model Running on node: one pod of its
// release per replica runs there. mutate adjusts the workspace before it is created.
func runningOn(t *testing.T, ns, class, cd, model, node string, replicas, gpus int32,
	mutate ...func(*workspacesv1.WorkspaceDeployment)) (key types.NamespacedName, pods []string) {
	t.Helper()
	key = createWorkspace(t, ns, class, cd, append([]func(*workspacesv1.WorkspaceDeployment){func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = gpuResources(gpus, model)
		ws.Spec.Resources.Replicas = ptr(replicas)
	}}, mutate...)...)
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	release := owned.LocalReleaseNamespace(key.Name)
	syncQuota(t, child.Client, release)
	for range replicas {
		pods = append(pods, gpuPod(t, child.Client, release, node, gpu.ResourceNVIDIA, int64(gpus)))
	}
	setServiceState(t, types.NamespacedName{Namespace: ns, Name: owned.ServiceSetName(ws)}, k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
	return key, pods
}

// stillWaiting returns nil once the workspace's latest decision is Waiting and its Feasible message
// says want; it fails the test at once when the workspace was admitted instead.
func stillWaiting(t *testing.T, key types.NamespacedName, why, want string) func() error {
	return func() error {
		ws := getWS(t, key)
		switch {
		case ws.Status.Phase == workspacesv1.PhaseDeploying || ws.Status.Phase == workspacesv1.PhaseRunning:
			t.Fatalf("%s was admitted (%s): %s", key.Name, ws.Status.Phase, why)
		case ws.Status.Phase != workspacesv1.PhaseWaiting || ws.Status.Feasibility == nil:
			return fmt.Errorf("phase %s, feasibility %+v", ws.Status.Phase, ws.Status.Feasibility)
		case ws.Status.ObservedGeneration != ws.Generation:
			return fmt.Errorf("generation %d not decided yet (observed %d)", ws.Generation, ws.Status.ObservedGeneration)
		}
		return contains(ws.Status.Feasibility.Message, want)
	}
}

// TestResizeKeepsItsPlaceInTheQueue: a Running workspace that raises its GPU request beyond what is
// free waits for it on its old admission, and keeps its place in the queue for the GPUs the new
// request adds. One node of 8 GPUs: A runs 2 replicas of 2 GPUs, B one of 2, a pod of no workspace
// holds 2. A asks for 2 replicas of 4 and waits; C, newer, asks for 2 and waits. B goes: the 2 GPUs
// it frees are part of what A needs, and C, which would fit in them, keeps waiting behind A. The
// other pod goes: A is admitted, and C still waits, also when it is decided while A's old pods still
// run on their 2 GPUs each.
func TestResizeKeepsItsPlaceInTheQueue(t *testing.T) {
	ns, class, cd := gateFixture(t)
	model := name("r100")
	node := pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 8, model)
	a, _ := runningOn(t, ns, class, cd, model, node, 2, 2)
	b, bPods := runningOn(t, ns, class, cd, model, node, 1, 2)
	busy := gpuPod(t, child.Client, "busy", node, gpu.ResourceNVIDIA, 2)

	ws := getWS(t, a)
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Spec.Resources.PerReplica.GPUCount = ptr(int32(4))
	must(t, k8s.Patch(ctxT(t), ws, patch))
	ws = waitPhase(t, a, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	if ad := ws.Status.Admission; ad == nil || ad.GPUsPerReplica != 2 || ad.Replicas != 2 {
		t.Fatalf("A waits without its old admission of 2 x 2 GPUs: %+v", ad)
	}
	// Named after A, so that C queues behind A also when both were created in one second (the queue
	// orders by creation, then by name).
	c := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Name = a.Name + "-newer"
		ws.Spec.Resources = gpuResources(2, model)
	})
	waitPhase(t, c, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)

	// B goes. A still cannot go (it needs 8 GPUs besides its own, 6 are free to it), but the 2 GPUs
	// B held are the first that its first replica adds: C must not take them.
	must(t, k8s.Delete(ctxT(t), getWS(t, b)))
	waitGone(t, "workspace B", b, &workspacesv1.WorkspaceDeployment{})
	must(t, childtest.SetPodPhase(ctxT(t), child.Client, owned.LocalReleaseNamespace(b.Name), bPods[0], corev1.PodSucceeded))
	eventually(t, "C waits behind the GPUs A's request adds", stillWaiting(t, c,
		"it took the GPUs B freed, which A, ahead of it, waits for", "have 0 free (after 2 reserved"))
	waitPhase(t, a, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)

	// The other pod goes: A's new request fits.
	must(t, childtest.SetPodPhase(ctxT(t), child.Client, "busy", busy, corev1.PodSucceeded))
	eventually(t, "A admitted for 2 x 4 GPUs", func() error {
		ws := getWS(t, a)
		if ad := ws.Status.Admission; ad == nil || ad.GPUsPerReplica != 4 || ad.Replicas != 2 || len(ad.Nodes) != 1 || ad.Nodes[0].Name != node {
			return fmt.Errorf("admission %+v", ad)
		}
		if p := ws.Status.Phase; p != workspacesv1.PhaseDeploying && p != workspacesv1.PhaseRunning {
			return fmt.Errorf("phase %s", p)
		}
		return nil
	})
	// C decided again now, while A's old pods still run: a change of its own (a lower priority, still
	// behind A) makes it decide, and observedGeneration shows that it did. A's old pods hold 4 GPUs and
	// are not A's replicas of 4: the admission reserves its first replica beside them.
	ws = getWS(t, c)
	patch = client.MergeFrom(ws.DeepCopy())
	ws.Spec.Priority = -1
	must(t, k8s.Patch(ctxT(t), ws, patch))
	eventually(t, "C still waits behind A's admission", stillWaiting(t, c,
		"A's old pods were counted as the replicas of its new admission", "have 0 free (after 4 reserved"))
}
