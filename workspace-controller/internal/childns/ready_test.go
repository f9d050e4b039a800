package childns

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// readyPod creates a pod in ns bound to node and reports it Ready, as its kubelet would.
func readyPod(t *testing.T, ns, name, node string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{
		NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.example/x:1"}}}}
	onChild(t, pod)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := childAPI.Client.Status().Update(context.Background(), pod); err != nil {
		t.Fatalf("pod %s/%s status: %v", ns, name, err)
	}
}

// TestPodsReadyOnAGoneNode: a pod whose node was deleted (a machine replaced) still says Ready, as
// its kubelet last reported, until the child's pod garbage collector removes it; it does not run, and
// the release's pods are not ready while it is there.
func TestPodsReadyOnAGoneNode(t *testing.T) {
	ctx := context.Background()
	n := Namespaces{Child: childAPI.Client, Cluster: cluster}
	ns := owned.LocalReleaseNamespace(unique("gone"))
	onChild(t, namespaceLabelled(ns, nil))
	node := unique("node")
	onChild(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})

	readyPod(t, ns, "nb-here", node)
	got, err := n.PodsReady(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Ready(true) || got.Pods != 1 {
		t.Fatalf("a Ready pod on a node that exists: %+v, want ready", got)
	}

	readyPod(t, ns, "nb-gone", unique("replaced-node"))
	got, err = n.PodsReady(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if got.Ready(true) || got.Pods != 2 || len(got.NotReady) != 1 || got.NotReady[0] != "nb-gone" ||
		len(got.OnGoneNodes) != 1 || got.OnGoneNodes[0] != "nb-gone" {
		t.Fatalf("a Ready pod on a node that no longer exists: %+v, want it counted as not Ready", got)
	}
	const want = "1 of 2 pod(s) of the release are not Ready yet (nb-gone); nb-gone on a node that no longer exists"
	if got.String() != want {
		t.Fatalf("String() = %q, want %q", got.String(), want)
	}
}

// TestPodsReadiness: which pods count, and which of them run.
func TestPodsReadiness(t *testing.T) {
	pod := func(name, node string, ready bool, phase corev1.PodPhase) corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	deleting := pod("old", "a", true, corev1.PodRunning)
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	pods := []corev1.Pod{
		pod("run", "a", true, corev1.PodRunning),
		pod("pending", "", false, corev1.PodPending),
		pod("job", "a", false, corev1.PodSucceeded),
		pod("orphan", "b", true, corev1.PodRunning),
		deleting,
	}
	if !needsNodes(pods) || needsNodes(pods[1:3]) {
		t.Fatal("needsNodes: the nodes are needed exactly when a counted pod is Ready and bound")
	}
	got := podsReadiness(pods, map[string]bool{"a": true})
	if got.Pods != 3 || len(got.NotReady) != 2 || got.NotReady[0] != "orphan" || got.NotReady[1] != "pending" ||
		len(got.OnGoneNodes) != 1 || got.OnGoneNodes[0] != "orphan" {
		t.Fatalf("podsReadiness = %+v", got)
	}
}
