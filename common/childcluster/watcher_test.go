package childcluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestStoreNotifiesChangesThatMatter: the watcher's store keeps trimmed objects, counts every event
// and listing as an answer, and reports a change for an addition, a deletion and an update that
// differs in what is counted; not for the first listing, a heartbeat-only update, or a relisting
// that brings the same objects.
func TestStoreNotifiesChangesThatMatter(t *testing.T) {
	events, changes, changed := 0, 0, "-"
	s := &store{trim: must(trimNode), differ: func(a, b any) bool { return nodeChanged(a.(*corev1.Node), b.(*corev1.Node)) },
		onEvent: func() { events++ }, onChange: func(key string) { changes++; changed = key }, items: map[string]any{}}
	node := func(name, rv string, ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Annotations: map[string]string{"a": "b"}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: metav1.Now()}}}}
	}
	// A change names the object that changed; a relisting that changed any names none ("").
	step := func(what string, err error, wantEvents, wantChanges int, wantKey ...string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if events != wantEvents || changes != wantChanges {
			t.Fatalf("%s: %d events, %d changes; want %d, %d", what, events, changes, wantEvents, wantChanges)
		}
		if len(wantKey) > 0 && changed != wantKey[0] {
			t.Fatalf("%s: the change named %q, want %q", what, changed, wantKey[0])
		}
	}
	if s.synced.Load() {
		t.Fatal("synced before the first listing")
	}
	step("first listing", s.Replace([]any{node("a", "1", "True"), node("b", "1", "True")}, "1"), 1, 0)
	if !s.synced.Load() || len(s.List()) != 2 {
		t.Fatalf("after the first listing: synced %v, %d objects", s.synced.Load(), len(s.List()))
	}
	if n := s.List()[0].(*corev1.Node); n.Annotations != nil {
		t.Fatalf("kept an untrimmed node: %+v", n)
	}
	step("heartbeat", s.Update(node("a", "2", "True")), 2, 0)
	step("not ready", s.Update(node("a", "3", "False")), 3, 1, "a")
	step("added", s.Add(node("c", "4", "True")), 4, 2, "c")
	step("deleted", s.Delete(node("c", "5", "True")), 5, 3, "c")
	step("deleted again", s.Delete(node("c", "5", "True")), 6, 3)
	step("same relisting", s.Replace([]any{node("a", "6", "False"), node("b", "6", "True")}, "6"), 7, 3)
	step("relisting without b", s.Replace([]any{node("a", "7", "False")}, "7"), 8, 4, "")
	step("relisting with d instead of a", s.Replace([]any{node("d", "8", "False")}, "8"), 9, 5)
	step("relisting changing d", s.Replace([]any{node("d", "9", "True")}, "9"), 10, 6)
	if l := s.List(); len(l) != 1 || l[0].(*corev1.Node).Name != "d" {
		t.Fatalf("kept %v", l)
	}
}

// TestWatcherStopsAtOnceWhileBackingOff: a watcher whose child keeps failing backs off between
// attempts, and stops as soon as its context ends, not after the backoff (up to 30s): a manager's
// shutdown waits for it.
func TestWatcherStopsAtOnceWhileBackingOff(t *testing.T) {
	var calls atomic.Int32
	fail := func() error { calls.Add(1); return apierrors.NewTooManyRequests("busy", 0) }
	lw := &toolscache.ListWatch{
		ListWithContextFunc:  func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, fail() },
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, fail() },
	}
	w := newWatcher("backoff", lw, &corev1.Node{}, must(trimNode), func(any, any) bool { return true }, func() {}, func(string) {})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { w.run(ctx); close(done) }()
	// After three failed attempts the next backoff is at least 3.2s.
	deadline := time.Now().Add(wait)
	for calls.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if calls.Load() < 3 {
		t.Fatalf("%d attempts, want 3", calls.Load())
	}
	cancelled := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatalf("the watcher still runs %s after its context ended", wait)
	}
	if d := time.Since(cancelled); d > 2*time.Second {
		t.Fatalf("the watcher stopped %s after its context ended: it waited for its backoff", d)
	}
}
