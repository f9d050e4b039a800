package clustercachebench

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/exalsius/exalsius-operator/common/childcluster"
)

// childClusterDebounce is the notification window of the project's cache here. The inventory-collector
// folds a child's changes for 2s (--debounce) before it writes a Colony; that choice would delay a
// ClusterCache consumer's writes just as much, so the benchmark measures the cache's own path.
const childClusterDebounce = 10 * time.Millisecond

// childClusterCache is the project's cache, set up as the inventory-collector sets it up
// (inventory.setup): kubeconfig data through the API reader, read only when the Secret's
// resourceVersion in the manager's metadata-only cache moved; 8 connects at once at most, a probe
// every 15s (two failures in a row make a child unhealthy, a refused credential at once), a 30s sync
// timeout, 20 QPS and a burst of 40 per child. A pass over every cluster with TryGet starts the
// connects, as the collector's first pass does; the change Source then tells when each one ended, and
// a failed one is tried again after its backoff.
//
// CLUSTERCACHE_BENCH_CHILDCLUSTER_CONNECTS changes the connect concurrency (default 8, the collector's
// --max-concurrent-connects), to tell what the bound costs from what the cache does.
type childClusterCache struct {
	cache    *childcluster.Cache
	obs      *observer
	nodes    int
	connects int
	failures *connectFailures
	stopMg   func()
}

func (c *childClusterCache) describe() string {
	return fmt.Sprintf("common/childcluster as the inventory-collector sets it up: %d concurrent connects, probe every 15s "+
		"(timeout 10s, 2 failures; a 401/403 at once), sync timeout 30s, backoff 2s doubling to 5m, QPS 20/burst 40, "+
		"notification debounce %s (the collector's is 2s)", c.connects, childClusterDebounce)
}

func (c *childClusterCache) start(ctx context.Context, w *world, obs *observer) error {
	c.obs, c.nodes, c.failures = obs, w.nodes, newConnectFailures()
	mgr, err := newManager(w)
	if err != nil {
		return err
	}
	cache, err := childcluster.New(childcluster.Options{
		Reader:                mgr.GetAPIReader(),
		MetadataReader:        mgr.GetClient(),
		Scheme:                mgr.GetScheme(),
		MaxConcurrentConnects: c.connects,
		SyncTimeout:           30 * time.Second,
		HealthInterval:        15 * time.Second,
		Debounce:              childClusterDebounce,
		QPS:                   20,
		Burst:                 40,
		UserAgent:             "clustercachebench",
		OnConnect: func(cd types.NamespacedName, _ time.Duration, err error) {
			if err != nil {
				c.failures.add(cd.Name)
			}
		},
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(cache); err != nil {
		return fmt.Errorf("adding the child-cluster cache: %w", err)
	}
	c.cache = cache
	c.stopMg, err = startManager(ctx, mgr)
	if err != nil {
		return err
	}
	src := cache.Source(handler.Funcs{GenericFunc: func(ctx context.Context, e event.GenericEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		c.onChange(ctx, client.ObjectKeyFromObject(e.Object))
	}})
	// The handler never adds to the queue: it reads the cache at once, as the collector's reconcile
	// would a moment later.
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	if err := src.Start(ctx, q); err != nil {
		return fmt.Errorf("starting the change source: %w", err)
	}
	for _, cl := range w.clusters {
		c.onChange(ctx, cl.key)
	}
	return nil
}

// onChange reads the cluster from the cache, as the inventory's reconcile does after a notification,
// and reports what its Nodes show. A failed connect is tried again after its backoff (at least a
// second), as the inventory's requeue does.
func (c *childClusterCache) onChange(ctx context.Context, key types.NamespacedName) {
	cl, err := c.cache.TryGet(ctx, key.Namespace, key.Name)
	if err != nil {
		switch childcluster.UnreachableReason(err) {
		case childcluster.ReasonConnectFailed, childcluster.ReasonKubeconfigInvalid, childcluster.ReasonUnauthorized:
			time.AfterFunc(max(childcluster.RetryAfter(err), time.Second), func() {
				if ctx.Err() == nil {
					c.onChange(ctx, key)
				}
			})
		}
		return
	}
	nodes := cl.Nodes()
	if len(nodes) == c.nodes {
		c.obs.synced(key)
	}
	for _, n := range nodes {
		if n.Name == changedNode {
			c.obs.seen(key, n.Labels[changeLabel])
		}
	}
}

func (c *childClusterCache) connection(ctx context.Context, key types.NamespacedName) any {
	cl, err := c.cache.TryGet(ctx, key.Namespace, key.Name)
	if err != nil || len(cl.Nodes()) != c.nodes {
		return nil
	}
	return cl
}

// health reports a cluster the cache calls unreachable: its probe failed twice in a row, or a list,
// watch or probe was refused. The cache exposes no single failed probe.
func (c *childClusterCache) health(ctx context.Context, key types.NamespacedName) (probeFailed, down bool) {
	_, err := c.cache.TryGet(ctx, key.Namespace, key.Name)
	switch childcluster.UnreachableReason(err) {
	case childcluster.ReasonUnhealthy, childcluster.ReasonUnauthorized:
		return true, true
	}
	return false, false
}

func (c *childClusterCache) connectFailed(ctx context.Context, key types.NamespacedName) bool {
	_, err := c.cache.TryGet(ctx, key.Namespace, key.Name)
	return childcluster.UnreachableReason(err) == childcluster.ReasonConnectFailed
}

func (c *childClusterCache) failedConnects(keys []types.NamespacedName) int {
	return c.failures.of(keys)
}

func (c *childClusterCache) stop() {
	if c.stopMg != nil {
		c.stopMg() // the manager stops the cache, a runnable of it
	}
}
