// Command inventory-collector watches the child clusters of every Colony through their kubeconfig
// Secrets and publishes each child's GPU inventory on the Colony's status.gpuInventory, with
// Prometheus gauges. Replicas may split the clusters between them (--shard-count, --shard-index).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/inventory-collector/internal/inventory"
	"github.com/exalsius/exalsius-operator/inventory-collector/internal/sharding"
)

// flags are the inventory-collector's own options, besides the shared bootstrap ones.
type flags struct {
	shardIndex              int
	shardCount              int
	maxConcurrentReconciles int
	maxConcurrentConnects   int
	childSyncTimeout        time.Duration
	childHealthInterval     time.Duration
	debounce                time.Duration
	childQPS                float64
	childBurst              int
	contactRefresh          time.Duration
}

func (f *flags) add(fs *flag.FlagSet) {
	fs.IntVar(&f.shardIndex, "shard-index", -1,
		"This replica's shard in [0, --shard-count). Negative takes the ordinal of the pod name (POD_NAME or the host name), as in a StatefulSet.")
	fs.IntVar(&f.shardCount, "shard-count", 1, "Number of shards the child clusters are split into; 1 watches every cluster.")
	fs.IntVar(&f.maxConcurrentReconciles, "max-concurrent-reconciles", 4, "Colonies reconciled in parallel.")
	fs.IntVar(&f.maxConcurrentConnects, "max-concurrent-connects", 8, "Child clusters connected (listed and watched) in parallel.")
	fs.DurationVar(&f.childSyncTimeout, "child-sync-timeout", 30*time.Second, "How long a connect may take to list a child's Nodes and Pods.")
	fs.DurationVar(&f.childHealthInterval, "child-health-interval", 15*time.Second, "Period of the reachability probe of each connected child.")
	fs.DurationVar(&f.debounce, "debounce", 2*time.Second, "Window in which a child's Node and Pod changes are folded into one status update.")
	fs.Float64Var(&f.childQPS, "child-api-qps", 20, "Queries per second to each child's API server.")
	fs.IntVar(&f.childBurst, "child-api-burst", 40, "Burst of queries to each child's API server.")
	fs.DurationVar(&f.contactRefresh, "contact-refresh", inventory.DefaultContactRefresh,
		"How old a quiet, reachable child's status lastContact may get before it is rewritten (one status write per Colony per interval).")
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", inventory.Component, err)
		os.Exit(1)
	}
}

func run() error {
	opts := bootstrap.NewOptions(inventory.Component)
	opts.AddFlags(flag.CommandLine)
	var f flags
	f.add(flag.CommandLine)
	flag.Parse()

	shard := sharding.Shard{Count: max(f.shardCount, 1)}
	if f.shardCount < 1 {
		return fmt.Errorf("--shard-count: must be at least 1, got %d", f.shardCount)
	}
	if shard.Sharded() {
		idx, err := sharding.ResolveIndex(f.shardIndex)
		if err != nil {
			return err
		}
		shard.Index = idx
	}
	if err := shard.Validate(); err != nil {
		return err
	}

	mgr, err := bootstrap.NewManager(opts, scheme.New(), func(o *ctrl.Options) {
		// One active replica per shard: a second pod for the same shard stands by.
		if shard.Sharded() {
			o.LeaderElectionID = fmt.Sprintf("%s-shard-%d.%s", inventory.Component, shard.Index, bootstrap.LeaderElectionDomain)
		}
	})
	if err != nil {
		return err
	}
	// The manager's logger is already named after the component.
	log := mgr.GetLogger()

	// Kubeconfig Secret data are read through the API reader, never cached, and only when the
	// Secret's resourceVersion (from the controller's metadata-only watch) moved.
	clusters, err := childcluster.New(childcluster.Options{
		Reader:                mgr.GetAPIReader(),
		MetadataReader:        mgr.GetClient(),
		Logger:                log.WithName("childcluster"),
		MaxConcurrentConnects: f.maxConcurrentConnects,
		SyncTimeout:           f.childSyncTimeout,
		HealthInterval:        f.childHealthInterval,
		Debounce:              f.debounce,
		QPS:                   float32(f.childQPS),
		Burst:                 f.childBurst,
		UserAgent:             bootstrap.UserAgent(inventory.Component),
		OnConnect: func(cd types.NamespacedName, _ time.Duration, err error) {
			inventory.ObserveConnect(cd, err)
		},
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(clusters); err != nil {
		return fmt.Errorf("adding the child-cluster cache: %w", err)
	}
	r := &inventory.Reconciler{Client: mgr.GetClient(), Clusters: clusters, Shard: shard, Recorder: mgr.GetEventRecorder(inventory.Component),
		ContactRefresh: f.contactRefresh}
	if err := r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: f.maxConcurrentReconciles}); err != nil {
		return fmt.Errorf("setting up the inventory controller: %w", err)
	}
	log.Info("starting", "shardIndex", shard.Index, "shardCount", shard.Count)
	return mgr.Start(bootstrap.SetupSignalHandler())
}
