package childcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// childEvent is an events.k8s.io Event about a workload, as a workload controller writes it.
func childEvent(ns, name, reason, kind, workload, note string, at time.Time) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		EventTime:  metav1.NewMicroTime(at), Reason: reason, Type: corev1.EventTypeWarning, Action: "Create", Note: note,
		ReportingController: "replicaset-controller", ReportingInstance: "replicaset-controller-1",
		Regarding: corev1.ObjectReference{Kind: kind, Name: workload, Namespace: ns, APIVersion: "apps/v1"},
	}
}

// TestWatchesWorkloadEvents: with WatchWorkloadEvents, the cache keeps the child's FailedCreate and
// SuccessfulCreate Events (trimmed, the note cut) and no others, and tells a new one as a change of
// its namespace's Pods; without it, it keeps none and says so.
func TestWatchesWorkloadEvents(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "events")
	key := types.NamespacedName{Namespace: "events", Name: "alpha"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"ws-a", "ws-b"} {
		if err := child.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().Truncate(time.Microsecond)
	create := func(objs ...client.Object) {
		t.Helper()
		for _, o := range objs {
			if err := child.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Before the connect: listed, not told.
	create(childEvent("ws-a", "created", "SuccessfulCreate", "ReplicaSet", "nb", "Created pod: nb-0", now.Add(-time.Hour)))

	c := newCache(t, Options{WatchWorkloadEvents: true})
	changes, cancel := c.subscribe()
	defer cancel()
	cl, err := c.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	expectChange(t, changes, key, "anything changed (the connect)", func(c Change) bool { return c.All })
	eventually(t, "the SuccessfulCreate listed", func() (bool, string) {
		evs, ok := cl.WorkloadEvents("ws-a")
		return ok && len(evs) == 1 && evs[0].Reason == "SuccessfulCreate", fmt.Sprintf("%v %+v", ok, evs)
	})

	long := "Error creating: pods \"nb-1\" is forbidden: " + strings.Repeat("x", 900)
	create(
		childEvent("ws-a", "refused", "FailedCreate", "ReplicaSet", "nb", long, now),
		// Not a workload controller's reason: never watched.
		childEvent("ws-a", "scheduling", "FailedScheduling", "Pod", "nb-0", "0/1 nodes are available", now),
	)
	expectChange(t, changes, key, "the Pods of ws-a changed (its workload Events), and no other's", func(c Change) bool {
		return !c.All && !c.Nodes && c.PodsOf("ws-a") && !c.PodsOf("ws-b")
	})
	eventually(t, "the FailedCreate kept, cut, and nothing else of ws-a", func() (bool, string) {
		evs, ok := cl.WorkloadEvents("ws-a")
		var failed *eventsv1.Event
		for i := range evs {
			if evs[i].Reason == "FailedCreate" {
				failed = &evs[i]
			}
		}
		return ok && len(evs) == 2 && failed != nil && failed.Regarding.Kind == "ReplicaSet" && failed.Regarding.Name == "nb" &&
			len(failed.Note) <= MaxConditionMessageBytes && strings.HasPrefix(failed.Note, "Error creating: pods \"nb-1\" is forbidden") &&
			failed.EventTime.Time.Equal(now), fmt.Sprintf("%v %+v", ok, evs)
	})
	if evs, ok := cl.WorkloadEvents("ws-b"); !ok || len(evs) != 0 {
		t.Fatalf("ws-b: %v %+v, want none, and known", ok, evs)
	}

	// A cache that does not watch them says it does not know.
	key2 := types.NamespacedName{Namespace: "events", Name: "beta"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key2.Namespace, key2.Name, child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	plain := newCache(t, Options{})
	cl2, err := plain.Get(ctx, key2.Namespace, key2.Name)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if evs, ok := cl2.WorkloadEvents("ws-a"); ok || evs != nil {
		t.Fatalf("without WatchWorkloadEvents: %v %+v, want not known", ok, evs)
	}
}
