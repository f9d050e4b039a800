// Command workspace-controller validates WorkspaceClasses and turns WorkspaceDeployments into k0rdent
// ServiceSets, with the GPU gate, prerequisites and teardown. It only parses flags into options and
// starts the manager; workspace.Setup wires the controllers, and the behaviour lives in
// internal/workspaceclass, internal/workspace and internal/routing.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/release"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspace"
)

// A workspace's values Secret is owned by its ServiceSet with blockOwnerDeletion, which the API server
// (OwnerReferencesPermissionEnforcement) admits only from whoever may update the ServiceSet's
// finalizers subresource.
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=servicesets/finalizers,verbs=update

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, workspace.Component+":", err)
		os.Exit(1)
	}
}

func run() error {
	common := bootstrapOptions()
	common.AddFlags(flag.CommandLine)
	opts := workspace.DefaultOptions()
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	if err := opts.Validate(); err != nil {
		return err
	}

	mgr, err := bootstrap.NewManager(common, scheme.New())
	if err != nil {
		return err
	}
	ctx := bootstrap.SetupSignalHandler()
	if err := workspace.Setup(ctx, mgr, opts); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// bootstrapOptions are the shared options as this binary sets them before the flags: its client-side
// rate limit and its cache of ServiceSets.
func bootstrapOptions() *bootstrap.Options {
	common := bootstrap.NewOptions(workspace.Component)
	// Sized to the workers: an admission is a handful of requests, each worker makes dozens a second,
	// and the API server's priority and fairness protects it from a burst of admissions.
	common.KubeAPIQPS, common.KubeAPIBurst = 500, 1000
	// ServiceSets are cached with a digest in place of their inline values (release.StripServiceSetValues).
	common.CacheByObject = release.CacheByObject()
	return common
}
