package childcluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/kubeconfig"
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

// TestTrimPodKeepsOnlyWhatTheArithmeticNeeds: the cache keeps a small pod (name, namespace, node,
// phase, effective requests), and the Pod rebuilt from it gives common/gpu the same request of every
// resource as the original, for app containers, sidecars, init containers, limits-only extended
// resources, pod-level resources and pod overhead.
func TestTrimPodKeepsOnlyWhatTheArithmeticNeeds(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	pods := []*corev1.Pod{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"x": "y"}},
			Spec: corev1.PodSpec{
				NodeName: "n", NodeSelector: map[string]string{"k": "v"},
				Containers: []corev1.Container{
					{Name: "c", Image: "i", Env: []corev1.EnvVar{{Name: "SECRET", Value: "s"}},
						Resources: corev1.ResourceRequirements{Requests: rl("nvidia.com/gpu", "1", "cpu", "250m", "memory", "1Gi")}},
					{Name: "d", Resources: corev1.ResourceRequirements{Limits: rl("nvidia.com/gpu", "2")}},
				},
				InitContainers: []corev1.Container{
					{Name: "side", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "100m", "nvidia.com/gpu", "1")}},
					{Name: "init", Resources: corev1.ResourceRequirements{Requests: rl("nvidia.com/gpu", "8", "cpu", "2")}},
				},
			},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "pod-level", Namespace: "ns"},
			Spec: corev1.PodSpec{
				Resources:  &corev1.ResourceRequirements{Requests: rl("cpu", "3", "memory", "4Gi")},
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1", "amd.com/gpu", "4")}}},
			},
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		},
		{ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}},
		{
			// The RuntimeClass's overhead counts, also for a resource only the overhead names.
			ObjectMeta: metav1.ObjectMeta{Name: "overhead", Namespace: "ns"},
			Spec: corev1.PodSpec{
				Overhead:   rl("cpu", "250m", "memory", "64Mi"),
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1", "nvidia.com/gpu", "1")}}},
			},
		},
	}
	for _, in := range pods {
		out, err := trimPod(in)
		if err != nil {
			t.Fatal(err)
		}
		kept, ok := out.(*pod)
		if !ok {
			t.Fatalf("%s: kept a %T, want the small pod", in.Name, out)
		}
		if kept.Labels != nil || kept.Annotations != nil || kept.UID != "" || kept.ResourceVersion != "" {
			t.Fatalf("%s: kept metadata it should drop: %+v", in.Name, kept.ObjectMeta)
		}
		got := kept.asPod()
		if got.Name != in.Name || got.Namespace != in.Namespace || got.Spec.NodeName != in.Spec.NodeName || got.Status.Phase != in.Status.Phase {
			t.Fatalf("%s: lost identity, node or phase: %+v", in.Name, got)
		}
		for _, res := range []corev1.ResourceName{"nvidia.com/gpu", "amd.com/gpu", "cpu", "memory", "ephemeral-storage"} {
			// PodRequest counts GPUs (extended resources, whole numbers, never pod-level); for cpu and
			// memory the arithmetic uses PodRequestMilli, where pod-level resources win.
			if a, b := gpu.PodRequest(in, res), gpu.PodRequest(&got, res); a != b && strings.Contains(string(res), "/") {
				t.Errorf("%s: PodRequest(%s) = %d from the cache, %d from the Pod", in.Name, res, b, a)
			}
			if a, b := gpu.PodRequestMilli(in, res), gpu.PodRequestMilli(&got, res); a != b {
				t.Errorf("%s: PodRequestMilli(%s) = %d from the cache, %d from the Pod", in.Name, res, b, a)
			}
		}
		if cp := kept.DeepCopyObject().(*pod); !equality.Semantic.DeepEqual(cp, kept) {
			t.Fatalf("%s: DeepCopyObject differs: %+v vs %+v", in.Name, cp, kept)
		}
	}
	if tomb, _ := trimPod("not a pod"); tomb != "not a pod" {
		t.Fatal("non-pods must pass through")
	}
}

