package gate

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
)

// resized are resolved resources of replicas x perReplica NVIDIA GPUs of a model ("" for any).
func resized(replicas, perReplica int32, model string) *workspacesv1.ResolvedResources {
	return &workspacesv1.ResolvedResources{Replicas: replicas, GPUResourceName: string(gpu.ResourceNVIDIA),
		PerReplica: workspacesv1.PerReplicaResources{GPUVendor: workspacesv1.GPUVendorNVIDIA, GPUCount: &perReplica, GPUType: model}}
}

// admittedOn is an admission of perReplica NVIDIA GPUs per replica, its replicas counted on nodes.
func admittedOn(perReplica int64, nodes ...workspacesv1.AdmittedNode) *workspacesv1.Admission {
	ad := &workspacesv1.Admission{Cluster: "ns/cd", GPUResourceName: string(gpu.ResourceNVIDIA), GPUVendor: workspacesv1.GPUVendorNVIDIA,
		GPUsPerReplica: perReplica, Nodes: nodes}
	for _, n := range nodes {
		ad.Replicas += n.Replicas
	}
	ad.GPUs = perReplica * int64(ad.Replicas)
	return ad
}

func withModel(model string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[gpu.LabelGPUModel] = model }
}

// TestGrowthReservations: a workspace that waits while it holds an admission reserves what the
// admission cannot give it: the added GPUs per replica on the node a replica runs on when that node
// can hold it grown, the whole replica by first fit when it cannot, is gone, or is added.
func TestGrowthReservations(t *testing.T) {
	const key = "team/a"
	nodes := []corev1.Node{lostNode("n1", "n1", 8, withModel("h100")), lostNode("small", "small", 4, withModel("h100"))}
	sel := map[string]string{gpu.LabelGPUModel: "h100"}
	on := func(node string, replicas int32) workspacesv1.AdmittedNode {
		return workspacesv1.AdmittedNode{Name: node, Hostname: node, Replicas: replicas}
	}
	pinned := func(node string, perReplica int64, replicas int32) gpu.Reservation {
		return gpu.Reservation{Key: key, Vendor: workspacesv1.GPUVendorNVIDIA, Selector: sel, Node: node, GPUsPerReplica: perReplica, Replicas: replicas}
	}
	firstFit := func(perReplica int64, replicas int32) gpu.Reservation {
		return pinned("", perReplica, replicas)
	}
	for _, tc := range []struct {
		name string
		ad   *workspacesv1.Admission
		res  *workspacesv1.ResolvedResources
		want []gpu.Reservation
	}{
		{name: "more GPUs per replica: the added ones where the replicas run", ad: admittedOn(2, on("n1", 2)), res: resized(2, 4, "h100"),
			want: []gpu.Reservation{pinned("n1", 2, 2)}},
		{name: "more replicas: the added replicas whole", ad: admittedOn(2, on("n1", 1)), res: resized(3, 2, "h100"),
			want: []gpu.Reservation{firstFit(2, 2)}},
		{name: "both", ad: admittedOn(2, on("n1", 1)), res: resized(2, 4, "h100"),
			want: []gpu.Reservation{pinned("n1", 2, 1), firstFit(4, 1)}},
		{name: "fewer replicas of more GPUs", ad: admittedOn(1, on("n1", 3)), res: resized(2, 2, "h100"),
			want: []gpu.Reservation{pinned("n1", 1, 2)}},
		{name: "the node cannot hold a grown replica: it moves, whole", ad: admittedOn(2, on("small", 1)), res: resized(1, 6, "h100"),
			want: []gpu.Reservation{firstFit(6, 1)}},
		{name: "the node holds one of two grown replicas", ad: admittedOn(1, on("small", 2)), res: resized(2, 3, "h100"),
			want: []gpu.Reservation{pinned("small", 2, 1), firstFit(3, 1)}},
		{name: "the node is gone", ad: admittedOn(2, on("gone", 1)), res: resized(1, 4, "h100"),
			want: []gpu.Reservation{firstFit(4, 1)}},
		{name: "the node was replaced under its name", ad: admittedOn(2, workspacesv1.AdmittedNode{Name: "n1", Hostname: "old", Replicas: 1}),
			res: resized(1, 4, "h100"), want: []gpu.Reservation{firstFit(4, 1)}},
		{name: "gated again, the same request: the replica whose node is gone, whole", ad: admittedOn(2, on("gone", 2)), res: resized(2, 2, "h100"),
			want: []gpu.Reservation{firstFit(2, 2)}},
		{name: "gated again, the same request, the node still there: nothing beyond the admission", ad: admittedOn(2, on("n1", 2)), res: resized(2, 2, "h100")},
		{name: "the node has another model than the request asks now", ad: admittedOn(2, on("n1", 1)), res: resized(1, 4, "a100"),
			want: []gpu.Reservation{{Key: key, Vendor: workspacesv1.GPUVendorNVIDIA, Selector: map[string]string{gpu.LabelGPUModel: "a100"}, GPUsPerReplica: 4, Replicas: 1}}},
		{name: "the admission records no node: the added GPUs by first fit", ad: &workspacesv1.Admission{Cluster: "ns/cd", GPUVendor: workspacesv1.GPUVendorNVIDIA,
			GPUResourceName: string(gpu.ResourceNVIDIA), GPUsPerReplica: 2, Replicas: 1, GPUs: 2}, res: resized(1, 4, "h100"),
			want: []gpu.Reservation{firstFit(2, 1)}},
		{name: "the admission holds no GPUs", ad: &workspacesv1.Admission{Cluster: "ns/cd", Replicas: 1}, res: resized(1, 4, "h100"),
			want: []gpu.Reservation{firstFit(4, 1)}},
		{name: "the admission holds GPUs of another vendor", ad: func() *workspacesv1.Admission {
			ad := admittedOn(2, on("n1", 1))
			ad.GPUVendor, ad.GPUResourceName = workspacesv1.GPUVendorAMD, string(gpu.ResourceAMD)
			return ad
		}(), res: resized(1, 2, "h100"), want: []gpu.Reservation{firstFit(2, 1)}},
		{name: "fewer GPUs: nothing", ad: admittedOn(4, on("n1", 2)), res: resized(2, 2, "h100")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := growthReservations(key, tc.ad, tc.res, nodes); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("growthReservations =\n%+v, want\n%+v", got, tc.want)
			}
		})
	}
}

