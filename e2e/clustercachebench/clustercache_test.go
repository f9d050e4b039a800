package clustercachebench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// clusterCacheConcurrency is the ClusterCache reconciler's concurrency: Cluster API's controllers
// default their --clustercache-concurrency flag to 100 (controller-runtime's own default is 1).
const clusterCacheConcurrency = 100

// podSelector keeps the Pods the inventory counts, the ones not finished, as the project's cache does.
var podSelector = fields.AndSelectors(
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
)

// clusterCache is Cluster API's ClusterCache, set up as CAPI's core controller sets it up
// (core/main.go, core/setup): managed fields stripped from cached objects, 100 concurrent Cluster
// reconciles, and otherwise its defaults: a probe (GET /) every 10s with a 5s timeout, disconnect
// after 5 failures in a row or at once on a 401, a new connect 30s after a failed one, a 5m initial
// sync timeout, a 10s client timeout, 20 QPS and a burst of 30 per cluster. Kubeconfig Secrets are read
// through the API reader (CAPI's controllers read them from a cache of Secrets). A consumer controller
// watches the cache's connect events and adds a watch of each cluster's Nodes and Pods (the Pods
// filtered as the project's cache filters them), as a CAPI controller would.
type clusterCache struct {
	cc     clustercache.ClusterCache
	obs    *observer
	nodes  int
	stopMg func()

	mu      sync.Mutex
	created map[types.NamespacedName]int
}

func (c *clusterCache) describe() string {
	return "Cluster API ClusterCache as CAPI's core controller sets it up: 100 concurrent connects, probe GET / every 10s " +
		"(timeout 5s, 5 failures; a 401 at once), reconnect 30s after a failed connect, initial sync timeout 5m, " +
		"QPS 20/burst 30, managed fields stripped"
}

func (c *clusterCache) start(ctx context.Context, w *world, obs *observer) error {
	c.obs, c.nodes, c.created = obs, w.nodes, map[types.NamespacedName]int{}
	mgr, err := newManager(w)
	if err != nil {
		return err
	}
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: mgr.GetAPIReader(),
		Cache: clustercache.CacheOptions{
			DefaultTransform: ctrlcache.TransformStripManagedFields(),
			ByObject:         map[client.Object]ctrlcache.ByObject{&corev1.Pod{}: {Field: podSelector}},
		},
		Client: clustercache.ClientOptions{UserAgent: "clustercachebench"},
	}, controller.Options{MaxConcurrentReconciles: clusterCacheConcurrency})
	if err != nil {
		return fmt.Errorf("setting up the ClusterCache: %w", err)
	}
	c.cc = cc
	var consumer controller.Controller
	consumer, err = ctrl.NewControllerManagedBy(mgr).Named("bench-consumer").
		WatchesRawSource(cc.GetClusterSource("bench-consumer", func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		})).
		Build(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, c.addWatches(ctx, req.NamespacedName, consumer)
		}))
	if err != nil {
		return fmt.Errorf("setting up the consumer controller: %w", err)
	}
	c.stopMg, err = startManager(ctx, mgr)
	if err != nil {
		return err
	}
	prev := c.stopMg
	c.stopMg = func() {
		// The ClusterCache's caches run under a context of their own, which the manager does not end.
		if s, ok := cc.(interface{ Shutdown() }); ok {
			s.Shutdown()
		}
		prev()
	}
	return nil
}

// addWatches watches a connected cluster's Nodes and Pods through the consumer; a cluster that is
// not connected is skipped, since its connect sends an event.
func (c *clusterCache) addWatches(ctx context.Context, key types.NamespacedName, consumer controller.Controller) error {
	for _, wo := range []clustercache.WatcherOptions{
		{Name: "bench-nodes", Watcher: consumer, Kind: &corev1.Node{}, EventHandler: c.nodeHandler(key)},
		{Name: "bench-pods", Watcher: consumer, Kind: &corev1.Pod{}, EventHandler: handler.Funcs{}},
	} {
		if err := c.cc.Watch(ctx, key, clustercache.NewWatcher(wo)); err != nil {
			if errors.Is(err, clustercache.ErrClusterNotConnected) {
				return nil
			}
			return err
		}
	}
	return nil
}

// nodeHandler reports a cluster's Nodes to the observer: all of them listable once as many creates
// as nodes arrived (the informer's store holds an object before its handlers hear of it), and
// changeLabel of changedNode on every update.
func (c *clusterCache) nodeHandler(key types.NamespacedName) handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, _ queue) {
			c.mu.Lock()
			c.created[key]++
			n := c.created[key]
			c.mu.Unlock()
			if n == c.nodes {
				c.obs.synced(key)
			}
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ queue) {
			if e.ObjectNew.GetName() == changedNode {
				c.obs.seen(key, e.ObjectNew.GetLabels()[changeLabel])
			}
		},
	}
}

// connection returns the REST config of the cluster's connection (a new one on each connect) when
// its cached reader lists all the Nodes.
func (c *clusterCache) connection(ctx context.Context, key types.NamespacedName) any {
	cfg, err := c.cc.GetRESTConfig(ctx, key)
	if err != nil {
		return nil
	}
	r, err := c.cc.GetReader(ctx, key)
	if err != nil {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	nodes := &corev1.NodeList{}
	if err := r.List(lctx, nodes); err != nil || len(nodes.Items) != c.nodes {
		return nil
	}
	return cfg
}

// health reports a failed probe (the last one failed) and a disconnected cluster (GetClient fails
// with ErrClusterNotConnected).
func (c *clusterCache) health(ctx context.Context, key types.NamespacedName) (probeFailed, down bool) {
	probeFailed = c.cc.GetHealthCheckingState(ctx, key).ConsecutiveFailures > 0
	_, err := c.cc.GetClient(ctx, key)
	return probeFailed, errors.Is(err, clustercache.ErrClusterNotConnected)
}

// connectFailed reports a failed connect, which the ClusterCache counts as a failed probe.
func (c *clusterCache) connectFailed(ctx context.Context, key types.NamespacedName) bool {
	return c.cc.GetHealthCheckingState(ctx, key).ConsecutiveFailures > 0
}

func (c *clusterCache) failedConnects(keys []types.NamespacedName) int {
	return clusterCacheFailures.of(keys)
}

// clusterCacheFailures counts the connects the ClusterCache logs as failed: it exposes no count of
// its own. failureSink fills it.
var clusterCacheFailures = newConnectFailures()

// failureSink is controller-runtime's logger in the benchmark: it discards everything but counts the
// ClusterCache's "Connect failed" errors by the Cluster its reconciler's logger names (CAPI's
// controllers log the object as "Cluster", a klog.ObjectRef).
type failureSink struct{ name string }

func (failureSink) Init(logr.RuntimeInfo) {}

// Enabled makes the logger skip every Info call; Error calls reach the sink whatever it says.
func (failureSink) Enabled(int) bool { return false }

func (failureSink) Info(int, string, ...any) {}

func (s failureSink) Error(_ error, msg string, _ ...any) {
	if msg == "Connect failed" && s.name != "" {
		clusterCacheFailures.add(s.name)
	}
}

func (s failureSink) WithValues(keysAndValues ...any) logr.LogSink {
	for i := 0; i+1 < len(keysAndValues); i += 2 {
		if ref, ok := keysAndValues[i+1].(klog.ObjectRef); ok && keysAndValues[i] == "Cluster" {
			s.name = ref.Name
		}
	}
	return s
}

func (s failureSink) WithName(string) logr.LogSink { return s }

func (c *clusterCache) stop() {
	if c.stopMg != nil {
		c.stopMg()
	}
}
