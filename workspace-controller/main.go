// Command workspace-controller validates WorkspaceClasses and turns WorkspaceDeployments into k0rdent
// ServiceSets, with the GPU gate, prerequisites and teardown. It only wires flags to options and
// starts the manager; the behaviour lives in internal/workspaceclass and internal/workspace.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspace"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspaceclass"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "workspace-controller:", err)
		os.Exit(1)
	}
}

func run() error {
	opts := bootstrap.NewOptions(workspace.Component)
	opts.AddFlags(flag.CommandLine)
	maxConcurrent := flag.Int("max-concurrent-reconciles", 4, "WorkspaceDeployments reconciled in parallel (GPU gate decisions on one cluster are serialised).")
	grace := flag.Duration("prerequisite-grace-period", 10*time.Minute, "How long a shared prerequisite no workspace needs is kept before it is removed.")
	tenantDomain := flag.String("tenant-domain", "", "DNS domain workspace access URLs are built under (https://<workspace>.<tenant-domain>).")
	deleteTimeout := flag.Duration("unreachable-delete-timeout", 10*time.Minute, "How long a workspace's deletion waits for a child cluster that cannot be reached while its ClusterDeployment exists; then it completes and a Warning Event names what was not cleaned up. 0 waits for ever.")
	childIdle := flag.Duration("child-idle-timeout", 0, "Stop a child cluster's informers after this long without use; 0 keeps them while a workspace uses the cluster (Waiting workspaces rely on their events).")
	flag.Parse()
	if *maxConcurrent < 1 {
		return fmt.Errorf("--max-concurrent-reconciles must be at least 1, got %d", *maxConcurrent)
	}
	if *deleteTimeout < 0 {
		return fmt.Errorf("--unreachable-delete-timeout must not be negative, got %s", *deleteTimeout)
	}
	if *grace < 0 {
		return fmt.Errorf("--prerequisite-grace-period must not be negative, got %s", *grace)
	}

	mgr, err := bootstrap.NewManager(opts, scheme.New())
	if err != nil {
		return err
	}
	ctx := bootstrap.SetupSignalHandler()
	children, err := childcluster.New(childcluster.Options{
		Reader:      mgr.GetAPIReader(),
		Logger:      mgr.GetLogger().WithName("childcluster"),
		IdleTimeout: *childIdle,
		UserAgent:   workspace.Component,
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(children); err != nil {
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
		Recorder:  mgr.GetEventRecorder("workspace-controller"),
		Options:   workspace.Options{TenantDomain: *tenantDomain, UnreachableDeleteTimeout: *deleteTimeout},
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
