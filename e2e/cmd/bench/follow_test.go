package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

func configMap(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
}

// A watch the API server ends (closed, or an Error event) is followed by a new list and a watch from
// its resourceVersion: what changed in between is seen, and so is what comes on the new watch; a list
// that fails is tried again.
func TestFollowListsAndWatchesAgainWhenTheWatchEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	lists := 0
	listed := [][]runtime.Object{
		{configMap("a", "1")},
		nil, // the second list fails
		{configMap("a", "1"), configMap("b", "3")}, // b was created while no watch ran
		{configMap("a", "1"), configMap("b", "3"), configMap("c", "5")},
	}
	watches := make(chan *watch.FakeWatcher, 4)
	var watchedFrom []string
	list := func(context.Context) ([]runtime.Object, string, error) {
		mu.Lock()
		defer mu.Unlock()
		i := lists
		lists++
		if i >= len(listed) {
			i = len(listed) - 1
		}
		if listed[i] == nil {
			return nil, "", errors.New("the server is busy")
		}
		return listed[i], listed[i][len(listed[i])-1].(*corev1.ConfigMap).ResourceVersion, nil
	}
	watchFrom := func(_ context.Context, rv string) (watch.Interface, error) {
		mu.Lock()
		watchedFrom = append(watchedFrom, rv)
		mu.Unlock()
		w := watch.NewFake()
		watches <- w
		return w, nil
	}
	var seenMu sync.Mutex
	var seen []string
	handle := func(ev watch.Event) {
		seenMu.Lock()
		defer seenMu.Unlock()
		seen = append(seen, string(ev.Type)+" "+ev.Object.(*corev1.ConfigMap).Name)
	}
	if err := follow(ctx, list, watchFrom, handle); err != nil {
		t.Fatal(err)
	}
	next := func() *watch.FakeWatcher {
		select {
		case w := <-watches:
			return w
		case <-time.After(30 * time.Second):
			t.Fatal("no new watch")
			return nil
		}
	}
	w1 := next()
	w1.Modify(configMap("a", "2"))
	w1.Stop() // the API server closed it
	w2 := next()
	w2.Add(configMap("d", "4"))
	w2.Error(&metav1.Status{Reason: metav1.StatusReasonExpired})
	next()

	want := []string{"ADDED a", "MODIFIED a", "ADDED a", "ADDED b", "ADDED d", "ADDED a", "ADDED b", "ADDED c"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		seenMu.Lock()
		got := append([]string(nil), seen...)
		seenMu.Unlock()
		if len(got) >= len(want) {
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("seen %q, want %q", got, want)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seen %q, want %q", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"1", "3", "5"}; len(watchedFrom) != 3 || watchedFrom[0] != want[0] || watchedFrom[1] != want[1] || watchedFrom[2] != want[2] {
		t.Fatalf("watched from %q, want %q (each watch from its list's resourceVersion)", watchedFrom, want)
	}
	if lists != 4 {
		t.Fatalf("%d lists, want 4 (the failed one tried again)", lists)
	}
}
