package bootstrap

import (
	"context"
	"crypto/tls"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// NewManager validates opts, installs the component's logger as the controller-runtime and klog
// logger, and creates a manager with:
//   - the rest.Config from opts.RestConfig, or else from --kubeconfig / in-cluster (ctrl.GetConfig);
//   - a refusal to start when the API server is older than MinKubernetesVersion;
//   - metrics on --metrics-bind-address, over HTTPS behind TokenReview authentication and
//     SubjectAccessReview authorization unless --metrics-secure=false;
//   - /healthz and /readyz ping checks on --health-probe-bind-address;
//   - leader election on the Lease "<component>.exalsius.ai", released on cancel;
//   - a cache limited to --watch-namespace when set;
//   - the graceful shutdown timeout;
//   - a client whose status writes cut condition messages to conditions.MaxMessageBytes.
//
// Each mutate function may change the options before the manager is created (webhook server,
// extra cache settings, ...).
func NewManager(opts *Options, scheme *runtime.Scheme, mutate ...func(*ctrl.Options)) (ctrl.Manager, error) {
	if opts == nil {
		return nil, fmt.Errorf("bootstrap: nil options")
	}
	if scheme == nil {
		return nil, fmt.Errorf("bootstrap: nil scheme")
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("invalid options: %w", err)
	}
	logger, err := NewLogger(opts)
	if err != nil {
		return nil, err
	}
	ctrl.SetLogger(logger)
	klog.SetLogger(logger.WithName("klog"))

	cfg, err := restConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := checkServerVersion(cfg, minKubernetesVersion); err != nil {
		return nil, err
	}
	mo := managerOptions(opts, scheme)
	mo.Logger = logger
	for _, m := range mutate {
		if m != nil {
			m(&mo)
		}
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, fmt.Errorf("creating the %s manager: %w", opts.Component, err)
	}
	if mo.HealthProbeBindAddress != "0" && mo.HealthProbeBindAddress != "" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return nil, fmt.Errorf("adding the healthz check: %w", err)
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return nil, fmt.Errorf("adding the readyz check: %w", err)
		}
	}
	return mgr, nil
}

// SetupSignalHandler returns a context cancelled on SIGTERM or SIGINT (a second signal exits).
func SetupSignalHandler() context.Context {
	return ctrl.SetupSignalHandler()
}

func restConfig(opts *Options) (*rest.Config, error) {
	var cfg *rest.Config
	if opts.RestConfig != nil {
		cfg = rest.CopyConfig(opts.RestConfig)
	} else {
		c, err := ctrl.GetConfig()
		if err != nil {
			return nil, fmt.Errorf("loading the Kubernetes client configuration: %w", err)
		}
		cfg = c
	}
	// --kube-api-qps and --kube-api-burst decide the client-side limit. controller-runtime's loader
	// turns the limiter off (QPS -1, leaving the API server's priority and fairness alone in charge),
	// so a loaded configuration always takes the flags; a configuration handed in (tests) keeps a
	// limit it sets.
	if opts.RestConfig == nil || cfg.QPS == 0 {
		cfg.QPS = float32(opts.KubeAPIQPS)
	}
	if opts.RestConfig == nil || cfg.Burst == 0 {
		cfg.Burst = opts.KubeAPIBurst
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = UserAgent(opts.Component)
	}
	return cfg, nil
}

func managerOptions(opts *Options, scheme *runtime.Scheme) ctrl.Options {
	timeout := opts.GracefulShutdownTimeout
	mo := ctrl.Options{
		Scheme: scheme,
		Metrics: metricsserver.Options{
			BindAddress:   opts.MetricsBindAddress,
			SecureServing: opts.MetricsSecure,
			CertDir:       opts.MetricsCertDir,
		},
		HealthProbeBindAddress:        opts.HealthProbeBindAddress,
		PprofBindAddress:              opts.PprofBindAddress,
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              opts.LeaderElectionID(),
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &timeout,
		NewClient:                     newClient,
	}
	if opts.MetricsSecure {
		mo.Metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	if !opts.EnableHTTP2 {
		mo.Metrics.TLSOpts = append(mo.Metrics.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	// The managers' caches drop managedFields: no component reads them, and they are often the
	// larger part of a cached object (thousands of WorkspaceDeployments, each written by several
	// managers).
	mo.Cache.DefaultTransform = cache.TransformStripManagedFields()
	if len(opts.CacheByObject) > 0 {
		mo.Cache.ByObject = opts.CacheByObject
	}
	if nss := opts.WatchNamespaces(); len(nss) > 0 {
		mo.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range nss {
			mo.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return mo
}
