// Command colony-controller turns Colonies into k0rdent ClusterDeployments, keeps their status and
// one aggregated kubeconfig Secret per Colony, and tears them down when a Colony is deleted. It only
// parses flags into options and starts the manager; colony.Setup wires the controller, and the
// behaviour lives in internal/colony. See docs/COLONY.md.
package main

import (
	"flag"
	"fmt"
	"os"

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
	common := bootstrap.NewOptions(colony.Component)
	common.AddFlags(flag.CommandLine)
	opts := colony.DefaultOptions()
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
	if err := colony.Setup(ctx, mgr, opts); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
