package gate

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
)

// placed is a borrower and the node its one pod runs on.
type placed struct {
	b    borrower
	node string
}

// reclaimCluster is two nodes of 4 GPUs, each borrower's pod on its node.
func reclaimCluster(ps []placed) ([]corev1.Node, []corev1.Pod, []borrower) {
	nodes := []corev1.Node{lostNode("n1", "h1", 4), lostNode("n2", "h2", 4)}
	var pods []corev1.Pod
	var bs []borrower
	for _, p := range ps {
		pods = append(pods, gpuPod(p.b.releaseNamespace, p.node, p.b.gpus))
		bs = append(bs, p.b)
	}
	return nodes, pods, bs
}

func keys(bs []borrower) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.key)
	}
	return out
}

// TestChooseBorrowers: the borrowers a reclaim stops are the fewest that make the request fit, taken
// lowest priority first, then youngest admission; a member is stopped only while it borrows.
func TestChooseBorrowers(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	bor := func(key, ns string, priority int32, admitted time.Duration, gpus int64) borrower {
		return borrower{key: ns + "/" + key, namespace: ns, releaseNamespace: "ws-" + key, priority: priority, admittedAt: t0.Add(admitted), gpus: gpus}
	}
	four := gpu.Request{Key: "b/w", GPUsPerReplica: 4, Replicas: 1}
	two := gpu.Request{Key: "b/w", GPUsPerReplica: 2, Replicas: 1}
	old, young := bor("old", "a", 0, 0, 2), bor("young", "a", 0, time.Hour, 2)
	low, high := bor("low", "a", -5, 0, 2), bor("high", "a", 5, time.Hour, 2)
	big := bor("big", "c", 0, -time.Hour, 4)
	for _, tc := range []struct {
		name      string
		req       gpu.Request
		placed    []placed
		borrowing map[string]int64
		want      []string
	}{
		{"the youngest admission first", two, []placed{{old, "n1"}, {young, "n1"}, {big, "n2"}},
			map[string]int64{"a": 4, "c": 4}, []string{"a/young"}},
		{"the lowest priority first, however old", two, []placed{{low, "n1"}, {high, "n1"}, {big, "n2"}},
			map[string]int64{"a": 4, "c": 4}, []string{"a/low"}},
		{"a whole node: both borrowers of that node", four, []placed{{old, "n1"}, {young, "n1"}, {big, "n2"}},
			map[string]int64{"a": 4, "c": 0}, []string{"a/young", "a/old"}},
		{"a member stops only while it borrows, and an earlier choice a later one makes unneeded is dropped", four,
			[]placed{{old, "n1"}, {young, "n1"}, {big, "n2"}},
			map[string]int64{"a": 2, "c": 4}, []string{"c/big"}},
		{"a member within its guarantee is not stopped", four, []placed{{old, "n1"}, {young, "n1"}, {big, "n2"}},
			map[string]int64{"a": 2, "c": 0}, nil},
		{"fits already: nothing is stopped", two, []placed{{old, "n1"}},
			map[string]int64{"a": 2}, nil},
		{"a request no stop makes fit", gpu.Request{Key: "b/w", GPUsPerReplica: 8, Replicas: 1}, []placed{{old, "n1"}},
			map[string]int64{"a": 2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, pods, cands := reclaimCluster(tc.placed)
			got := keys(chooseBorrowers(tc.req, nodes, pods, nil, cands, tc.borrowing))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("stops %v, want %v", got, tc.want)
			}
		})
	}
}

// TestChooseBorrowersReservations: a borrower's replicas not bound yet (its reservation) are freed by
// its stop too; another workspace's reservation is not.
func TestChooseBorrowersReservations(t *testing.T) {
	nodes := []corev1.Node{lostNode("n1", "h1", 4)}
	b := borrower{key: "a/x", namespace: "a", releaseNamespace: "ws-x", gpus: 4}
	req := gpu.Request{Key: "b/w", GPUsPerReplica: 4, Replicas: 1}
	held := []gpu.Reservation{{Key: "a/x", GPUsPerReplica: 4, Replicas: 1, Node: "n1"}}
	if got := keys(chooseBorrowers(req, nodes, nil, held, []borrower{b}, map[string]int64{"a": 4})); !reflect.DeepEqual(got, []string{"a/x"}) {
		t.Errorf("stops %v, want the borrower whose reservation holds the node", got)
	}
	held[0].Key = "d/other"
	if got := chooseBorrowers(req, nodes, nil, held, []borrower{b}, map[string]int64{"a": 4}); got != nil {
		t.Errorf("stops %v: another workspace's reservation is not freed by any stop", keys(got))
	}
}

