// Command webhook serves the exalsius-operator admission webhooks: validation of WorkspaceClass,
// WorkspaceDeployment and Colony, and WorkspaceDeployment defaulting, over its own rotated TLS
// (or cert-manager's). See docs/WEBHOOK.md.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/webhook/internal/server"
)

// The metrics endpoint authenticates and authorizes its scrapers.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

func main() {
	opts := bootstrap.NewOptions("webhook")
	// Every replica serves admission requests: there is nothing to elect a leader for.
	opts.LeaderElect = false
	opts.AddFlags(flag.CommandLine)
	cfg := server.NewConfig()
	cfg.AddFlags(flag.CommandLine)
	flag.Parse()
	if err := run(opts, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "webhook:", err)
		os.Exit(1)
	}
}

func run(opts *bootstrap.Options, cfg *server.Config) error {
	wh, err := server.New(cfg)
	if err != nil {
		return err
	}
	mgr, err := bootstrap.NewManager(opts, scheme.New(), wh.ManagerOption)
	if err != nil {
		return err
	}
	if err := wh.Setup(mgr, cfg); err != nil {
		return err
	}
	return mgr.Start(bootstrap.SetupSignalHandler())
}
