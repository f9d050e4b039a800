package childcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/exalsius/exalsius-operator/common/testing/childtest"
)

func subscribers(c *Cache) int {
	c.notifier.mu.Lock()
	defer c.notifier.mu.Unlock()
	return len(c.notifier.subs)
}

// TestSourceEnqueuesChangesAndStopsWithItsContext: the source subscribes when started, hands a
// child's change to the handler as the ClusterDeployment, and unsubscribes when its context ends, so
// a stopped manager leaves nothing behind even while the Cache keeps running.
func TestSourceEnqueuesChangesAndStopsWithItsContext(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "source")
	key := types.NamespacedName{Namespace: "source", Name: "alpha"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Options{})
	src := c.Source(handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if o.GetObjectKind().GroupVersionKind().Kind != ClusterDeploymentKind {
			t.Errorf("the event's object must be typed as a ClusterDeployment, got %v", o.GetObjectKind().GroupVersionKind())
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	}))
	if n := subscribers(c); n != 0 {
		t.Fatalf("a source must not subscribe before it is started: %d subscribers", n)
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	srcCtx, stop := context.WithCancel(ctx)
	defer stop()
	if err := src.Start(srcCtx, q); err != nil {
		t.Fatal(err)
	}
	if n := subscribers(c); n != 1 {
		t.Fatalf("a started source holds one subscription, got %d", n)
	}
	if _, err := c.Get(ctx, key.Namespace, key.Name); err != nil {
		t.Fatal(err)
	}
	if err := childtest.CreateNode(ctx, child.Client, gpuNode("gpu-1", 2)); err != nil {
		t.Fatal(err)
	}
	got := make(chan reconcile.Request, 1)
	go func() {
		r, shutdown := q.Get()
		if !shutdown {
			q.Done(r)
			got <- r
		}
	}()
	select {
	case r := <-got:
		if r.NamespacedName != key {
			t.Fatalf("want a request for %s, got %s", key, r.NamespacedName)
		}
	case <-time.After(wait):
		t.Fatalf("no request for %s after a node was added", key)
	}

	stop()
	eventually(t, "the subscription ends with the source's context", func() (bool, string) {
		n := subscribers(c)
		return n == 0, fmt.Sprint(n, " subscribers")
	})
}

// TestSourceEndsWhenTheCacheStops: a started source whose cache stops ends too (its subscription is
// closed), and a source started on a stopped cache returns at once.
func TestSourceEndsWhenTheCacheStops(t *testing.T) {
	c := newCache(t, Options{})
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Source(&handler.EnqueueRequestForObject{}).Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	if n := subscribers(c); n != 1 {
		t.Fatalf("want one subscription, got %d", n)
	}
	c.Stop()
	if n := subscribers(c); n != 0 {
		t.Fatalf("a stopped cache keeps no subscription, got %d", n)
	}
	if err := c.Source(&handler.EnqueueRequestForObject{}).Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	if n := subscribers(c); n != 0 {
		t.Fatalf("a source started on a stopped cache must not subscribe, got %d", n)
	}
}