// TestGrowthHoldsTheGPUsBesideItsOwn: one node of 8 GPUs, a workspace's replica runs there on 2 and
// it asks for 7 now. Its own decision counts its 2 as its own and admits it; a newer waiter that asks
// for 5 must wait, although 6 are free. Reserving the whole request of 7 instead would not hold them:
// a reservation that fits nowhere takes nothing.
func TestGrowthHoldsTheGPUsBesideItsOwn(t *testing.T) {
	nodes := []corev1.Node{lostNode("n1", "n1", 8)}
	own := []corev1.Pod{gpuPod("ws-a", "n1", 2)}
	ad := admittedOn(2, workspacesv1.AdmittedNode{Name: "n1", Hostname: "n1", Replicas: 1})
	res := resized(1, 7, "")
	if d := gpu.Gate(gpuRequest("team/a", res), nodes, nil, nil); d.Outcome != gpu.Admit {
		t.Fatalf("the resized workspace's own decision: %s: %s", d.Outcome, d.Message)
	}
	newer := gpuRequest("team/c", resized(1, 5, ""))
	if d := gpu.Gate(newer, nodes, own, growthReservations("team/a", ad, res, nodes)); d.Outcome != gpu.Wait {
		t.Errorf("the newer waiter: %s: %s, want Wait", d.Outcome, d.Message)
	}
	whole := []gpu.Reservation{{Key: "team/a", Vendor: workspacesv1.GPUVendorNVIDIA, Selector: map[string]string{}, GPUsPerReplica: 7, Replicas: 1}}
	if d := gpu.Gate(newer, nodes, own, whole); d.Outcome != gpu.Admit {
		t.Errorf("with the whole request reserved the newer waiter: %s; the test no longer shows why the added GPUs are reserved", d.Outcome)
	}
}

