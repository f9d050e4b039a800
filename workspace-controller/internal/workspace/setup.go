package workspace

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/component"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/mesh"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/prerequisites"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/routing"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspaceclass"
)

// Defaults of the workspace-controller's options (DefaultOptions).
const (
	DefaultMaxConcurrentReconciles  = 16
	DefaultChildAPIQPS              = 500
	DefaultChildAPIBurst            = 1000
	DefaultPrerequisiteGracePeriod  = 10 * time.Minute
	DefaultUnreachableDeleteTimeout = 10 * time.Minute
	DefaultGatewayName              = "tenant-gateway"
	DefaultGatewayNamespace         = "istio-ingress"
	DefaultRoutingRetry             = 15 * time.Second
	DefaultRoutingResync            = 5 * time.Minute
	DefaultRouteSweepInterval       = 10 * time.Minute
	DefaultRolloutSettle            = 30 * time.Second
	DefaultUnreachableRetry         = 30 * time.Second
	DefaultChildRequestTimeout      = 30 * time.Second
	DefaultWaitingRetry             = time.Minute
	DefaultUnschedulableAfter       = 2 * time.Minute
	DefaultClusterGoneGrace         = 5 * time.Minute
	DefaultDeployingRecheck         = 2 * time.Minute
)

// Options are the workspace-controller's settings, besides the ones every binary shares
// (bootstrap.Options). DefaultOptions fills the defaults, BindFlags binds them to command-line flags,
// and Setup wires the controllers with them; main.go and the test suites use the same three.
type Options struct {
	// MaxConcurrentReconciles is how many WorkspaceDeployments are reconciled in parallel
	// (--max-concurrent-reconciles, default 16).
	MaxConcurrentReconciles int
	// ChildAPIQPS and ChildAPIBurst bound the requests to each child cluster's API server
	// (--child-api-qps, default 500; --child-api-burst, default 1000).
	ChildAPIQPS   float64
	ChildAPIBurst int
	// ChildIdleTimeout stops a child cluster's watches after this long without use; 0 keeps them
	// (--child-idle-timeout, default 0).
	ChildIdleTimeout time.Duration
	// PrerequisiteGracePeriod is how long a shared prerequisite no workspace needs is kept
	// (--prerequisite-grace-period, default 10m).
	PrerequisiteGracePeriod time.Duration
	// UnreachableDeleteTimeout bounds how long, counted from the deletion request, a workspace's
	// deletion waits for a child cluster that cannot be reached while its ClusterDeployment exists.
	// Past it the deletion completes, and an Event names what was not cleaned up; 0 waits for ever
	// (--unreachable-delete-timeout, default 10m).
	UnreachableDeleteTimeout time.Duration
	// GatewayName and GatewayNamespace locate the tenant Gateway on each regional cluster
	// (--gateway-name, default tenant-gateway; --gateway-namespace, default istio-ingress).
	GatewayName      string
	GatewayNamespace string
	// ReleaseIngressNamespaces are the namespaces, on every child, whose pods may reach the
	// workspaces' pods besides the release namespace itself and the Gateway's namespace: the mesh's
	// data plane (the east-west gateway) and the like. A class's spec.networkPolicy adds more
	// (--release-ingress-namespaces, default istio-system).
	ReleaseIngressNamespaces []string
	// DefaultRegionalCluster is the regional ClusterDeployment (<namespace>/<name>, or <name> in the
	// child's namespace) of children without the KOF regional label; empty: none
	// (--default-regional-cluster).
	DefaultRegionalCluster string
	// MeshMode is the service-mesh mode (--workspace-mesh-mode: none, ambient, waypoint or sidecar;
	// default none): the mesh labels of the release namespaces, mirror namespaces and Services, and the
	// waypoint check (internal/mesh, docs/ROUTING.md "Mesh modes").
	MeshMode string
	// WaypointEnabled is the upstream operator's --workspace-waypoint-enabled, accepted for
	// compatibility: with ambient it gives waypoint (default false).
	WaypointEnabled bool
	// WaypointNamespace is the namespace of the per-child waypoints on the child and regional clusters
	// (--workspace-waypoint-namespace, default istio-system).
	WaypointNamespace string
	// RoutingRetry is how soon a workspace whose routes do not all serve yet, or whose routing
	// infrastructure is missing, is looked at again (the regional cluster's route status is polled,
	// not watched) (--routing-retry, default 15s).
	RoutingRetry time.Duration
	// RoutingResync is how often the routes of a workspace whose routes all serve are checked again
	// (--routing-resync, default 5m).
	RoutingResync time.Duration
	// RouteSweepInterval is how often routes whose workspace is gone are removed from the regional
	// clusters, besides once at start (--route-sweep-interval, default 10m).
	RouteSweepInterval time.Duration

	// The options below are not flags.

	// RolloutSettle is how long after a ServiceSet change a service state older than the change is
	// still trusted as current (k0rdent collects states every 10 s and may skip a short
	// Provisioning). Default 30s.
	RolloutSettle time.Duration
	// UnreachableRetry is the delay before retrying a child that could not be reached. Default 30s.
	UnreachableRetry time.Duration
	// WaitingRetry is how soon a waiting workspace (Waiting for GPUs, a fitting cluster or its
	// namespace's quota, on a named cluster or unplaced) is looked at again without an event. The
	// events that can let it go (child Nodes and Pods, workspaces releasing GPUs or leaving or
	// reordering the queue, ClusterDeployments, Colonies, quotas) wake it earlier; the timer only
	// bounds how long a missed event costs. Default 1m.
	WaitingRetry time.Duration
	// ChildRequestTimeout bounds each step's requests to a child cluster (the release namespace, its
	// quota, the quota refusals). Default 30s.
	ChildRequestTimeout time.Duration
	// UnschedulableAfter is how long a pod of a Deploying release may stay Unschedulable on the child
	// before the workspace names it (HelmReleaseReady reason PodsRefused): the scheduler reports a pod
	// Unschedulable for a moment while nodes start or a previous pod's GPUs are freed. Default 2m.
	UnschedulableAfter time.Duration
	// DeployingRecheck is how soon a Deploying workspace whose release is installed is looked at again
	// without an event, lengthened at random by up to a fifth (deployingRecheck). The child-cluster
	// cache watches the child's pods and its workload Events (refusals), so a change wakes the
	// workspace at once; the look bounds what a missed event costs, and reads the cache. Default 2m.
	DeployingRecheck time.Duration
	// ClusterGoneGrace is how long a workspace whose ClusterDeployment does not exist keeps what it
	// holds for that cluster: its admission (counted by the GPU gate and the WorkspaceQuotas), its
	// ServiceSet and, when placement chose the cluster, its placement. A ClusterDeployment its Colony
	// deletes and makes again comes back within it. Past it the ServiceSet is deleted, the admission
	// released and a placed workspace placed again (clustergone.go). Default 5m.
	ClusterGoneGrace time.Duration
	// ChildCluster holds the connection timings of the child and regional cluster caches (Debounce,
	// SyncTimeout, HealthInterval, BackoffBase, BackoffMax); zero values take the childcluster
	// defaults. Setup fills the readers, logger, user agent, scheme and the flag-backed fields.
	ChildCluster childcluster.Options
	// DisableRouting runs without a route provider and route sweeper: workspaces with access
	// endpoints get RoutesReady=False, RoutingNotConfigured. For tests without regional clusters;
	// the binary always routes.
	DisableRouting bool
}

