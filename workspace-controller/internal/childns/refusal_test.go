package childns

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// workloadEvent is an event as a workload controller of the child reports it about kind/name.
func workloadEvent(ns, name, reason, kind, workload, note string, at time.Time) *eventsv1.Event {
	typ := corev1.EventTypeWarning
	if reason == "SuccessfulCreate" {
		typ = corev1.EventTypeNormal
	}
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		EventTime:  metav1.NewMicroTime(at), ReportingController: strings.ToLower(kind) + "-controller",
		ReportingInstance: "kube-controller-manager", Action: "Create", Reason: reason, Type: typ, Note: note,
		Regarding: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: workload, APIVersion: "apps/v1"},
	}
}

// unschedulablePod creates a pod in ns that the scheduler reports Unschedulable since at.
func unschedulablePod(t *testing.T, ns, name string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "registry.example/x:1"}}}}
	onChild(t, pod)
	pod.Status.Phase = corev1.PodPending
	pod.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message:            "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
		LastTransitionTime: metav1.NewTime(at),
	}}
	if err := childAPI.Client.Status().Update(ctx, pod); err != nil {
		t.Fatalf("pod %s/%s status: %v", ns, name, err)
	}
}

// TestPodRefusal: the child's reading of why the release's pods are not running: a workload
// controller's FailedCreate (here the API server's own refusal of a missing RuntimeClass) that no
// SuccessfulCreate followed, and a pod Unschedulable for longer than the bound; the GPU quota's
// refusal keeps its own reason.
func TestPodRefusal(t *testing.T) {
	ctx := context.Background()
	n := Namespaces{Child: childAPI.Client, Cluster: cluster}
	now := time.Now()

	// What the ReplicaSet controller is told when the chart asks a RuntimeClass the child lacks.
	ns := owned.LocalReleaseNamespace(unique("rc"))
	onChild(t, namespaceLabelled(ns, nil))
	nvidia := "nvidia"
	err := childAPI.Client.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nb-abc-x"}, Spec: corev1.PodSpec{
		RuntimeClassName: &nvidia, Containers: []corev1.Container{{Name: "c", Image: "registry.example/x:1"}}}})
	if err == nil || !strings.Contains(err.Error(), `RuntimeClass "nvidia" not found`) {
		t.Fatalf("a pod asking the RuntimeClass nvidia on a child without it: %v, want it refused", err)
	}
	refused := "Error creating: " + err.Error()[strings.Index(err.Error(), "pods "):]
	if got := n.PodRefusal(ctx, ns, now, time.Minute); got.Found() {
		t.Fatalf("nothing refused yet: %+v", got)
	}
	onChild(t,
		workloadEvent(ns, "created-old", "SuccessfulCreate", "ReplicaSet", "nb-abc", "Created pod: nb-abc-0", now.Add(-time.Hour)),
		workloadEvent(ns, "refused", "FailedCreate", "ReplicaSet", "nb-abc", refused, now.Add(-time.Minute)),
		// Not a workload controller's: the scheduler's own events are read from the pods.
		workloadEvent(ns, "scheduling", "FailedScheduling", "Pod", "nb-abc-0", "0/1 nodes are available", now),
	)
	got := n.PodRefusal(ctx, ns, now, time.Minute)
	want := "the child refused pods of the release: ReplicaSet nb-abc: " + refused
	if got.Reason != workspacesv1.ReasonPodsRefused || got.Message != want {
		t.Fatalf("PodRefusal = %s %q, want %s %q", got.Reason, got.Message, workspacesv1.ReasonPodsRefused, want)
	}

	// A StatefulSet's refusal by an admission webhook, later than the ReplicaSet's, wins; its long
	// message is cut.
	long := `Error creating: admission webhook "policy.example" denied the request: ` + strings.Repeat("x", MaxChildMessageBytes+200)
	onChild(t, workloadEvent(ns, "denied", "FailedCreate", "StatefulSet", "nb-db", long, now.Add(-time.Second)))
	got = n.PodRefusal(ctx, ns, now, time.Minute)
	if got.Reason != workspacesv1.ReasonPodsRefused || !strings.Contains(got.Message, "StatefulSet nb-db: Error creating: admission webhook") ||
		len(got.Message) > MaxChildMessageBytes+100 {
		t.Fatalf("PodRefusal = %s %q (%d bytes), want the StatefulSet's denial, cut", got.Reason, got.Message, len(got.Message))
	}

	// Once the workloads created their pods, what refused them is gone.
	onChild(t,
		workloadEvent(ns, "created", "SuccessfulCreate", "ReplicaSet", "nb-abc", "Created pod: nb-abc-1", now),
		workloadEvent(ns, "created-db", "SuccessfulCreate", "StatefulSet", "nb-db", "create Pod nb-db-0", now),
	)
	if got := n.PodRefusal(ctx, ns, now, time.Minute); got.Found() {
		t.Fatalf("the workloads created their pods since: %+v", got)
	}

	// A pod Unschedulable for less than the bound is not reported yet; the reading says when to look
	// again.
	unschedulablePod(t, ns, "nb-abc-1", now.Add(-20*time.Second))
	got = n.PodRefusal(ctx, ns, now, time.Minute)
	if got.Found() || got.RecheckAfter <= 0 || got.RecheckAfter > 41*time.Second {
		t.Fatalf("a pod Unschedulable for 20s with a bound of 1m: %+v, want nothing yet and a recheck within 41s", got)
	}
	// Past the bound it is named, with the scheduler's message.
	got = n.PodRefusal(ctx, ns, now.Add(time.Minute), time.Minute)
	if got.Reason != workspacesv1.ReasonPodsRefused || !strings.HasPrefix(got.Message, "the child cannot schedule pod nb-abc-1 of the release (Unschedulable since "+now.Add(-20*time.Second).UTC().Format(time.RFC3339)+"): 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.") {
		t.Fatalf("PodRefusal = %s %q, want pod nb-abc-1 named", got.Reason, got.Message)
	}
	// The pod waiting longest is the one named.
	unschedulablePod(t, ns, "nb-abc-2", now.Add(-5*time.Minute))
	if got := n.PodRefusal(ctx, ns, now, time.Minute); !strings.Contains(got.Message, "pod nb-abc-2 ") {
		t.Fatalf("PodRefusal = %q, want the pod waiting longest", got.Message)
	}

	// The GPU quota's refusal comes first, with its own reason.
	onChild(t, workloadEvent(ns, "quota", "FailedCreate", "ReplicaSet", "nb-abc",
		`Error creating: pods "nb-abc-3" is forbidden: exceeded quota: workspace-gpus, requested: requests.nvidia.com/gpu=2`, now))
	if got := n.PodRefusal(ctx, ns, now, time.Minute); got.Reason != workspacesv1.ReasonGpuQuotaExceeded {
		t.Fatalf("PodRefusal = %s %q, want the quota refusal", got.Reason, got.Message)
	}
}

