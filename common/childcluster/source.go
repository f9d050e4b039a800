package childcluster

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// ClusterDeploymentAPIVersion and ClusterDeploymentKind type the objects Source emits.
const (
	ClusterDeploymentAPIVersion = "k0rdent.mirantis.com/v1beta1"
	ClusterDeploymentKind       = "ClusterDeployment"
)

// Source returns the controller-runtime source through which controllers hear of child-cluster
// changes (a child's Nodes or Pods changed, or it became unreachable or reachable again), debounced
// per child. For every change it hands the handler a GenericEvent whose object is a *ChangeEvent
// naming the ClusterDeployment (kind, namespace and name only) and saying what changed (ChangeOf: the
// Nodes, the Pods of which namespaces, or anything); the handler maps it to the controller's requests,
// for example with handler.EnqueueRequestsFromMapFunc.
//
// The source subscribes when the controller starts it and unsubscribes when the controller's context
// ends (the manager stops) or the Cache stops, whichever comes first: nothing is left running or
// blocked after either. Changes before the start are not replayed.
func (c *Cache) Source(h handler.EventHandler) source.Source {
	return &changeSource{cache: c, handler: h}
}

// changeSource is the source.Source of Cache.Source.
type changeSource struct {
	cache   *Cache
	handler handler.EventHandler
}

func (s *changeSource) String() string { return "childcluster changes" }

// Start subscribes to the cache and returns; a goroutine hands each notification to the handler
// until ctx ends or the cache stops, then cancels the subscription.
func (s *changeSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	changes, cancel := s.cache.subscribe()
	go func() {
		defer cancel()
		for {
			select {
			case <-ctx.Done():
				return
			case ch, ok := <-changes:
				if !ok {
					return // the cache stopped
				}
				obj := &ChangeEvent{PartialObjectMetadata: metav1.PartialObjectMetadata{
					TypeMeta:   metav1.TypeMeta{APIVersion: ClusterDeploymentAPIVersion, Kind: ClusterDeploymentKind},
					ObjectMeta: metav1.ObjectMeta{Namespace: ch.Cluster.Namespace, Name: ch.Cluster.Name},
				}, Change: ch}
				// The handler only maps and adds to the queue, which never blocks.
				s.handler.Generic(ctx, event.GenericEvent{Object: obj}, q)
			}
		}
	}()
	return nil
}