// BenchmarkCachedPodSize reports the bytes the cache keeps per pod (allocated by the transform), next
// to a decoded Pod; figures only.
func BenchmarkCachedPodSize(b *testing.B) {
	always := corev1.ContainerRestartPolicyAlways
	in := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "notebook-0", Namespace: "ws-notebook", Labels: map[string]string{"app": "x", "pod-template-hash": "abc"}},
		Spec: corev1.PodSpec{NodeName: "gpu-node-1",
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), "cpu": resource.MustParse("8"), "memory": resource.MustParse("16Gi")},
				Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}},
			InitContainers: []corev1.Container{{Name: "side", RestartPolicy: &always}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := trimPod(in); err != nil {
			b.Fatal(err)
		}
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
	mkPod := func(rv, node string) *pod {
		out, _ := trimPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv, Labels: map[string]string{"rv": rv}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodPending}})
		return out.(*pod)
	}
	if podChanged(mkPod("1", ""), mkPod("2", "")) {
		t.Fatal("resourceVersion and labels alone are not a change")
	}
	if !podChanged(mkPod("1", ""), mkPod("2", "n")) {
		t.Fatal("binding is a change")
	}
	readyPod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	out, _ := trimPod(readyPod)
	ready := out.(*pod)
	if !ready.Ready || !podChanged(mkPod("2", "n"), ready) {
		t.Fatal("turning Ready is a change (a deploying workspace waits for it)")
	}
}

