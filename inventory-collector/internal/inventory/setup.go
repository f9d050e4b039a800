package inventory

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/inventory-collector/internal/sharding"
)

// Defaults of the inventory-collector's options (DefaultOptions).
const (
	DefaultShardIndex              = -1
	DefaultShardCount              = 1
	DefaultMaxConcurrentReconciles = 4
	DefaultMaxConcurrentConnects   = 8
	DefaultChildSyncTimeout        = 30 * time.Second
	DefaultChildHealthInterval     = 15 * time.Second
	DefaultDebounce                = 2 * time.Second
	DefaultChildAPIQPS             = 20
	DefaultChildAPIBurst           = 40
	// DefaultContactRefresh is the default of Options.ContactRefresh.
	DefaultContactRefresh = 10 * time.Minute
)

// Options are the inventory-collector's settings, besides the ones every binary shares
// (bootstrap.Options). DefaultOptions fills the defaults, BindFlags binds them to command-line flags,
// and Setup wires the controller with them; main.go and the test suite use the same three.
type Options struct {
	// ShardIndex is this replica's shard in [0, ShardCount); negative takes the ordinal of the pod
	// name (POD_NAME or the host name), as in a StatefulSet (--shard-index, default -1).
	ShardIndex int
	// ShardCount is the number of shards the child clusters are split into; 1 watches every cluster
	// (--shard-count, default 1).
	ShardCount int
	// MaxConcurrentReconciles is how many Colonies are reconciled in parallel
	// (--max-concurrent-reconciles, default 4).
	MaxConcurrentReconciles int
	// MaxConcurrentConnects is how many child clusters are connected (listed and watched) in
	// parallel (--max-concurrent-connects, default 8).
	MaxConcurrentConnects int
	// ChildSyncTimeout bounds a connect's listing of a child's Nodes and Pods (--child-sync-timeout,
	// default 30s).
	ChildSyncTimeout time.Duration
	// ChildHealthInterval is the period of the reachability probe of each connected child
	// (--child-health-interval, default 15s).
	ChildHealthInterval time.Duration
	// Debounce is the window in which a child's Node and Pod changes are folded into one status
	// update (--debounce, default 2s).
	Debounce time.Duration
	// ChildAPIQPS and ChildAPIBurst bound the requests to each child's API server (--child-api-qps,
	// default 20; --child-api-burst, default 40).
	ChildAPIQPS   float64
	ChildAPIBurst int
	// ContactRefresh is how old a reachable, unchanged child's stored lastContact may get before it
	// is rewritten; every refresh is a status write (--contact-refresh, default 10m).
	ContactRefresh time.Duration

	// The option below is not a flag.

	// ChildCluster holds further settings of the child-cluster cache (BackoffBase, BackoffMax,
	// ProbeTimeout, ...); zero values take the childcluster defaults. Setup fills the readers,
	// logger, user agent, connect observer and the flag-backed fields.
	ChildCluster childcluster.Options
}

// DefaultOptions returns the defaults of every option.
func DefaultOptions() Options {
	return Options{
		ShardIndex:              DefaultShardIndex,
		ShardCount:              DefaultShardCount,
		MaxConcurrentReconciles: DefaultMaxConcurrentReconciles,
		MaxConcurrentConnects:   DefaultMaxConcurrentConnects,
		ChildSyncTimeout:        DefaultChildSyncTimeout,
		ChildHealthInterval:     DefaultChildHealthInterval,
		Debounce:                DefaultDebounce,
		ChildAPIQPS:             DefaultChildAPIQPS,
		ChildAPIBurst:           DefaultChildAPIBurst,
		ContactRefresh:          DefaultContactRefresh,
	}
}

// BindFlags binds the options to flags on fs. The current values are the flags' defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	o.ChildCluster.Kubeconfig.BindFlags(fs)
	fs.IntVar(&o.ShardIndex, "shard-index", o.ShardIndex,
		"This replica's shard in [0, --shard-count). Negative takes the ordinal of the pod name (POD_NAME or the host name), as in a StatefulSet.")
	fs.IntVar(&o.ShardCount, "shard-count", o.ShardCount, "Number of shards the child clusters are split into; 1 watches every cluster.")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", o.MaxConcurrentReconciles, "Colonies reconciled in parallel.")
	fs.IntVar(&o.MaxConcurrentConnects, "max-concurrent-connects", o.MaxConcurrentConnects, "Child clusters connected (listed and watched) in parallel.")
	fs.DurationVar(&o.ChildSyncTimeout, "child-sync-timeout", o.ChildSyncTimeout, "How long a connect may take to list a child's Nodes and Pods.")
	fs.DurationVar(&o.ChildHealthInterval, "child-health-interval", o.ChildHealthInterval, "Period of the reachability probe of each connected child.")
	fs.DurationVar(&o.Debounce, "debounce", o.Debounce, "Window in which a child's Node and Pod changes are folded into one status update.")
	fs.Float64Var(&o.ChildAPIQPS, "child-api-qps", o.ChildAPIQPS, "Queries per second to each child's API server.")
	fs.IntVar(&o.ChildAPIBurst, "child-api-burst", o.ChildAPIBurst, "Burst of queries to each child's API server.")
	fs.DurationVar(&o.ContactRefresh, "contact-refresh", o.ContactRefresh,
		"How old a quiet, reachable child's status lastContact may get before it is rewritten (one status write per Colony per interval).")
}