// DefaultOptions returns the defaults of every option.
func DefaultOptions() Options {
	return Options{
		MaxConcurrentReconciles:  DefaultMaxConcurrentReconciles,
		ChildAPIQPS:              DefaultChildAPIQPS,
		ChildAPIBurst:            DefaultChildAPIBurst,
		PrerequisiteGracePeriod:  DefaultPrerequisiteGracePeriod,
		UnreachableDeleteTimeout: DefaultUnreachableDeleteTimeout,
		GatewayName:              DefaultGatewayName,
		GatewayNamespace:         DefaultGatewayNamespace,
		ReleaseIngressNamespaces: []string{"istio-system"},
		MeshMode:                 string(mesh.None),
		WaypointNamespace:        mesh.DefaultWaypointNamespace,
		RoutingRetry:             DefaultRoutingRetry,
		RoutingResync:            DefaultRoutingResync,
		RouteSweepInterval:       DefaultRouteSweepInterval,
		RolloutSettle:            DefaultRolloutSettle,
		UnreachableRetry:         DefaultUnreachableRetry,
		ChildRequestTimeout:      DefaultChildRequestTimeout,
		WaitingRetry:             DefaultWaitingRetry,
		UnschedulableAfter:       DefaultUnschedulableAfter,
		ClusterGoneGrace:         DefaultClusterGoneGrace,
		DeployingRecheck:         DefaultDeployingRecheck,
	}
}

