// Command webhook serves the exalsius-operator admission webhooks: validation of WorkspaceClass,
// WorkspaceDeployment and Colony, and WorkspaceDeployment defaulting, over its own rotated TLS
// (or cert-manager's). See docs/WEBHOOK.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/webhook/internal/server"
)

// The metrics endpoint authenticates and authorizes its scrapers.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

func main() {
	common := bootstrap.NewOptions(server.Component)
	// Every replica serves admission requests: there is nothing to elect a leader for.
	common.LeaderElect = false
	common.AddFlags(flag.CommandLine)
	opts := server.DefaultOptions()
	opts.BindFlags(flag.CommandLine)
	selfTest := flag.Bool("self-test", false, "Check the installation instead of serving (the chart's `helm test`): the --self-test-deployments are available in --service-namespace and the webhook denies an invalid WorkspaceClass in a dry run.")
	deployments := flag.String("self-test-deployments", "", "Comma-separated Deployments in --service-namespace that --self-test waits for.")
	selfTestTimeout := flag.Duration("self-test-timeout", 3*time.Minute, "How long --self-test waits for the Deployments.")
	flag.Parse()
	if *selfTest {
		if err := runSelfTest(opts.ServiceNamespace, *deployments, *selfTestTimeout); err != nil {
			fmt.Fprintln(os.Stderr, "webhook self-test:", err)
			os.Exit(1)
		}
		fmt.Println("webhook self-test: every component is available and the webhook admits and denies")
		return
	}
	if err := run(common, opts); err != nil {
		fmt.Fprintln(os.Stderr, server.Component+":", err)
		os.Exit(1)
	}
}

func run(common *bootstrap.Options, opts server.Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	mgr, err := bootstrap.NewManager(common, scheme.New())
	if err != nil {
		return err
	}
	ctx := bootstrap.SetupSignalHandler()
	if _, err := server.Setup(ctx, mgr, opts); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

func runSelfTest(namespace, deployments string, timeout time.Duration) error {
	rc, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	c, err := client.New(rc, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	var names []string
	for _, n := range strings.Split(deployments, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return server.SelfTest{Client: c, Namespace: namespace, Deployments: names, Timeout: timeout}.Run(context.Background())
}
