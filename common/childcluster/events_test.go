package childcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
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

// TestWorkloadEventsForbidden: credentials that may read the child's Nodes and Pods but not its Events
// connect as before and leave the child reachable; the cache says it does not hold the Events, so
// that a reading falls back to the child.
func TestWorkloadEventsForbidden(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "noevents")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "nodes-and-pods"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nodes-and-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "no-events"}}}
	for _, o := range []client.Object{role, binding} {
		if err := child.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	user, err := child.Env.AddUser(envtest.User{Name: "no-events"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "noevents", Name: "alpha"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, kc); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Options{WatchWorkloadEvents: true})
	cl, err := c.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		t.Fatalf("Get with credentials that may not list Events: %v, want connected", err)
	}
	// The events watches' first list was refused (or is under way): either way they never sync.
	deadline := time.Now().Add(2 * c.opts.HealthInterval)
	for time.Now().Before(deadline) {
		if evs, ok := cl.WorkloadEvents("default"); ok {
			t.Fatalf("WorkloadEvents = %+v, known, with credentials that may not list them", evs)
		}
		if err := cl.Err(); err != nil {
			t.Fatalf("the child is unreachable for its Events: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