// BindFlags binds the options to flags on fs. The current values are the flags' defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	o.ChildCluster.Kubeconfig.BindFlags(fs)
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", o.MaxConcurrentReconciles,
		"WorkspaceDeployments reconciled in parallel (GPU gate decisions on one cluster are serialised; CPU-only admissions are not).")
	fs.Float64Var(&o.ChildAPIQPS, "child-api-qps", o.ChildAPIQPS,
		"Queries per second to each child cluster's API server (release namespaces, quotas, teardown).")
	fs.IntVar(&o.ChildAPIBurst, "child-api-burst", o.ChildAPIBurst, "Burst of queries to each child cluster's API server.")
	fs.DurationVar(&o.PrerequisiteGracePeriod, "prerequisite-grace-period", o.PrerequisiteGracePeriod,
		"How long a shared prerequisite no workspace needs is kept before it is removed.")
	fs.DurationVar(&o.UnreachableDeleteTimeout, "unreachable-delete-timeout", o.UnreachableDeleteTimeout,
		"How long a workspace's deletion waits for a child cluster that cannot be reached while its ClusterDeployment exists; then it completes and a Warning Event names what was not cleaned up. 0 waits for ever.")
	fs.StringVar(&o.GatewayName, "gateway-name", o.GatewayName,
		"Name of the tenant Gateway on each regional cluster; its wildcard listener hostname gives the tenant domain of access URLs.")
	fs.StringVar(&o.GatewayNamespace, "gateway-namespace", o.GatewayNamespace, "Namespace of the tenant Gateway on each regional cluster.")
	fs.Var((*namespaceList)(&o.ReleaseIngressNamespaces), "release-ingress-namespaces",
		"Comma-separated namespaces on each child whose pods may reach the workspaces' pods, besides the release namespace and the Gateway's namespace (a mesh's data plane); a class's spec.networkPolicy.allowFrom adds more. Empty: none.")

	fs.StringVar(&o.MeshMode, "workspace-mesh-mode", o.MeshMode,
		"Service mesh of the workspaces' traffic between child and regional clusters: none (no mesh labels), ambient (Istio ambient), waypoint (Istio ambient with the per-child waypoint <cluster>-waypoint, which must be Programmed on both clusters) or sidecar (Istio sidecar injection); see docs/ROUTING.md.")
	fs.BoolVar(&o.WaypointEnabled, "workspace-waypoint-enabled", o.WaypointEnabled,
		"The upstream operator's waypoint switch, for compatibility: with --workspace-mesh-mode=ambient, true means waypoint; refused with none and sidecar.")
	fs.StringVar(&o.WaypointNamespace, "workspace-waypoint-namespace", o.WaypointNamespace,
		"Namespace of the per-child waypoints on the child and regional clusters (--workspace-mesh-mode=waypoint).")
	fs.StringVar(&o.DefaultRegionalCluster, "default-regional-cluster", o.DefaultRegionalCluster,
		"Regional ClusterDeployment (<namespace>/<name>, or <name> in the child's namespace) of children whose ClusterDeployment has no label "+
			routing.RegionalClusterNameLabel+"; empty: none.")
	fs.DurationVar(&o.RoutingRetry, "routing-retry", o.RoutingRetry,
		"How soon routes that do not serve yet, or missing routing infrastructure, are checked again.")
	fs.DurationVar(&o.RoutingResync, "routing-resync", o.RoutingResync,
		"How often the routes of a workspace whose routes all serve are checked again.")
	fs.DurationVar(&o.RouteSweepInterval, "route-sweep-interval", o.RouteSweepInterval,
		"How often routes on regional clusters whose workspace is gone are removed (also done at start).")
	fs.DurationVar(&o.ChildIdleTimeout, "child-idle-timeout", o.ChildIdleTimeout,
		"Stop a child cluster's watches after this long without use; 0 keeps them while a workspace uses the cluster (Waiting workspaces rely on their events).")
}