// TestAdmittedReservationsAfterAResize: once a resize to more GPUs per replica is admitted, the
// release's old pods still run on the smaller request until its rollout replaces them. They are not
// the admission's replicas: the nodes show only their GPUs as taken, and the admission reserves its
// replicas whole until pods of the new request are bound.
func TestAdmittedReservationsAfterAResize(t *testing.T) {
	n1 := []corev1.Node{lostNode("n1", "n1", 8)}
	ad := admittedOn(4, workspacesv1.AdmittedNode{Name: "n1", Hostname: "n1", Replicas: 2})
	old := []corev1.Pod{gpuPod("ws-a", "n1", 2), gpuPod("ws-a", "n1", 2)}
	reserved := func(replicas int32) []gpu.Reservation {
		return []gpu.Reservation{{Key: "team/a", Vendor: workspacesv1.GPUVendorNVIDIA, Node: "n1", GPUsPerReplica: 4, Replicas: replicas}}
	}
	if got, want := admittedReservations("team/a", ad, boundPodsByNamespace(old, n1)["ws-a"]), reserved(2); !reflect.DeepEqual(got, want) {
		t.Errorf("with the old pods only: %+v, want %+v", got, want)
	}
	rolling := append(old, gpuPod("ws-a", "n1", 4))
	if got, want := admittedReservations("team/a", ad, boundPodsByNamespace(rolling, n1)["ws-a"]), reserved(1); !reflect.DeepEqual(got, want) {
		t.Errorf("with one new pod bound: %+v, want %+v", got, want)
	}
	// After a resize to fewer GPUs per replica, the old pods hold more than a replica needs: bound.
	smaller := admittedOn(1, workspacesv1.AdmittedNode{Name: "n1", Hostname: "n1", Replicas: 2})
	if got := admittedReservations("team/a", smaller, boundPodsByNamespace(old, n1)["ws-a"]); len(got) != 0 {
		t.Errorf("after a resize to fewer GPUs: %+v, want none", got)
	}
}

// TestAdmittedReservationsCountPodsWhereTheyHold: a replica pinned to a node is bound only by a pod
// on that node, and a pod bound to a node that is gone binds nothing. A workspace admitted again on a
// new node while its old pod still sits on the node that went (or runs on its earlier node) reserves
// its replica on the new node, so no other workspace is admitted onto it.
func TestAdmittedReservationsCountPodsWhereTheyHold(t *testing.T) {
	ad := admittedOn(1, workspacesv1.AdmittedNode{Name: "new", Hostname: "new", Replicas: 1})
	want := []gpu.Reservation{{Key: "team/a", Vendor: workspacesv1.GPUVendorNVIDIA, Node: "new", GPUsPerReplica: 1, Replicas: 1}}
	for name, tc := range map[string]struct {
		pods  []corev1.Pod
		nodes []corev1.Node
	}{
		"the old pod on a node that is gone":    {[]corev1.Pod{gpuPod("ws-a", "gone", 1)}, []corev1.Node{lostNode("new", "new", 2)}},
		"the old pod on the earlier node still": {[]corev1.Pod{gpuPod("ws-a", "earlier", 1)}, []corev1.Node{lostNode("new", "new", 2), lostNode("earlier", "earlier", 2)}},
	} {
		if got := admittedReservations("team/a", ad, boundPodsByNamespace(tc.pods, tc.nodes)["ws-a"]); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	bound := []corev1.Pod{gpuPod("ws-a", "new", 1)}
	if got := admittedReservations("team/a", ad, boundPodsByNamespace(bound, []corev1.Node{lostNode("new", "new", 2)})["ws-a"]); len(got) != 0 {
		t.Errorf("the replica bound on its node: %+v, want none", got)
	}
}
