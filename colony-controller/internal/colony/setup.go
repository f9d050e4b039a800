package colony

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/exalsius/exalsius-operator/common/kubeconfig"
)

// Defaults of the colony-controller's options (DefaultOptions).
const (
	DefaultMaxConcurrentReconciles = 2
	DefaultRetryRefused            = 2 * time.Minute
)

// Options are the colony-controller's settings, besides the ones every binary shares
// (bootstrap.Options). DefaultOptions fills the defaults, BindFlags binds them to command-line flags,
// and Setup wires the controller with them; main.go and the test suite use the same three.
type Options struct {
	// MaxConcurrentReconciles is how many Colonies are reconciled in parallel
	// (--max-concurrent-reconciles, default 2).
	MaxConcurrentReconciles int
	// APIEndpointConfigMap writes kube-system/cp-api-endpoint on each ready child whose control plane
	// k0smotron hosts (--api-endpoint-configmap, default false).
	APIEndpointConfigMap bool
	// Kubeconfig is what a kubeconfig Secret may ask for beyond inline credentials
	// (--insecure-kubeconfig-tls, default off): the API-endpoint ConfigMap's client and the lookup
	// of regional clusters use it.
	Kubeconfig kubeconfig.Policy

	// The options below are not flags.

	// RetryRefused is the longest an entry whose ClusterDeployment the API server refused waits before
	// it is sent again (the retries start at 2s and double up to it). Default 2m.
	RetryRefused time.Duration
}

// DefaultOptions returns the defaults of every option.
func DefaultOptions() Options {
	return Options{MaxConcurrentReconciles: DefaultMaxConcurrentReconciles, RetryRefused: DefaultRetryRefused}
}

// BindFlags binds the options to flags on fs. The current values are the flags' defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", o.MaxConcurrentReconciles, "Colonies reconciled in parallel.")
	fs.BoolVar(&o.APIEndpointConfigMap, "api-endpoint-configmap", o.APIEndpointConfigMap,
		"Write kube-system/cp-api-endpoint ({host, port} of the k0smotron control plane Service) on each ready child, for Cilium without kube-proxy.")
	o.Kubeconfig.BindFlags(fs)
}

// Validate reports every invalid option, naming its flag.
func (o *Options) Validate() error {
	var errs []error
	if o.MaxConcurrentReconciles < 1 {
		errs = append(errs, fmt.Errorf("--max-concurrent-reconciles must be at least 1, got %d", o.MaxConcurrentReconciles))
	}
	if o.RetryRefused <= 0 {
		errs = append(errs, fmt.Errorf("options: RetryRefused must be positive, got %s (DefaultOptions sets it)", o.RetryRefused))
	}
	return errors.Join(errs...)
}

// Setup wires the colony-controller into mgr: the Colony controller with the manager's client, API
// reader and event recorder. ctx is unused today; it is there so that every component's Setup has
// the same shape.
func Setup(_ context.Context, mgr ctrl.Manager, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	r := NewReconciler(mgr)
	r.APIEndpointConfigMap = opts.APIEndpointConfigMap
	r.RetryRefused = opts.RetryRefused
	r.Kubeconfig = opts.Kubeconfig
	if err := r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}); err != nil {
		return fmt.Errorf("setting up the Colony controller: %w", err)
	}
	return nil
}