// Validate reports every invalid option, naming its flag.
func (o *Options) Validate() error {
	var errs []error
	if o.MaxConcurrentReconciles < 1 {
		errs = append(errs, fmt.Errorf("--max-concurrent-reconciles must be at least 1, got %d", o.MaxConcurrentReconciles))
	}
	if o.ChildAPIQPS <= 0 || o.ChildAPIBurst <= 0 {
		errs = append(errs, fmt.Errorf("--child-api-qps and --child-api-burst must be positive, got %v and %d", o.ChildAPIQPS, o.ChildAPIBurst))
	}
	if o.UnreachableDeleteTimeout < 0 {
		errs = append(errs, fmt.Errorf("--unreachable-delete-timeout must not be negative, got %s", o.UnreachableDeleteTimeout))
	}
	if _, err := routing.ParseRegionalRef(o.DefaultRegionalCluster); err != nil {
		errs = append(errs, fmt.Errorf("--default-regional-cluster: %w", err))
	}
	if _, err := o.Mesh(); err != nil {
		errs = append(errs, err)
	}
	if o.GatewayName == "" || o.GatewayNamespace == "" {
		errs = append(errs, fmt.Errorf("--gateway-name and --gateway-namespace must not be empty"))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--routing-retry", o.RoutingRetry}, {"--routing-resync", o.RoutingResync}, {"--route-sweep-interval", o.RouteSweepInterval}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.flag, d.v))
		}
	}
	if o.PrerequisiteGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("--prerequisite-grace-period must not be negative, got %s", o.PrerequisiteGracePeriod))
	}
	if o.ChildIdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("--child-idle-timeout must not be negative, got %s", o.ChildIdleTimeout))
	}
	if err := o.validateTimings(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Mesh is the mesh configuration of the mesh flags (mesh.Parse); the error names the flag.
func (o *Options) Mesh() (mesh.Config, error) {
	return mesh.Parse(o.MeshMode, o.WaypointEnabled, o.WaypointNamespace)
}

// validateTimings checks the timings the reconciler needs and no flag sets.
func (o *Options) validateTimings() error {
	var errs []error
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"RolloutSettle", o.RolloutSettle}, {"UnreachableRetry", o.UnreachableRetry}, {"ChildRequestTimeout", o.ChildRequestTimeout},
		{"WaitingRetry", o.WaitingRetry}, {"UnschedulableAfter", o.UnschedulableAfter}, {"ClusterGoneGrace", o.ClusterGoneGrace},
		{"DeployingRecheck", o.DeployingRecheck}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("options: %s must be positive, got %s (DefaultOptions sets it)", d.field, d.v))
		}
	}
	return errors.Join(errs...)
}

