package gate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
)

func lostNode(name, hostname string, gpus int64, mutate ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: hostname}},
		Status: corev1.NodeStatus{
			Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, gpus),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, m := range mutate {
		m(&n)
	}
	return n
}

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }
func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }

func boundPod(ns, node string, phase corev1.PodPhase) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: phase}}
}

// gpuPod is a pod bound to node that requests n NVIDIA GPUs.
func gpuPod(ns, node string, n int64) corev1.Pod {
	p := boundPod(ns, node, corev1.PodRunning)
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: childtest.GPUs(gpu.ResourceNVIDIA, n)}}}
	return p
}

func TestLost(t *testing.T) {
	ad := &workspacesv1.Admission{Cluster: "ns/cd", GPUResourceName: string(gpu.ResourceNVIDIA), GPUsPerReplica: 2, Replicas: 1, GPUs: 2,
		Nodes: []workspacesv1.AdmittedNode{{Name: "a", Hostname: "host-a", Replicas: 1}}}
	const own = "ws-x"
	for _, tc := range []struct {
		name  string
		ad    *workspacesv1.Admission
		nodes []corev1.Node
		pods  []corev1.Pod
		want  string // a part of the message; "" when the admission holds
	}{
		{name: "holds", ad: ad, nodes: []corev1.Node{lostNode("a", "host-a", 2)}},
		{name: "no admission", nodes: nil},
		{name: "cpu only", ad: &workspacesv1.Admission{Cluster: "ns/cd", Replicas: 1}},
		{name: "gone", ad: ad, nodes: []corev1.Node{lostNode("b", "host-b", 2)}, want: "node a is gone"},
		{name: "gone with its pod still listed", ad: ad, nodes: nil, pods: []corev1.Pod{boundPod(own, "a", corev1.PodRunning)}, want: "node a is gone"},
		{name: "replaced under the same name", ad: ad, nodes: []corev1.Node{lostNode("a", "host-a2", 2)}, want: "no longer host-a"},
		{name: "cordoned, running the pod", ad: ad, nodes: []corev1.Node{lostNode("a", "host-a", 2, cordoned)},
			pods: []corev1.Pod{boundPod(own, "a", corev1.PodRunning)}},
		{name: "NotReady, running the pod", ad: ad, nodes: []corev1.Node{lostNode("a", "host-a", 2, notReady)},
			pods: []corev1.Pod{boundPod(own, "a", corev1.PodRunning)}},
		{name: "cordoned, no pod", ad: ad, nodes: []corev1.Node{lostNode("a", "host-a", 2, cordoned)}, want: "cordoned"},
		{name: "cordoned, the pod finished", ad: ad, nodes: []corev1.Node{lostNode("a", "host-a", 2, cordoned)},
			pods: []corev1.Pod{boundPod(own, "a", corev1.PodSucceeded)}, want: "cordoned"},
		{name: "cordoned, another workspace's pod", ad: ad, nodes: []corev1.Node{lostNode("a", "host-a", 2, cordoned)},
			pods: []corev1.Pod{boundPod("ws-other", "a", corev1.PodRunning)}, want: "cordoned"},
		{name: "NotReady, no pod", ad: ad, nodes: []corev1.Node{lostNode("a", "host-a", 2, notReady)}, want: "NotReady"},
		{name: "too small now", ad: ad, nodes: []corev1.Node{lostNode("a", "host-a", 1)}, want: "allocates 1 nvidia.com/gpu, fewer than the 2"},
		{name: "too small, running the pod", ad: ad, nodes: []corev1.Node{lostNode("a", "host-a", 1)},
			pods: []corev1.Pod{boundPod(own, "a", corev1.PodRunning)}},
		{name: "taken by other pods", ad: ad, nodes: []corev1.Node{lostNode("a", "host-a", 2)},
			pods: []corev1.Pod{gpuPod("ws-other", "a", 1), gpuPod("ws-third", "a", 1)}, want: "taken by other pods (0 free there)"},
		{name: "room left beside other pods", ad: ad, nodes: []corev1.Node{lostNode("a", "host-a", 4)},
			pods: []corev1.Pod{gpuPod("ws-other", "a", 2)}},
		{name: "a finished pod takes nothing", ad: ad, nodes: []corev1.Node{lostNode("a", "host-a", 2)},
			pods: []corev1.Pod{func() corev1.Pod { p := gpuPod("ws-other", "a", 2); p.Status.Phase = corev1.PodSucceeded; return p }()}},
		{name: "taken, but running its own pod", ad: ad, nodes: []corev1.Node{lostNode("a", "host-a", 2)},
			pods: []corev1.Pod{gpuPod(own, "a", 2), gpuPod("ws-other", "a", 2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Lost(tc.ad, own, tc.nodes, tc.pods)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Lost = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestClusterRecreated(t *testing.T) {
	for _, tc := range []struct {
		recorded, current string
		want              bool
	}{
		{"u1", "u1", false},
		{"u1", "u2", true},
		{"", "u2", false}, // recorded before the field: adopted, not re-gated
		{"u1", "", false},
	} {
		ad := &workspacesv1.Admission{ClusterUID: types.UID(tc.recorded)}
		if got := ClusterRecreated(ad, types.UID(tc.current)); got != tc.want {
			t.Errorf("ClusterRecreated(%q, %q) = %v, want %v", tc.recorded, tc.current, got, tc.want)
		}
	}
	if ClusterRecreated(nil, "u") {
		t.Error("no admission: want false")
	}
}

func TestChildReplaced(t *testing.T) {
	for _, c := range []struct {
		recorded, now types.UID
		want          bool
	}{
		{"a", "a", false},
		{"a", "b", true},
		{"", "b", false}, // recorded before identities were
		{"a", "", false}, // the identity could not be read now
	} {
		ad := &workspacesv1.Admission{Cluster: "ns/cd", ClusterIdentity: c.recorded}
		if got := ChildReplaced(ad, c.now); got != c.want {
			t.Errorf("ChildReplaced(recorded %q, now %q) = %v, want %v", c.recorded, c.now, got, c.want)
		}
	}
	if ChildReplaced(nil, "a") {
		t.Error("no admission is never replaced")
	}
}

// TestSiteCounts: a site counts the admissions of its ClusterDeployment, of its peers, and of any
// ClusterDeployment on the same child by identity; its locks are its ClusterDeployment's and, when
// the identity is known, the child's.
func TestSiteCounts(t *testing.T) {
	cd := types.NamespacedName{Namespace: "team", Name: "cd"}
	peer := types.NamespacedName{Namespace: "platform", Name: "shared"}
	st := site{cd: cd, id: "uid-1", peers: []types.NamespacedName{peer}}
	for _, c := range []struct {
		ad   *workspacesv1.Admission
		want bool
	}{
		{nil, false},
		{&workspacesv1.Admission{Cluster: "team/cd"}, true},
		{&workspacesv1.Admission{Cluster: "platform/shared"}, true},
		{&workspacesv1.Admission{Cluster: "other/cd", ClusterIdentity: "uid-1"}, true},
		{&workspacesv1.Admission{Cluster: "other/cd", ClusterIdentity: "uid-2"}, false},
		{&workspacesv1.Admission{Cluster: "other/cd"}, false},
	} {
		if got := st.counts(c.ad); got != c.want {
			t.Errorf("counts(%+v) = %v, want %v", c.ad, got, c.want)
		}
	}
	if k := st.lockKeys(); len(k) != 2 || k[0] != "team/cd" || k[1] != "child:uid-1" {
		t.Errorf("lockKeys %q", k)
	}
	alone := site{cd: cd}
	if k := alone.lockKeys(); len(k) != 1 || k[0] != "team/cd" {
		t.Errorf("lockKeys without identity %q", k)
	}
	// One ClusterDeployment decided on with and without its child's identity (a connection whose
	// identity read failed): the two decisions share a lock.
	shared := false
	for _, a := range st.lockKeys() {
		for _, b := range alone.lockKeys() {
			shared = shared || a == b
		}
	}
	if !shared {
		t.Errorf("decisions on %s with identity (%q) and without (%q) take no common lock", cd, st.lockKeys(), alone.lockKeys())
	}
	if alone.counts(&workspacesv1.Admission{Cluster: "other/cd"}) {
		t.Error("a site without identity counts another ClusterDeployment's admission")
	}
	if got := st.clusters(); len(got) != 2 || got[0] != cd || got[1] != peer {
		t.Errorf("clusters %v", got)
	}
}
