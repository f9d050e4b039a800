package gate

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
)

func current(m *memory, ws *workspacesv1.WorkspaceDeployment) *workspacesv1.Admission {
	ad, _ := m.state(ws)
	return ad
}

// A pending admission counts whatever the cached object says, until the pass's status write settles
// it; from then on the cache is trusted once it has caught up with that write.
func TestPendingAdmissionUntilSettled(t *testing.T) {
	a := newMemory()
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "nb", ResourceVersion: "10"}}
	ad := &workspacesv1.Admission{Cluster: "team/cd", GPUs: 1, GPUsPerReplica: 1, Replicas: 1}
	a.pend("team/nb", ad)
	ws.ResourceVersion = "99"
	if got := current(a, ws); got == nil || got.GPUs != 1 {
		t.Fatalf("pending admission not counted against a newer cached object: %+v", got)
	}
	if keys := a.keysOn(site{cd: types.NamespacedName{Namespace: "team", Name: "cd"}}.counts); len(keys) != 1 || keys[0] != "team/nb" {
		t.Fatalf("keysOn = %v", keys)
	}
	a.settle("team/nb", ad, "100", workspacesv1.PhaseDeploying)
	if got := current(a, ws); got == nil {
		t.Fatal("a settled admission is dropped while the cache is older than its write")
	}
	ws.ResourceVersion = "100"
	ws.Status.Admission = nil // what the cache shows is trusted now
	if got := current(a, ws); got != nil {
		t.Fatalf("cache caught up, yet the memory still answers: %+v", got)
	}

	a.pend("team/nb", ad)
	a.settle("team/nb", nil, "101", workspacesv1.PhaseWaiting)
	if got := current(a, ws); got != nil {
		t.Fatalf("a pending admission the pass dropped still counts: %+v", got)
	}
	// settle never touches an admission written at once (record).
	a.wrote("team/nb", ad, "200", workspacesv1.PhaseDeploying)
	a.settle("team/nb", nil, "201", workspacesv1.PhaseWaiting)
	if got := current(a, ws); got == nil {
		t.Fatal("settle dropped an admission that was not pending")
	}
}

// An admission's replicas already bound (in its own namespace, to a node, not terminal, asking for
// the GPU resource) are not charged again; the rest are charged to the nodes they were counted on.
func TestAdmittedReservationsLeaveBoundReplicasOut(t *testing.T) {
	pod := func(ns, node string, phase corev1.PodPhase, gpus int64) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ns + node + string(phase)},
			Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c"}}},
			Status: corev1.PodStatus{Phase: phase}}
		if gpus > 0 {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
		}
		return p
	}
	pods := []corev1.Pod{
		pod("ws-a", "n1", corev1.PodRunning, 2),   // bound on n1: counts
		pod("ws-a", "", corev1.PodPending, 2),     // not bound
		pod("ws-a", "n2", corev1.PodSucceeded, 2), // terminal
		pod("ws-a", "n2", corev1.PodRunning, 0),   // asks for no GPU
		pod("ws-b", "n2", corev1.PodRunning, 2),   // another workspace's
	}
	ad := &workspacesv1.Admission{GPUResourceName: "nvidia.com/gpu", GPUVendor: "NVIDIA", GPUsPerReplica: 2, Replicas: 3,
		Nodes: []workspacesv1.AdmittedNode{{Name: "n1", Replicas: 2}, {Name: "n2", Replicas: 1}}}
	got := admittedReservations("team/a", ad, boundPodsByNamespace(pods, []corev1.Node{lostNode("n1", "n1", 8), lostNode("n2", "n2", 8)})["ws-a"])
	want := []gpu.Reservation{
		{Key: "team/a", Vendor: "NVIDIA", Node: "n1", GPUsPerReplica: 2, Replicas: 1},
		{Key: "team/a", Vendor: "NVIDIA", Node: "n2", GPUsPerReplica: 2, Replicas: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("admittedReservations = %+v, want %+v", got, want)
	}
}

// A workspace the gate told to wait counts as waiting, with the resources it was decided on, while the
// cached object is the one the decision was made on (its Waiting status not in the cache yet, or a
// first pass without resolved resources); once the cache shows a newer object, its status decides.
// Any other decision forgets the wait.
func TestDecidedWaitUntilTheCacheShowsIt(t *testing.T) {
	m := newMemory()
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "nb", ResourceVersion: "10"}}
	res := resized(1, 2, "")
	if m.waiting(ws) != nil {
		t.Fatal("waiting before any decision")
	}
	m.decided("team/nb", "10", res, true)
	if got := m.waiting(ws); got == nil || GPUs(got) != 2 {
		t.Fatalf("a wait decided on the cached object: %+v", got)
	}
	res.Replicas = 5 // the memory keeps its own copy
	if got := m.waiting(ws); got.Replicas != 1 {
		t.Fatalf("the remembered resources changed with the caller's: %+v", got)
	}
	m.decided("team/nb", "10", res, false)
	if m.waiting(ws) != nil {
		t.Fatal("another decision did not forget the wait")
	}
	m.decided("team/nb", "10", res, true)
	ws.ResourceVersion = "11" // the pass's status write reached the cache
	if m.waiting(ws) != nil {
		t.Fatal("the memory still answers once the cache shows a newer object")
	}
	ws.ResourceVersion = "10"
	if m.waiting(ws) != nil {
		t.Fatal("a wait dropped once is back")
	}
	m.decided("team/nb", "10", res, true)
	m.forget("team/nb")
	if m.waiting(ws) != nil {
		t.Fatal("forget kept the wait")
	}
}