// Setup wires the workspace-controller into mgr: the child-cluster cache, the regional-cluster cache,
// the route provider and sweeper, and the WorkspaceClass, WorkspaceDeployment, WorkspaceQuota and
// prerequisite controllers. ctx bounds the index registration; the controllers run with mgr.
func Setup(ctx context.Context, mgr manager.Manager, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	regional, err := routing.ParseRegionalRef(opts.DefaultRegionalCluster)
	if err != nil {
		return fmt.Errorf("--default-regional-cluster: %w", err)
	}
	co := opts.ChildCluster
	co.Logger = mgr.GetLogger().WithName("childcluster")
	co.UserAgent = bootstrap.UserAgent(Component)
	co.IdleTimeout = opts.ChildIdleTimeout
	co.QPS = float32(opts.ChildAPIQPS)
	co.Burst = opts.ChildAPIBurst
	// A child change that takes admissions away (a node gone, cordoned or taken) shows in the status
	// without waiting for the debounce window; a burst of changes still costs at most two passes.
	co.NotifyAtOnce = true
	// The look at a Deploying workspace reads the workload controllers' refusals of its pods from the
	// cache (childns.PodRefusalFrom), and a refusal brings the workspace back at once.
	co.WatchWorkloadEvents = true
	// The release namespaces, their quotas and network policies are read from a watch
	// (Children.Client), and one changed or deleted on the child brings its workspace back to be put
	// right at once (bringsBack).
	co.OwnedSelector = owned.LabelManagedBy + "=" + component.Name
	children, err := childcluster.New(SecretReaders(mgr, co))
	if err != nil {
		return err
	}
	if err := mgr.Add(children); err != nil {
		return err
	}

	var routes routing.Provider
	if !opts.DisableRouting {
		// Regional clusters get a connection cache of their own (with the Gateway API in its scheme),
		// so that tearing a child down never drops the connection routes use.
		ro := opts.ChildCluster
		ro.Scheme = routing.Scheme()
		ro.Logger = mgr.GetLogger().WithName("regionalcluster")
		ro.UserAgent = bootstrap.UserAgent(Component)
		regionals, err := childcluster.New(SecretReaders(mgr, ro))
		if err != nil {
			return err
		}
		if err := mgr.Add(regionals); err != nil {
			return err
		}
		meshCfg, err := opts.Mesh()
		if err != nil {
			return err
		}
		gw := &routing.Gateway{
			Regionals: routing.CacheRegionals{Cache: regionals},
			// The child cache's direct clients: a mesh mode labels the child's Services and reads its
			// waypoint.
			Children: routing.CacheRegionals{Cache: children},
			Options: routing.Options{GatewayName: opts.GatewayName, GatewayNamespace: opts.GatewayNamespace, DefaultRegional: regional,
				Mesh: meshCfg},
		}
		sweeper := &routing.Sweeper{
			Clusters: mgr.GetClient(), Workspaces: mgr.GetAPIReader(), Regionals: gw.Regionals,
			DefaultRegional: regional, Interval: opts.RouteSweepInterval, Log: mgr.GetLogger().WithName("routesweeper"),
		}
		if err := mgr.Add(sweeper); err != nil {
			return err
		}
		// A ClusterDeployment relabelled to another regional cluster: its workspaces' routes on the
		// former one are swept at once (the workspaces' own passes publish them on the new one).
		inf, err := mgr.GetCache().GetInformer(ctx, &k0rdentv1beta1.ClusterDeployment{})
		if err != nil {
			return fmt.Errorf("watching ClusterDeployments for the route sweeper: %w", err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n any) {
			old, ok := o.(*k0rdentv1beta1.ClusterDeployment)
			now, ok2 := n.(*k0rdentv1beta1.ClusterDeployment)
			if ok && ok2 {
				sweeper.Moved(old, now)
			}
		}}); err != nil {
			return fmt.Errorf("watching ClusterDeployments for the route sweeper: %w", err)
		}
		routes = gw
	}

	copts := controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}
	if err := (&workspaceclass.Reconciler{
		Client:   mgr.GetClient(),
		Cache:    mgr.GetCache(),
		Recorder: mgr.GetEventRecorder(Component),
	}).SetupWithManager(ctx, mgr, copts); err != nil {
		return fmt.Errorf("setting up the WorkspaceClass controller: %w", err)
	}
	if err := (&Reconciler{
		Client:    mgr.GetClient(),
		Cache:     mgr.GetCache(),
		APIReader: mgr.GetAPIReader(),
		Children:  CacheChildren{Cache: children},
		Recorder:  mgr.GetEventRecorder(Component),
		Routes:    routes,
		Options:   opts,
	}).SetupWithManager(ctx, mgr, copts, children.Source); err != nil {
		return fmt.Errorf("setting up the WorkspaceDeployment controller: %w", err)
	}
	if err := (&prerequisites.Collector{
		Client:      mgr.GetClient(),
		GracePeriod: opts.PrerequisiteGracePeriod,
	}).SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 1}); err != nil {
		return fmt.Errorf("setting up the prerequisite collector: %w", err)
	}
	return nil
}

// SecretReaders sets how a child cluster cache reads kubeconfig Secrets: their data through the API
// reader (never cached), and only when the resourceVersion in the manager's metadata-only cache (the
// controller watches Secret metadata anyway) differs from the one last read.
func SecretReaders(mgr manager.Manager, o childcluster.Options) childcluster.Options {
	o.Reader = mgr.GetAPIReader()
	o.MetadataReader = mgr.GetClient()
	return o
}

// namespaceList is a comma-separated list of namespace names as a flag.
type namespaceList []string

func (l *namespaceList) String() string { return strings.Join(*l, ",") }

func (l *namespaceList) Set(v string) error {
	var out []string
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return fmt.Errorf("%q is not a namespace name: %s", n, strings.Join(errs, "; "))
		}
		out = append(out, n)
	}
	*l = out
	return nil
}