// FuzzChooseBorrowers: on any cluster, the borrowers chosen make the request fit, were needed (it did
// not fit before), are distinct candidates, and each was stopped while its namespace still borrowed;
// nil otherwise.
func FuzzChooseBorrowers(f *testing.F) {
	f.Add([]byte{4, 4, 2, 1, 0, 2, 1, 1, 4, 0, 2}, int64(4), int32(1))
	f.Add([]byte{8, 2, 1, 3, 0, 1, 2, 2}, int64(2), int32(2))
	f.Fuzz(func(t *testing.T, data []byte, perReplica int64, replicas int32) {
		if len(data) < 2 || perReplica < 0 || perReplica > 16 || replicas < 1 || replicas > 4 {
			return
		}
		nNodes := int(data[0]%3) + 1
		var nodes []corev1.Node
		for i := 0; i < nNodes; i++ {
			nodes = append(nodes, lostNode(string(rune('a'+i)), string(rune('a'+i)), int64(data[1]%9)))
		}
		var cands []borrower
		var pods []corev1.Pod
		borrowing := map[string]int64{}
		for i, rest := 0, data[2:]; len(rest) >= 3 && i < 8; i, rest = i+1, rest[3:] {
			ns := string(rune('p' + rest[0]%3))
			b := borrower{key: ns + "/" + string(rune('0'+i)), namespace: ns, releaseNamespace: "ws-" + string(rune('0'+i)),
				priority: int32(rest[1] % 3), admittedAt: time.Unix(int64(rest[2]), 0), gpus: int64(rest[2]%4) + 1}
			cands = append(cands, b)
			pods = append(pods, gpuPod(b.releaseNamespace, nodes[int(rest[1])%nNodes].Name, b.gpus))
			borrowing[ns] += int64(rest[0] % 4)
		}
		req := gpu.Request{Key: "q/w", GPUsPerReplica: perReplica, Replicas: replicas}
		got := chooseBorrowers(req, nodes, pods, nil, cands, borrowing)
		if got == nil {
			return
		}
		if gpu.Gate(req, nodes, pods, nil).Outcome != gpu.Wait {
			t.Fatalf("stops %v for a request that did not wait", keys(got))
		}
		if !fitsWithout(req, nodes, pods, nil, got) {
			t.Fatalf("stops %v and the request still does not fit", keys(got))
		}
		seen := map[string]bool{}
		left := map[string]int64{}
		for ns, n := range borrowing {
			left[ns] = n
		}
		for _, b := range got {
			if seen[b.key] {
				t.Fatalf("stops %s twice", b.key)
			}
			seen[b.key] = true
			if left[b.namespace] <= 0 {
				t.Fatalf("stops %s while its namespace %s borrows nothing more", b.key, b.namespace)
			}
			left[b.namespace] -= b.gpus
		}
	})
}

