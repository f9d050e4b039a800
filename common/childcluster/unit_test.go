package childcluster

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestTrimNodeKeepsWhatGPUMathNeeds(t *testing.T) {
	in := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"big": "x"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: corev1.NodeSpec{Unschedulable: true, PodCIDR: "10.0.0.0/24"},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			Capacity:    corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			Images:      []corev1.ContainerImage{{Names: []string{"img"}}},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "ok", LastHeartbeatTime: metav1.Now()},
			},
		},
	}
	out, err := trimNode(in)
	if err != nil {
		t.Fatal(err)
	}
	n := out.(*corev1.Node)
	if n.Name != "n" || n.Labels["a"] != "b" || !n.Spec.Unschedulable || n.Status.Allocatable.Name("nvidia.com/gpu", resource.DecimalSI).Value() != 8 {
		t.Fatalf("lost needed fields: %+v", n)
	}
	if n.Annotations != nil || n.ManagedFields != nil || n.Spec.PodCIDR != "" || n.Status.Capacity != nil || n.Status.Images != nil {
		t.Fatalf("kept fields it should drop: %+v", n)
	}
	if len(n.Status.Conditions) != 1 || n.Status.Conditions[0] != (corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}) {
		t.Fatalf("want only Ready's type and status: %+v", n.Status.Conditions)
	}
	if tomb, _ := trimNode("not a node"); tomb != "not a node" {
		t.Fatal("non-nodes must pass through")
	}
}

func TestTrimPodKeepsResources(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	in := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: map[string]string{"x": "y"}},
		Spec: corev1.PodSpec{
			NodeName: "n", NodeSelector: map[string]string{"k": "v"},
			Containers:     []corev1.Container{{Name: "c", Image: "i", Env: []corev1.EnvVar{{Name: "SECRET", Value: "s"}}, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}},
			InitContainers: []corev1.Container{{Name: "s", RestartPolicy: &always}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
	}
	out, _ := trimPod(in)
	p := out.(*corev1.Pod)
	if p.Spec.NodeName != "n" || p.Spec.NodeSelector["k"] != "v" || p.Status.Phase != corev1.PodRunning ||
		p.Spec.Containers[0].Resources.Requests.Name("nvidia.com/gpu", resource.DecimalSI).Value() != 1 ||
		p.Spec.InitContainers[0].RestartPolicy == nil {
		t.Fatalf("lost needed fields: %+v", p)
	}
	if p.Spec.Containers[0].Env != nil || p.Spec.Containers[0].Image != "" || p.Annotations != nil || p.Status.Conditions != nil {
		t.Fatalf("kept fields it should drop: %+v", p)
	}
}

func TestChangedIgnoresResourceVersionAndHeartbeats(t *testing.T) {
	mk := func(rv string, ready corev1.ConditionStatus, hb time.Time) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: rv}, Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: metav1.NewTime(hb)}}}}
		out, _ := trimNode(n)
		return out.(*corev1.Node)
	}
	if nodeChanged(mk("1", corev1.ConditionTrue, time.Unix(1, 0)), mk("2", corev1.ConditionTrue, time.Unix(2, 0))) {
		t.Fatal("a heartbeat is not a change")
	}
	if !nodeChanged(mk("1", corev1.ConditionTrue, time.Unix(1, 0)), mk("2", corev1.ConditionFalse, time.Unix(1, 0))) {
		t.Fatal("Ready flipping is a change")
	}
	a := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	b := a.DeepCopy()
	b.ResourceVersion = "2"
	if podChanged(a, b) {
		t.Fatal("resourceVersion alone is not a change")
	}
	b.Spec.NodeName = "n"
	if !podChanged(a, b) {
		t.Fatal("binding is a change")
	}
}

func TestNotifierCoalescesAndNeverBlocks(t *testing.T) {
	n := newNotifier(50 * time.Millisecond)
	defer n.close()
	// No subscriber: triggers are dropped, nothing blocks.
	for range 1000 {
		n.trigger(types.NamespacedName{Namespace: "ns", Name: "a"})
	}
	ch, cancel := n.subscribe()
	defer cancel()
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	for range 1000 {
		n.trigger(a)
		n.trigger(b)
	}
	got := map[types.NamespacedName]int{}
	for range 2 {
		got[<-ch]++
	}
	if got[a] != 1 || got[b] != 1 {
		t.Fatalf("want a and b once each, got %v", got)
	}
	// Nobody reads now: more triggers still return. The subscriber holds at most one key in hand and
	// one pending, so three windows' worth of a arrive as at most two.
	for range 3 {
		n.trigger(a)
		time.Sleep(80 * time.Millisecond) // let each window fire, so a is pending several times over
	}
	if k := <-ch; k != a {
		t.Fatalf("want a, got %v", k)
	}
	extra := 0
	for done := false; !done; {
		select {
		case <-ch:
			extra++
		case <-time.After(300 * time.Millisecond):
			done = true
		}
	}
	if extra > 1 {
		t.Fatalf("a was delivered %d more times, want at most 1", extra)
	}
}

func TestNotifierCancelAndClose(t *testing.T) {
	n := newNotifier(time.Millisecond)
	ch1, cancel1 := n.subscribe()
	ch2, cancel2 := n.subscribe()
	cancel1()
	cancel1()
	if _, ok := <-ch1; ok {
		t.Fatal("a cancelled subscription's channel closes")
	}
	n.close()
	cancel2() // after close: harmless
	if _, ok := <-ch2; ok {
		t.Fatal("close closes every subscription")
	}
	ch3, _ := n.subscribe()
	if _, ok := <-ch3; ok {
		t.Fatal("subscribing to a closed notifier gives a closed channel")
	}
}

func TestRestConfigErrorsNeverQuoteTheKubeconfig(t *testing.T) {
	secretish := "token: super-secret-token-value"
	for _, data := range []string{
		"{{{ " + secretish,
		"apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    " + secretish + "\n",
		"",
	} {
		_, err := restConfigFrom([]byte(data))
		if err == nil {
			t.Fatalf("want an error for %q", data)
		}
		if strings.Contains(err.Error(), "super-secret") {
			t.Fatalf("error quotes the kubeconfig: %v", err)
		}
	}
}

func TestBackoffDoublesToMax(t *testing.T) {
	c := &Cache{opts: Options{BackoffBase: time.Second, BackoffMax: 10 * time.Second}}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := c.backoff(i + 1); got != w {
			t.Fatalf("failure %d: want %s, got %s", i+1, w, got)
		}
	}
}
