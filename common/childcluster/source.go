package childcluster

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// ClusterDeploymentAPIVersion and ClusterDeploymentKind type the objects Source emits.
const (
	ClusterDeploymentAPIVersion = "k0rdent.mirantis.com/v1beta1"
	ClusterDeploymentKind       = "ClusterDeployment"
)

// Source returns a controller-runtime source fed by Subscribe: for every notification it emits a
// GenericEvent whose object is a PartialObjectMetadata naming the ClusterDeployment (namespace and
// name only). The handler maps it to the controller's requests, for example with
// handler.EnqueueRequestsFromMapFunc. The subscription ends when the Cache stops.
func (c *Cache) Source(h handler.EventHandler) source.Source {
	events := make(chan event.GenericEvent)
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return source.Channel(events, h) // never fed
	}
	keys, cancel := c.Subscribe()
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer cancel()
		for key := range keys {
			obj := &metav1.PartialObjectMetadata{
				TypeMeta:   metav1.TypeMeta{APIVersion: ClusterDeploymentAPIVersion, Kind: ClusterDeploymentKind},
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			}
			select {
			case events <- event.GenericEvent{Object: obj}:
			case <-c.ctx.Done():
				return
			}
		}
	}()
	return source.Channel(events, h)
}