// TestNoReclaim: a waiter within its guarantee says why it stops nobody only while its cohort borrows,
// and whether no borrower is on its cluster or those there are too few.
func TestNoReclaim(t *testing.T) {
	some := []borrower{{key: "a/x", namespace: "a", gpus: 2}}
	for _, tc := range []struct {
		name      string
		borrowing map[string]int64
		cands     []borrower
		want      string
	}{
		{"nobody borrows", map[string]int64{"a": 0}, nil, ""},
		{"no member", nil, nil, ""},
		{"borrowed elsewhere", map[string]int64{"a": 4}, nil, "no admission on this cluster borrows from cohort fleet"},
		{"too few here", map[string]int64{"a": 4}, some, "stopping every admission on this cluster that borrows from cohort fleet would not make room"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := noReclaim("fleet", tc.borrowing, tc.cands)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("noReclaim = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReclaimHoldsAcrossClusterDeployments: a reclaim recorded on one ClusterDeployment holds the
// child's GPUs for the decisions of every ClusterDeployment that reaches the same child (a peer of the
// site), and comes first in their queue; a reclaim on another child, or one no longer queued, holds
// nothing there.
func TestReclaimHoldsAcrossClusterDeployments(t *testing.T) {
	a := types.NamespacedName{Namespace: "team-a", Name: "gpu"}
	b := types.NamespacedName{Namespace: "team-b", Name: "gpu"}
	st := site{cd: a, id: "child-1", peers: []types.NamespacedName{b}}
	waiting := func(cluster string) *workspacesv1.WorkspaceDeployment {
		ws := &workspacesv1.WorkspaceDeployment{}
		ws.Status.Phase = workspacesv1.PhaseWaiting
		if cluster != "" {
			ws.Status.Reclaiming = &workspacesv1.Reclaiming{Cluster: cluster}
		}
		return ws
	}
	if reclaimingOn(waiting(b.String()), st) == nil {
		t.Error("a reclaim on a peer ClusterDeployment of the child holds nothing for the site")
	}
	if reclaimingOn(waiting(a.String()), st) == nil {
		t.Error("a reclaim on the site's own ClusterDeployment holds nothing")
	}
	if reclaimingOn(waiting("elsewhere/gpu"), st) != nil {
		t.Error("a reclaim on another child holds the site's GPUs")
	}
	admitted := waiting(b.String())
	admitted.Status.Phase = workspacesv1.PhaseDeploying
	if reclaimingOn(admitted, st) != nil {
		t.Error("a reclaimer no longer queued still holds")
	}
	if !(priorityCaps{}).aheadOn(waiting(b.String()), waiting(""), st) {
		t.Error("a reclaimer on a peer ClusterDeployment is not ahead of a waiter of the site")
	}
}

// FuzzSortOnAgreesWithAheadOn: sortOn, which reads each workspace's reclaim and priority once, puts
// the workspaces in the order aheadOn gives: no workspace after another that aheadOn puts behind it.
// The workspaces are drawn from the bytes: namespace (capped or not), priority, creation second, a
// reclaim on the site, on another child, or none, with its time, and Waiting or Deploying.
func FuzzSortOnAgreesWithAheadOn(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17})
	f.Add([]byte{255, 0, 3, 3, 3, 1, 0, 2, 2, 2, 200, 7, 7, 7, 7, 7, 7, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		st := site{cd: types.NamespacedName{Namespace: "team-a", Name: "gpu"}}
		caps := priorityCaps{"team-a": 5, "team-b": 1}
		t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
		var list []*workspacesv1.WorkspaceDeployment
		for i := 0; i+2 < len(data) && len(list) < 64; i += 3 {
			b0, b1, b2 := data[i], data[i+1], data[i+2]
			ws := &workspacesv1.WorkspaceDeployment{}
			ws.Namespace = []string{"team-a", "team-b", "team-c"}[int(b0)%3]
			ws.Name = string(rune('a' + len(list)%26))
			ws.Spec.Priority = int32(b1%9) - 2
			ws.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(b2%4) * time.Second))
			ws.Status.Phase = workspacesv1.PhaseWaiting
			if b0&0x40 != 0 {
				ws.Status.Phase = workspacesv1.PhaseDeploying
			}
			switch (b0 >> 2) % 3 {
			case 1:
				ws.Status.Reclaiming = &workspacesv1.Reclaiming{Cluster: st.cd.String(), Since: metav1.NewTime(t0.Add(time.Duration(b1%3) * time.Second))}
			case 2:
				ws.Status.Reclaiming = &workspacesv1.Reclaiming{Cluster: "elsewhere/gpu", Since: metav1.NewTime(t0)}
			}
			list = append(list, ws)
		}
		caps.sortOn(list, st)
		for i := range list {
			for j := i + 1; j < len(list); j++ {
				if caps.aheadOn(list[j], list[i], st) {
					t.Fatalf("sortOn put %s/%s (priority %d, reclaim %v) at %d, before %s/%s (priority %d, reclaim %v) at %d, which aheadOn puts ahead of it",
						list[i].Namespace, list[i].Name, list[i].Spec.Priority, list[i].Status.Reclaiming, i,
						list[j].Namespace, list[j].Name, list[j].Spec.Priority, list[j].Status.Reclaiming, j)
				}
			}
		}
	})
}
