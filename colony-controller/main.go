// Command colony-controller turns Colonies into k0rdent ClusterDeployments, keeps their status and
// one aggregated kubeconfig Secret per Colony, and tears them down when a Colony is deleted. It only
// wires flags to options and starts the manager; the behaviour lives in internal/colony. See
// docs/COLONY.md.
package main

import (
	"flag"
	"fmt"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/exalsius/exalsius-operator/colony-controller/internal/colony"
	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/common/scheme"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, colony.Component+":", err)
		os.Exit(1)
	}
}

func run() error {
	opts := bootstrap.NewOptions(colony.Component)
	opts.AddFlags(flag.CommandLine)
	maxConcurrent := flag.Int("max-concurrent-reconciles", 2, "Colonies reconciled in parallel.")
	apiEndpoint := flag.Bool("api-endpoint-configmap", false,
		"Write kube-system/cp-api-endpoint ({host, port} of the k0smotron control plane Service) on each ready child, for Cilium without kube-proxy.")
	flag.Parse()
	if *maxConcurrent < 1 {
		return fmt.Errorf("--max-concurrent-reconciles must be at least 1, got %d", *maxConcurrent)
	}

	mgr, err := bootstrap.NewManager(opts, scheme.New())
	if err != nil {
		return err
	}
	r := colony.NewReconciler(mgr)
	r.APIEndpointConfigMap = *apiEndpoint
	if err := r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: *maxConcurrent}); err != nil {
		return fmt.Errorf("setting up the Colony controller: %w", err)
	}
	return mgr.Start(bootstrap.SetupSignalHandler())
}