// TestPodRefusalFromCache: with what the child-cluster cache holds given, the pods named are the
// cache's, not the child's; the workload events are the cache's when it holds them, else read on the
// child; and a workload's refusal comes before an Unschedulable pod.
func TestPodRefusalFromCache(t *testing.T) {
	ctx := context.Background()
	n := Namespaces{Child: childAPI.Client, Cluster: cluster}
	now := time.Now()
	ns := owned.LocalReleaseNamespace(unique("cached"))
	onChild(t, namespaceLabelled(ns, nil))
	// On the child a pod Unschedulable for five minutes; the cache has not seen it yet.
	unschedulablePod(t, ns, "on-child", now.Add(-5*time.Minute))
	if got := n.PodRefusalFrom(ctx, ns, Cached{EventsKnown: true}, now, time.Minute); got.Found() {
		t.Fatalf("nothing cached: %+v, want nothing (the child's own pods are not listed)", got)
	}
	pods := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cached-0"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Minute)), Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}}}}
	got := n.PodRefusalFrom(ctx, ns, Cached{Pods: pods, EventsKnown: true}, now, time.Minute)
	if got.Reason != workspacesv1.ReasonPodsRefused || !strings.Contains(got.Message, "pod cached-0 ") {
		t.Fatalf("PodRefusalFrom = %s %q, want the cached pod named", got.Reason, got.Message)
	}
	if got := n.PodRefusalFrom(ctx, ns, Cached{Pods: pods, EventsKnown: true}, now, 5*time.Minute); got.Found() || got.RecheckAfter <= 0 {
		t.Fatalf("within the bound: %+v, want nothing yet and a recheck", got)
	}

	// A refusal on the child: not seen while the cache says it holds the events (and holds none)...
	onChild(t, workloadEvent(ns, "refused", "FailedCreate", "ReplicaSet", "nb-abc", "Error creating: pods \"nb-abc-x\" is forbidden", now))
	if got := n.PodRefusalFrom(ctx, ns, Cached{EventsKnown: true}, now, time.Minute); got.Found() {
		t.Fatalf("the cache holds the events and none: %+v, want nothing (the child's are not listed)", got)
	}
	// ...read on the child when it does not hold them...
	got = n.PodRefusalFrom(ctx, ns, Cached{Pods: pods}, now, time.Minute)
	if got.Reason != workspacesv1.ReasonPodsRefused || !strings.Contains(got.Message, "ReplicaSet nb-abc: ") {
		t.Fatalf("PodRefusalFrom = %s %q, want the workload's refusal read on the child, before the pod", got.Reason, got.Message)
	}
	// ...and the cache's when it holds them.
	cachedEvents := []eventsv1.Event{*workloadEvent(ns, "denied", "FailedCreate", "StatefulSet", "nb-db", "Error creating: denied", now)}
	got = n.PodRefusalFrom(ctx, ns, Cached{Pods: pods, Events: cachedEvents, EventsKnown: true}, now, time.Minute)
	if got.Reason != workspacesv1.ReasonPodsRefused || !strings.Contains(got.Message, "StatefulSet nb-db: Error creating: denied") {
		t.Fatalf("PodRefusalFrom = %s %q, want the cached workload's refusal", got.Reason, got.Message)
	}
}
