package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// lister lists the followed objects and returns them with the list's resourceVersion; watcher watches
// them from a resourceVersion.
type (
	lister  func(ctx context.Context) ([]runtime.Object, string, error)
	watcher func(ctx context.Context, resourceVersion string) (watch.Interface, error)
)

// followRetry is how long follow waits before listing again after a failed list or watch.
const followRetry = time.Second

// follow hands every object of a kind to handle, and every later change of one, for as long as ctx
// lasts. It lists, hands each listed object as Added, and watches from the list's resourceVersion.
// A watch does not last: the API server ends it at its timeout, and closes a watcher that falls behind
// its events (which a bench that loads the machine makes likely). When the watch ends or reports an
// error, follow lists and watches again, so a bench never waits for an event of a watch that is gone.
// An object changed while no watch ran is seen at the next list; handle must accept an object more than
// once. The first list and watch happen before follow returns (their error is returned); the rest runs
// in a goroutine.
func follow(ctx context.Context, list lister, watchFrom watcher, handle func(watch.Event)) error {
	w, err := listAndWatch(ctx, list, watchFrom, handle)
	if err != nil {
		return err
	}
	go func() {
		defer func() { w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, open := <-w.ResultChan():
				if open && ev.Type != watch.Error {
					handle(ev)
					continue
				}
			}
			w.Stop()
			for {
				if w, err = listAndWatch(ctx, list, watchFrom, handle); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					w = watch.NewEmptyWatch()
					return
				case <-time.After(followRetry):
				}
			}
		}
	}()
	return nil
}

func listAndWatch(ctx context.Context, list lister, watchFrom watcher, handle func(watch.Event)) (watch.Interface, error) {
	objs, rv, err := list(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing: %w", err)
	}
	for _, o := range objs {
		handle(watch.Event{Type: watch.Added, Object: o})
	}
	w, err := watchFrom(ctx, rv)
	if err != nil {
		return nil, fmt.Errorf("watching from resourceVersion %q: %w", rv, err)
	}
	return w, nil
}

// followList follows the objects of newList's kind in namespace ns through cl.
func followList(ctx context.Context, cl client.WithWatch, newList func() client.ObjectList, ns string, handle func(watch.Event)) error {
	list := func(ctx context.Context) ([]runtime.Object, string, error) {
		l := newList()
		if err := cl.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, "", err
		}
		objs, err := meta.ExtractList(l)
		return objs, l.GetResourceVersion(), err
	}
	watchFrom := func(ctx context.Context, rv string) (watch.Interface, error) {
		return cl.Watch(ctx, newList(), client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	}
	return follow(ctx, list, watchFrom, handle)
}