// Validate reports every invalid option, naming its flag. The shard index of a sharded collector is
// checked by Shard, which may read the pod name.
func (o *Options) Validate() error {
	var errs []error
	if o.ShardCount < 1 {
		errs = append(errs, fmt.Errorf("--shard-count: must be at least 1, got %d", o.ShardCount))
	}
	if o.MaxConcurrentReconciles < 1 {
		errs = append(errs, fmt.Errorf("--max-concurrent-reconciles must be at least 1, got %d", o.MaxConcurrentReconciles))
	}
	if o.ContactRefresh <= 0 {
		errs = append(errs, fmt.Errorf("--contact-refresh must be positive, got %s", o.ContactRefresh))
	}
	return errors.Join(errs...)
}

// Shard returns the shard this replica watches: every cluster unless ShardCount > 1, else the shard
// ShardIndex, or the ordinal of the pod name when ShardIndex is negative.
func (o *Options) Shard() (sharding.Shard, error) {
	if o.ShardCount < 1 {
		return sharding.Shard{}, fmt.Errorf("--shard-count: must be at least 1, got %d", o.ShardCount)
	}
	shard := sharding.Shard{Count: o.ShardCount}
	if shard.Sharded() {
		idx, err := sharding.ResolveIndex(o.ShardIndex)
		if err != nil {
			return sharding.Shard{}, err
		}
		shard.Index = idx
	}
	if err := shard.Validate(); err != nil {
		return sharding.Shard{}, err
	}
	return shard, nil
}

// ManagerOption gives a sharded collector one leader-election lease per shard
// ("inventory-collector-shard-<index>.exalsius.ai"): a second pod for the same shard stands by.
func ManagerOption(shard sharding.Shard) func(*ctrl.Options) {
	return func(o *ctrl.Options) {
		if shard.Sharded() {
			o.LeaderElectionID = fmt.Sprintf("%s-shard-%d.%s", Component, shard.Index, bootstrap.LeaderElectionDomain)
		}
	}
}

// Setup wires the inventory-collector into mgr: the child-cluster cache and the inventory
// controller of this replica's shard. ctx is unused today; it is there so that every component's
// Setup has the same shape.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	_, err := setup(ctx, mgr, opts)
	return err
}

// setup is Setup, returning the reconciler (the package's tests read its child-cluster cache).
func setup(_ context.Context, mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	shard, err := opts.Shard()
	if err != nil {
		return nil, err
	}
	// Kubeconfig Secret data are read through the API reader, never cached, and only when the
	// Secret's resourceVersion (from the controller's metadata-only watch) moved.
	co := opts.ChildCluster
	co.Reader = mgr.GetAPIReader()
	co.MetadataReader = mgr.GetClient()
	co.Logger = mgr.GetLogger().WithName("childcluster")
	co.MaxConcurrentConnects = opts.MaxConcurrentConnects
	co.SyncTimeout = opts.ChildSyncTimeout
	co.HealthInterval = opts.ChildHealthInterval
	co.Debounce = opts.Debounce
	co.QPS = float32(opts.ChildAPIQPS)
	co.Burst = opts.ChildAPIBurst
	co.UserAgent = bootstrap.UserAgent(Component)
	co.OnConnect = func(cd types.NamespacedName, _ time.Duration, err error) { ObserveConnect(cd, err) }
	clusters, err := childcluster.New(co)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(clusters); err != nil {
		return nil, fmt.Errorf("adding the child-cluster cache: %w", err)
	}
	r := &Reconciler{Client: mgr.GetClient(), Clusters: clusters, Shard: shard, Recorder: mgr.GetEventRecorder(Component),
		ContactRefresh: opts.ContactRefresh}
	if err := r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}); err != nil {
		return nil, fmt.Errorf("setting up the inventory controller: %w", err)
	}
	return r, nil
}
