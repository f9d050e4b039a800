// Command inventory-collector watches the child clusters of every Colony through their kubeconfig
// Secrets and publishes each child's GPU inventory on the Colony's status.gpuInventory, with
// Prometheus gauges. Replicas may split the clusters between them (--shard-count, --shard-index).
// It only parses flags into options and starts the manager; inventory.Setup wires the controller.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/inventory-collector/internal/inventory"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", inventory.Component, err)
		os.Exit(1)
	}
}

func run() error {
	common := bootstrap.NewOptions(inventory.Component)
	common.AddFlags(flag.CommandLine)
	opts := inventory.DefaultOptions()
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	if err := opts.Validate(); err != nil {
		return err
	}
	shard, err := opts.Shard()
	if err != nil {
		return err
	}

	mgr, err := bootstrap.NewManager(common, scheme.New(), inventory.ManagerOption(shard))
	if err != nil {
		return err
	}
	ctx := bootstrap.SetupSignalHandler()
	if err := inventory.Setup(ctx, mgr, opts); err != nil {
		return err
	}
	// The manager's logger is already named after the component.
	mgr.GetLogger().Info("starting", "shardIndex", shard.Index, "shardCount", shard.Count)
	return mgr.Start(ctx)
}
