package workspace

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// runningPinned makes a workspace of one GPU pinned to a fresh node of its own model, and Running: its
// release's pod runs on the node (pod).
func runningPinned(t *testing.T) (key types.NamespacedName, ws *workspacesv1.WorkspaceDeployment, cd *k0rdentv1beta1.ClusterDeployment, model, node, pod string) {
	t.Helper()
	ns := newNamespace(t)
	model = name("l40")
	node, host := hostnameNode(t, child.Client, 1, model)
	class := createClass(t, classSpec(name("regate")), ns)
	cd = createCluster(t, ns, child.Kubeconfig)
	key = createWorkspace(t, ns, class, cd.Name, func(w *workspacesv1.WorkspaceDeployment) { w.Spec.Resources = gpuResources(1, model) })
	ws = waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	if sel := pinnedHost(t, ws); sel != host {
		t.Fatalf("pinned to %q, want %q", sel, host)
	}
	syncQuota(t, child.Client, owned.LocalReleaseNamespace(key.Name))
	pod = gpuPod(t, child.Client, owned.LocalReleaseNamespace(key.Name), node, "nvidia.com/gpu", 1)
	setServiceState(t, types.NamespacedName{Namespace: ns, Name: owned.ServiceSetName(ws)}, k0rdentv1beta1.ServiceStateDeployed, "")
	ws = waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
	return key, ws, cd, model, node, pod
}

// pinnedHost is the hostname the workspace's ServiceSet values pin the replicas to.
func pinnedHost(t *testing.T, ws *workspacesv1.WorkspaceDeployment) string {
	t.Helper()
	sel := serviceSetValues(t, waitServiceSet(t, ws))["_exalsius"].(map[string]any)["scheduling"].(map[string]any)["nodeSelector"].(map[string]any)
	h, _ := sel[corev1.LabelHostname].(string)
	return h
}

// TestRegateWhenAdmittedNodeGoes: a Running workspace whose admitted node is deleted says so, waits for
// a node, and is admitted on the new node that joins; its release is pinned to the new hostname.
func TestRegateWhenAdmittedNodeGoes(t *testing.T) {
	key, _, _, model, old, _ := runningPinned(t)

	must(t, childtest.DeleteNode(ctxT(t), child.Client, old))
	// No node of the model is left: the workspace says why it is gated again, and waits for a node
	// (a node replaced is not a failure).
	var ws *workspacesv1.WorkspaceDeployment
	eventually(t, "the workspace says its node is gone, and waits", func() error {
		ws = getWS(t, key)
		if ws.Status.Phase != workspacesv1.PhaseWaiting {
			return fmt.Errorf("phase %s (%s), want Waiting", ws.Status.Phase, condition(ws, workspacesv1.ReadyCondition).Reason)
		}
		c := condition(ws, workspacesv1.FeasibleCondition)
		if c.Reason != workspacesv1.ReasonWaitingForGpuNodes {
			return fmt.Errorf("Feasible reason %s, want %s", c.Reason, workspacesv1.ReasonWaitingForGpuNodes)
		}
		return contains(c.Message, "admitted node "+old+" is gone")
	})

	node, host := hostnameNode(t, child.Client, 1, model)
	eventually(t, "admitted on the new node, pinned to its hostname", func() error {
		ws = getWS(t, key)
		if ad := ws.Status.Admission; ad == nil || len(ad.Nodes) != 1 || ad.Nodes[0].Name != node {
			return fmt.Errorf("admission %+v: want node %s", ws.Status.Admission, node)
		}
		if h := pinnedHost(t, ws); h != host {
			return fmt.Errorf("values pin %q, want %q", h, host)
		}
		return contains(condition(ws, workspacesv1.FeasibleCondition).Message, "admitted node "+old+" is gone")
	})
	eventually(t, "an AdmissionLost event", func() error {
		var list eventsv1.EventList
		if err := k8s.List(ctxT(t), &list, client.InNamespace(key.Namespace)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == key.Name && e.Reason == workspacesv1.ReasonAdmissionLost && e.Type == corev1.EventTypeWarning {
				return contains(e.Note, old)
			}
		}
		return fmt.Errorf("no %s event", workspacesv1.ReasonAdmissionLost)
	})
}