func TestNotifierCoalescesAndNeverBlocks(t *testing.T) {
	n := newNotifier(50*time.Millisecond, false)
	defer n.close()
	// No subscriber: triggers are dropped, nothing blocks.
	for range 1000 {
		n.trigger(types.NamespacedName{Namespace: "ns", Name: "a"}, deltaAll)
	}
	ch, cancel := n.subscribe()
	defer cancel()
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	for range 1000 {
		n.trigger(a, deltaAll)
		n.trigger(b, deltaAll)
	}
	got := map[types.NamespacedName]int{}
	for range 2 {
		got[(<-ch).Cluster]++
	}
	if got[a] != 1 || got[b] != 1 {
		t.Fatalf("want a and b once each, got %v", got)
	}
	// Nobody reads now: more triggers still return. The subscriber holds at most one key in hand and
	// one pending, so three windows' worth of a arrive as at most two.
	for range 3 {
		n.trigger(a, deltaAll)
		time.Sleep(80 * time.Millisecond) // let each window fire, so a is pending several times over
	}
	if k := <-ch; k.Cluster != a {
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
	n := newNotifier(time.Millisecond, false)
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
		_, err := restConfigFrom([]byte(data), kubeconfig.Policy{})
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

// TestNotifierAtOnce: with leading set, a change after a quiet window is told at once (here the
// window is an hour, so a notifier that waited for it would never tell), the changes that follow
// within the window wait for its end and are told once, and without leading nothing is told before
// the window ends.
func TestNotifierAtOnce(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	n := newNotifier(time.Hour, true)
	defer n.close()
	ch, cancel := n.subscribe()
	defer cancel()
	n.trigger(a, deltaAll)
	select {
	case k := <-ch:
		if k.Cluster != a {
			t.Fatalf("want a, got %v", k)
		}
	case <-time.After(wait):
		t.Fatal("the first change after a quiet window was not told at once")
	}
	for range 100 {
		n.trigger(a, deltaAll)
	}
	select {
	case k := <-ch:
		t.Fatalf("a change within the window was told before its end: %v", k)
	default:
	}
	n.mu.Lock()
	pending := len(n.timers)
	n.mu.Unlock()
	if pending != 1 {
		t.Fatalf("the changes within the window must wait for its end in one timer, got %d timers", pending)
	}

	// A short window: the folded changes are told once at its end, and a change after a further
	// quiet window is told at once again.
	short := newNotifier(100*time.Millisecond, true)
	defer short.close()
	sch, scancel := short.subscribe()
	defer scancel()
	short.trigger(a, deltaAll)
	<-sch
	start := time.Now()
	for range 100 {
		short.trigger(a, deltaAll)
	}
	<-sch
	if d := time.Since(start); d > wait {
		t.Fatalf("the folded changes took %s", d)
	}
	select {
	case k := <-sch:
		t.Fatalf("the folded changes were told more than once: %v", k)
	case <-time.After(300 * time.Millisecond):
	}
	short.trigger(a, deltaAll)
	select {
	case <-sch:
	case <-time.After(wait):
		t.Fatal("a change after a further quiet window was not told at once")
	}

	// Without leading, even the first change waits for the window.
	trailing := newNotifier(time.Hour, false)
	defer trailing.close()
	tch, tcancel := trailing.subscribe()
	defer tcancel()
	trailing.trigger(a, deltaAll)
	select {
	case k := <-tch:
		t.Fatalf("without leading a change was told before the window ended: %v", k)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestNotifierFoldsWhatChanged: the changes of one window are told once, saying everything they
// changed (the Nodes, the Pods of each namespace); a slow subscriber's pending change folds what
// arrives meanwhile; past maxChangedNamespaces, or after a change of anything, a change says All.
func TestNotifierFoldsWhatChanged(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	n := newNotifier(50*time.Millisecond, false)
	defer n.close()
	ch, cancel := n.subscribe()
	defer cancel()
	n.trigger(a, podsIn("ws-x"))
	n.trigger(a, podsIn("ws-y"))
	n.trigger(a, podsIn("ws-x"))
	got := <-ch
	if got.All || got.Nodes || !slices.Equal(got.Namespaces, []string{"ws-x", "ws-y"}) || !got.PodsOf("ws-y") || got.PodsOf("ws-z") {
		t.Fatalf("want the Pods of ws-x and ws-y, got %+v", got)
	}
	n.trigger(a, deltaNodes)
	if got := <-ch; !got.Nodes || got.All || len(got.Namespaces) != 0 || got.PodsOf("ws-x") {
		t.Fatalf("want the Nodes alone, got %+v", got)
	}
	n.trigger(a, podsIn("ws-x"))
	n.trigger(a, deltaAll)
	if got := <-ch; !got.All || !got.Nodes || len(got.Namespaces) != 0 || !got.PodsOf("anything") {
		t.Fatalf("want All, got %+v", got)
	}
	for i := range maxChangedNamespaces + 1 {
		n.trigger(a, podsIn(fmt.Sprintf("ws-%d", i)))
	}
	if got := <-ch; !got.All || len(got.Namespaces) != 0 {
		t.Fatalf("past %d namespaces a change says All, got %d namespaces, All %v", maxChangedNamespaces, len(got.Namespaces), got.All)
	}

	// A subscriber that does not read: the windows' changes wait as one pending change, folded.
	slow := newNotifier(time.Millisecond, false)
	defer slow.close()
	sch, scancel := slow.subscribe()
	defer scancel()
	told := func(what string) { // every timer fired: each change was handed to the subscriber
		eventually(t, what, func() (bool, string) {
			slow.mu.Lock()
			defer slow.mu.Unlock()
			return len(slow.timers) == 0, fmt.Sprint(len(slow.timers), " timers")
		})
	}
	slow.trigger(a, podsIn("first"))
	told("the first change told")
	eventually(t, "the first change in the subscriber's hand, waiting to be sent", func() (bool, string) {
		s := onlySubscriber(slow)
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.order) == 0, fmt.Sprint(len(s.order), " pending")
	})
	for _, ns := range []string{"ws-b", "ws-a"} {
		slow.trigger(a, podsIn(ns))
		told("the change of " + ns + " told") // in a window of its own, so it pends beside the others
	}
	slow.trigger(a, deltaNodes)
	told("the Nodes change told")
	if got := <-sch; !slices.Equal(got.Namespaces, []string{"first"}) {
		t.Fatalf("want the change in hand first, got %+v", got)
	}
	eventually(t, "the later changes folded into one", func() (bool, string) {
		select {
		case got := <-sch:
			if !got.Nodes || got.All || !slices.Equal(got.Namespaces, []string{"ws-a", "ws-b"}) {
				t.Fatalf("want the Nodes and the Pods of ws-a and ws-b in one change, got %+v", got)
			}
			return true, ""
		default:
			return false, "nothing yet"
		}
	})
	select {
	case got := <-sch:
		t.Fatalf("the folded changes were told again: %+v", got)
	case <-time.After(100 * time.Millisecond):
	}
}

func onlySubscriber(n *notifier) *subscriber {
	n.mu.Lock()
	defer n.mu.Unlock()
	for s := range n.subs {
		return s
	}
	return nil
}

func TestChangeOf(t *testing.T) {
	e := &ChangeEvent{Change: Change{Namespaces: []string{"ws-a"}}}
	e.Name = "cd"
	if c := ChangeOf(e); c.All || !c.PodsOf("ws-a") || c.PodsOf("ws-b") {
		t.Fatalf("a ChangeEvent's change is told as it is, got %+v", c)
	}
	cp := e.DeepCopyObject().(*ChangeEvent)
	cp.Change.Namespaces[0] = "changed"
	if e.Change.Namespaces[0] != "ws-a" || cp.Name != "cd" {
		t.Fatal("DeepCopyObject copies the namespaces and the metadata")
	}
	other := &metav1.PartialObjectMetadata{}
	if c := ChangeOf(other); !c.All || !c.Nodes {
		t.Fatalf("any other object says anything may have changed, got %+v", c)
	}
}

// The cache keeps an Unschedulable pod's condition (since when, the message cut to its bound), gives
// it back in asPod, and tells a pod turning Unschedulable, or scheduled again, as a change; a new
// message alone, which the scheduler writes on every attempt, is not one.
func TestTrimmedPodKeepsUnschedulable(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC))
	mk := func(msg string, at metav1.Time, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ws-a"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				LastTransitionTime: at, Message: msg}}}}
		if deleting {
			p.DeletionTimestamp = &at
		}
		return p
	}
	trim := func(p *corev1.Pod) *pod {
		out, err := trimPod(p)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*pod)
	}
	long := strings.Repeat("0/5 nodes are available: 5 Insufficient nvidia.com/gpu. ", 40)
	kept := trim(mk(long, since, false))
	if kept.Unschedulable == nil || !kept.Unschedulable.Since.Equal(&since) || len(kept.Unschedulable.Message) > MaxConditionMessageBytes ||
		!strings.HasPrefix(long, strings.TrimSuffix(kept.Unschedulable.Message, "…")[:100]) {
		t.Fatalf("kept %+v", kept.Unschedulable)
	}
	got := kept.asPod()
	if len(got.Status.Conditions) != 1 {
		t.Fatalf("asPod conditions %+v", got.Status.Conditions)
	}
	c := got.Status.Conditions[0]
	if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable ||
		!c.LastTransitionTime.Equal(&since) || c.Message != kept.Unschedulable.Message {
		t.Fatalf("asPod condition %+v", c)
	}
	if cp := kept.DeepCopyObject().(*pod); cp.Unschedulable == kept.Unschedulable || !equality.Semantic.DeepEqual(cp, kept) {
		t.Fatal("DeepCopyObject must copy the condition, not share it")
	}
	if d := trim(mk("x", since, true)); d.Unschedulable != nil {
		t.Fatal("a pod being deleted is not kept as Unschedulable")
	}
	scheduled := trim(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ws-a"}, Status: corev1.PodStatus{Phase: corev1.PodPending}})
	if scheduled.Unschedulable != nil || len(scheduled.asPod().Status.Conditions) != 0 {
		t.Fatal("a pod without the condition has none")
	}
	if !podChanged(scheduled, kept) || !podChanged(kept, scheduled) {
		t.Fatal("turning Unschedulable, and scheduled again, is a change")
	}
	later := metav1.NewTime(since.Add(time.Minute))
	if !podChanged(kept, trim(mk(long, later, false))) {
		t.Fatal("Unschedulable since another time is a change")
	}
	if podChanged(kept, trim(mk("another attempt's message", since, false))) {
		t.Fatal("a new message alone is not a change")
	}
}

// TestNotifierFoldsOwnedChanges: the namespaces of changed owned objects are folded apart from those
// of changed Pods, and past maxChangedNamespaces of them a change says All.
func TestNotifierFoldsOwnedChanges(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	n := newNotifier(50*time.Millisecond, false)
	defer n.close()
	ch, cancel := n.subscribe()
	defer cancel()
	n.trigger(a, ownedIn("ws-y"))
	n.trigger(a, podsIn("ws-x"))
	n.trigger(a, ownedIn("ws-x"))
	got := <-ch
	if got.All || got.Nodes || !slices.Equal(got.Owned, []string{"ws-x", "ws-y"}) || !slices.Equal(got.Namespaces, []string{"ws-x"}) ||
		!got.OwnedIn("ws-y") || got.PodsOf("ws-y") || got.OwnedIn("ws-z") {
		t.Fatalf("want the Pods of ws-x and the owned objects of ws-x and ws-y, got %+v", got)
	}
	for i := range maxChangedNamespaces + 1 {
		n.trigger(a, ownedIn(fmt.Sprintf("ws-%d", i)))
	}
	if got := <-ch; !got.All || len(got.Owned) != 0 || !got.OwnedIn("anything") {
		t.Fatalf("past %d namespaces a change says All, got %d owned namespaces, All %v", maxChangedNamespaces, len(got.Owned), got.All)
	}
}

// TestOwnedStoreTellsWhatSomeoneDid: the store of owned objects tells no object that came (the
// controller made it), tells one that changed in what counts or went, and after a relisting names each
// object it found changed or gone, never "all".
func TestOwnedStoreTellsWhatSomeoneDid(t *testing.T) {
	var told []string
	w := newOwnedWatcher("test", "x=y", nil, nil, &corev1.ResourceQuota{}, func() {}, func(key string) { told = append(told, key) })
	s := w.store
	quota := func(ns, name, gpus, used string) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse(gpus)}},
			Status:     corev1.ResourceQuotaStatus{Used: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse(used)}},
		}
	}
	if err := s.Replace([]any{quota("ws-a", "gpu", "1", "0"), quota("ws-b", "gpu", "2", "0")}, "1"); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Add(quota("ws-c", "gpu", "1", "0")))
	must(s.Update(quota("ws-a", "gpu", "1", "1"))) // the quota controller counted a pod
	if len(told) != 0 {
		t.Fatalf("a listing, an object that came and a new status told %v, want nothing", told)
	}
	kept, ok := s.get("ws-a/gpu")
	q := &corev1.ResourceQuota{}
	if !ok || !copyInto(kept, q) || q.ManagedFields != nil || q.Status.Used != nil || q.Name != "gpu" || q.Namespace != "ws-a" {
		t.Fatalf("kept %+v, want the quota without its managed fields and status", kept)
	}
	if got := q.Spec.Hard["requests.nvidia.com/gpu"]; got.Value() != 1 {
		t.Fatalf("kept quota %v, want its spec", q.Spec.Hard)
	}
	must(s.Update(quota("ws-a", "gpu", "8", "1"))) // someone raised it
	must(s.Delete(quota("ws-c", "gpu", "1", "0")))
	if !slices.Equal(told, []string{"ws-a/gpu", "ws-c/gpu"}) {
		t.Fatalf("a raised and a deleted quota told %v, want both", told)
	}
	told = nil
	// Relisted after a watch gap: ws-a's put back, ws-b's gone, ws-d's new.
	must(s.Replace([]any{quota("ws-a", "gpu", "1", "0"), quota("ws-d", "gpu", "1", "0")}, "2"))
	slices.Sort(told)
	if !slices.Equal(told, []string{"ws-a/gpu", "ws-b/gpu"}) {
		t.Fatalf("a relisting told %v, want the changed and the gone quota by name", told)
	}
}
