// Command workspace-controller validates WorkspaceClasses and turns WorkspaceDeployments into k0rdent
// ServiceSets, with the GPU gate, prerequisites and teardown. It only wires flags to options and
// starts the manager; the behaviour lives in internal/workspaceclass, internal/workspace and
// internal/routing.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/routing"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspace"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspaceclass"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, workspace.Component+":", err)
		os.Exit(1)
	}
}

func run() error {
	opts := bootstrap.NewOptions(workspace.Component)
	// Sized to the workers: an admission is a handful of requests, each worker makes dozens a second,
	// and the API server's priority and fairness protects it from a burst of admissions.
	opts.KubeAPIQPS, opts.KubeAPIBurst = 500, 1000
	opts.AddFlags(flag.CommandLine)
	maxConcurrent := flag.Int("max-concurrent-reconciles", 16, "WorkspaceDeployments reconciled in parallel (GPU gate decisions on one cluster are serialised; CPU-only admissions are not).")
	childQPS := flag.Float64("child-api-qps", 500, "Queries per second to each child cluster's API server (release namespaces, quotas, teardown).")
	childBurst := flag.Int("child-api-burst", 1000, "Burst of queries to each child cluster's API server.")
	grace := flag.Duration("prerequisite-grace-period", 10*time.Minute, "How long a shared prerequisite no workspace needs is kept before it is removed.")
	deleteTimeout := flag.Duration("unreachable-delete-timeout", 10*time.Minute, "How long a workspace's deletion waits for a child cluster that cannot be reached while its ClusterDeployment exists; then it completes and a Warning Event names what was not cleaned up. 0 waits for ever.")
	gatewayName := flag.String("gateway-name", "tenant-gateway", "Name of the tenant Gateway on each regional cluster; its wildcard listener hostname gives the tenant domain of access URLs.")
	gatewayNamespace := flag.String("gateway-namespace", "istio-ingress", "Namespace of the tenant Gateway on each regional cluster.")
	defaultRegional := flag.String("default-regional-cluster", "", "Regional ClusterDeployment (<namespace>/<name>, or <name> in the child's namespace) of children whose ClusterDeployment has no label "+routing.RegionalClusterNameLabel+"; empty: none.")
	routingRetry := flag.Duration("routing-retry", 15*time.Second, "How soon routes that do not serve yet, or missing routing infrastructure, are checked again.")
	routingResync := flag.Duration("routing-resync", 5*time.Minute, "How often the routes of a workspace whose routes all serve are checked again.")
	sweepInterval := flag.Duration("route-sweep-interval", 10*time.Minute, "How often routes on regional clusters whose workspace is gone are removed (also done at start).")
	childIdle := flag.Duration("child-idle-timeout", 0, "Stop a child cluster's watches after this long without use; 0 keeps them while a workspace uses the cluster (Waiting workspaces rely on their events).")
	flag.Parse()
	if *maxConcurrent < 1 {
		return fmt.Errorf("--max-concurrent-reconciles must be at least 1, got %d", *maxConcurrent)
	}
	if *childQPS <= 0 || *childBurst <= 0 {
		return fmt.Errorf("--child-api-qps and --child-api-burst must be positive, got %v and %d", *childQPS, *childBurst)
	}
	if *deleteTimeout < 0 {
		return fmt.Errorf("--unreachable-delete-timeout must not be negative, got %s", *deleteTimeout)
	}
	regional, err := routing.ParseRegionalRef(*defaultRegional)
	if err != nil {
		return fmt.Errorf("--default-regional-cluster: %w", err)
	}
	if *gatewayName == "" || *gatewayNamespace == "" {
		return fmt.Errorf("--gateway-name and --gateway-namespace must not be empty")
	}
	for name, d := range map[string]time.Duration{"--routing-retry": *routingRetry, "--routing-resync": *routingResync, "--route-sweep-interval": *sweepInterval} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive, got %s", name, d)
		}
	}
	if *grace < 0 {
		return fmt.Errorf("--prerequisite-grace-period must not be negative, got %s", *grace)
	}

	mgr, err := bootstrap.NewManager(opts, scheme.New())
	if err != nil {
		return err
	}
	ctx := bootstrap.SetupSignalHandler()
	children, err := childcluster.New(withSecretReaders(mgr, childcluster.Options{
		Logger:      mgr.GetLogger().WithName("childcluster"),
		IdleTimeout: *childIdle,
		UserAgent:   bootstrap.UserAgent(workspace.Component),
		QPS:         float32(*childQPS),
		Burst:       *childBurst,
	}))
	if err != nil {
		return err
	}
	if err := mgr.Add(children); err != nil {
		return err
	}
	// Regional clusters get a connection cache of their own (with the Gateway API in its scheme), so
	// that tearing a child down never drops the connection routes use.
	regionals, err := childcluster.New(withSecretReaders(mgr, childcluster.Options{
		Scheme:    routing.Scheme(),
		Logger:    mgr.GetLogger().WithName("regionalcluster"),
		UserAgent: bootstrap.UserAgent(workspace.Component),
	}))
	if err != nil {
		return err
	}
	if err := mgr.Add(regionals); err != nil {
		return err
	}
	routes := &routing.Gateway{
		Regionals: routing.CacheRegionals{Cache: regionals},
		Options:   routing.Options{GatewayName: *gatewayName, GatewayNamespace: *gatewayNamespace, DefaultRegional: regional},
	}
	if err := mgr.Add(&routing.Sweeper{
		Clusters: mgr.GetClient(), Workspaces: mgr.GetAPIReader(), Regionals: routes.Regionals,
		DefaultRegional: regional, Interval: *sweepInterval, Log: mgr.GetLogger().WithName("routesweeper"),
	}); err != nil {
		return err
	}
	events, cancel := children.Subscribe()
	defer cancel()

	copts := controller.Options{MaxConcurrentReconciles: *maxConcurrent}
	if err := (&workspaceclass.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("workspaceclass-controller"),
	}).SetupWithManager(ctx, mgr, copts); err != nil {
		return fmt.Errorf("setting up the WorkspaceClass controller: %w", err)
	}
	if err := (&workspace.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Children:  workspace.CacheChildren{Cache: children},
		Recorder:  mgr.GetEventRecorder(workspace.Component),
		Routes:    routes,
		Options:   workspace.Options{RoutingRetry: *routingRetry, RoutingResync: *routingResync, UnreachableDeleteTimeout: *deleteTimeout},
	}).SetupWithManager(ctx, mgr, copts, events); err != nil {
		return fmt.Errorf("setting up the WorkspaceDeployment controller: %w", err)
	}
	if err := (&workspace.PrerequisiteCollector{
		Client:      mgr.GetClient(),
		GracePeriod: *grace,
	}).SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 1}); err != nil {
		return fmt.Errorf("setting up the prerequisite collector: %w", err)
	}
	return mgr.Start(ctx)
}

// withSecretReaders sets how a child cluster cache reads kubeconfig Secrets: their data through the
// API reader (never cached), and only when the resourceVersion in the manager's metadata-only cache
// (the controller watches Secret metadata anyway) differs from the one last read.
func withSecretReaders(mgr ctrl.Manager, o childcluster.Options) childcluster.Options {
	o.Reader = mgr.GetAPIReader()
	o.MetadataReader = mgr.GetClient()
	return o
}