// TestRegateOnRecreatedCluster: a ClusterDeployment deleted and created again under the same name is
// a new cluster: the workspace's admission is not reused, the gate runs again and records the new UID.
func TestRegateOnRecreatedCluster(t *testing.T) {
	key, ws, cd, _, _, _ := runningPinned(t)
	if ad := ws.Status.Admission; ad == nil || ad.ClusterUID != cd.UID {
		t.Fatalf("admission %+v: want clusterUID %s", ws.Status.Admission, cd.UID)
	}
	oldUID := cd.UID
	must(t, k8s.Delete(ctxT(t), cd))
	eventually(t, "the ClusterDeployment gone", func() error {
		err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(cd), &k0rdentv1beta1.ClusterDeployment{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	again := createCluster(t, cd.Namespace, nil, func(c *k0rdentv1beta1.ClusterDeployment) { c.Name = cd.Name })
	if again.UID == oldUID {
		t.Fatal("re-created ClusterDeployment has the old UID")
	}
	eventually(t, "admission with the new UID", func() error {
		ws = getWS(t, key)
		ad := ws.Status.Admission
		if ad == nil || ad.ClusterUID != again.UID {
			return fmt.Errorf("admission %+v: want clusterUID %s", ad, again.UID)
		}
		return contains(condition(ws, workspacesv1.FeasibleCondition).Message, "deleted and created again")
	})
}

// TestCordonedNodeRunningThePodKeepsWorkspace: a drain cordons the admitted node while the workspace's
// pod still runs there: the workspace stays Running on its admission. Once no pod of it runs there,
// the cordoned node cannot take it, and it is gated again.
func TestCordonedNodeRunningThePodKeepsWorkspace(t *testing.T) {
	key, ws, _, _, node, pod := runningPinned(t)
	admitted := ws.Status.Admission.DeepCopy()

	n := &corev1.Node{}
	must(t, child.Client.Get(ctxT(t), client.ObjectKey{Name: node}, n))
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Unschedulable = true
	must(t, child.Client.Patch(ctxT(t), n, patch))
	// A workspace asking the same GPU waits for the cordoned node once the gate's view of the child
	// has the cordon (before, the GPU is taken: WaitingForGpuCapacity); a spec change of the first then
	// brings a pass that sees it.
	probe := createWorkspace(t, key.Namespace, ws.Spec.WorkspaceClassRef, ws.Spec.ClusterDeploymentRef.Name,
		func(w *workspacesv1.WorkspaceDeployment) { w.Spec.Resources = ws.Spec.Resources.DeepCopy() })
	waitPhase(t, probe, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuNodes)
	cur := getWS(t, key)
	p := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Priority = 5
	must(t, k8s.Patch(ctxT(t), cur, p))
	eventually(t, "a pass of the new generation", func() error {
		ws = getWS(t, key)
		if ws.Status.ObservedGeneration != ws.Generation {
			return fmt.Errorf("observedGeneration %d of %d", ws.Status.ObservedGeneration, ws.Generation)
		}
		return nil
	})
	if ws.Status.Phase != workspacesv1.PhaseRunning || ws.Status.Admission == nil || ws.Status.Admission.Nodes[0].Name != admitted.Nodes[0].Name {
		t.Fatalf("phase %s, admission %+v: want Running on %s", ws.Status.Phase, ws.Status.Admission, node)
	}

	// The pod goes: the cordoned node cannot take it back, and no other node can.
	must(t, child.Client.Delete(ctxT(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: owned.LocalReleaseNamespace(key.Name), Name: pod}},
		client.GracePeriodSeconds(0)))
	ws = waitPhase(t, key, workspacesv1.PhaseWaiting, "")
	if err := contains(condition(ws, workspacesv1.FeasibleCondition).Message, "cordoned"); err != nil {
		t.Fatal(err)
	}
}

// TestLostAdmissionKeepsItsPlace: a workspace whose admitted node is gone waits again with its place
// in the queue. It needs two GPUs and only one comes free (on another node), so it cannot go itself,
// but it holds that GPU for one of its replicas: a newer waiter for one GPU does not take it.
func TestLostAdmissionKeepsItsPlace(t *testing.T) {
	ns := newNamespace(t)
	model := name("l40")
	old, _ := hostnameNode(t, child.Client, 2, model)
	class := createClass(t, classSpec(name("regate")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name, func(w *workspacesv1.WorkspaceDeployment) {
		w.Spec.Resources = gpuResources(1, model)
		w.Spec.Resources.Replicas = ptr(int32(2))
	})
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	syncQuota(t, child.Client, owned.LocalReleaseNamespace(key.Name))
	for range 2 {
		gpuPod(t, child.Client, owned.LocalReleaseNamespace(key.Name), old, gpu.ResourceNVIDIA, 1)
	}
	setServiceState(t, types.NamespacedName{Namespace: ns, Name: owned.ServiceSetName(ws)}, k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)

	other, _ := hostnameNode(t, child.Client, 1, model)
	busy := gpuPod(t, child.Client, "busy", other, gpu.ResourceNVIDIA, 1)
	must(t, childtest.DeleteNode(ctxT(t), child.Client, old))
	waitPhase(t, key, workspacesv1.PhaseWaiting, "")
	newer := createWorkspace(t, ns, class, cd.Name, func(w *workspacesv1.WorkspaceDeployment) { w.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, newer, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)

	must(t, childtest.SetPodPhase(ctxT(t), child.Client, "busy", busy, corev1.PodSucceeded))
	waitsBehind(t, newer)
	if ws := getWS(t, key); ws.Status.Phase != workspacesv1.PhaseWaiting {
		t.Errorf("%s is %s, want Waiting (one GPU is not enough for it)", key, ws.Status.Phase)
	}
}

// TestReadmittedOnANewNodeHoldsIt: a workspace admitted again on a new node, while its old pod still
// sits on the node that went (pods of a deleted node stay until they are collected), holds its GPU on
// the new node: of two newer one-GPU workspaces, only one fits beside it.
func TestReadmittedOnANewNodeHoldsIt(t *testing.T) {
	key, ws, cd, model, old, _ := runningPinned(t)
	must(t, childtest.DeleteNode(ctxT(t), child.Client, old))
	waitPhase(t, key, workspacesv1.PhaseWaiting, "")
	node, _ := hostnameNode(t, child.Client, 2, model)
	eventually(t, "admitted again on the new node", func() error {
		ws = getWS(t, key)
		if ad := ws.Status.Admission; ad == nil || len(ad.Nodes) != 1 || ad.Nodes[0].Name != node {
			return fmt.Errorf("admission %+v: want node %s", ws.Status.Admission, node)
		}
		return nil
	})
	var newer []types.NamespacedName
	for range 2 {
		newer = append(newer, createWorkspace(t, key.Namespace, ws.Spec.WorkspaceClassRef, cd.Name, func(w *workspacesv1.WorkspaceDeployment) {
			w.Spec.Resources = gpuResources(1, model)
		}))
	}
	eventually(t, "one of the newer workspaces admitted, the other waiting", func() error {
		phases := map[workspacesv1.WorkspacePhase]int{}
		for _, k := range newer {
			phases[getWS(t, k).Status.Phase]++
		}
		if phases[workspacesv1.PhaseDeploying] > 1 {
			t.Fatalf("both newer workspaces admitted beside %s on a node of 2 GPUs", key)
		}
		if phases[workspacesv1.PhaseDeploying] != 1 || phases[workspacesv1.PhaseWaiting] != 1 {
			return fmt.Errorf("phases %v", phases)
		}
		return nil
	})
}
