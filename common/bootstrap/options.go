// Package bootstrap starts a controller-runtime manager the same way in every exalsius-operator
// binary: the same flags, zap logging named after the component, HTTPS metrics behind Kubernetes
// authentication and authorization, health probes, one leader-election lease per component and an
// optional watch namespace.
//
// A component's main.go does:
//
//	opts := bootstrap.NewOptions("workspace-controller")
//	opts.AddFlags(flag.CommandLine)
//	flag.Parse()
//	mgr, err := bootstrap.NewManager(opts, scheme.New())
//	...
//	err = mgr.Start(bootstrap.SetupSignalHandler())
package bootstrap

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Log formats accepted by --log-format.
const (
	LogFormatJSON    = "json"
	LogFormatConsole = "console"
)

// Defaults of the flags.
const (
	DefaultMetricsBindAddress      = ":8443"
	DefaultHealthProbeBindAddress  = ":8081"
	DefaultGracefulShutdownTimeout = 25 * time.Second
	DefaultKubeAPIQPS              = 50
	DefaultKubeAPIBurst            = 100
	// LeaderElectionDomain is appended to the component word to form the leader-election lease name.
	LeaderElectionDomain = "exalsius.ai"
)

// Options are the settings every binary shares. NewOptions fills the defaults; AddFlags binds them to
// command-line flags.
type Options struct {
	// Component is the component word (workspace-controller, webhook, ...): the logger name, the
	// leader-election lease "<component>.exalsius.ai" and the metrics prefix.
	Component string

	// MetricsBindAddress is where /metrics is served; "0" disables the metrics server.
	MetricsBindAddress string
	// MetricsSecure serves metrics over HTTPS behind Kubernetes authentication (TokenReview) and
	// authorization (SubjectAccessReview). Turning it off serves plain, unauthenticated HTTP.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for the metrics server; empty means a self-signed
	// certificate generated at start.
	MetricsCertDir string
	// EnableHTTP2 allows HTTP/2 on the metrics server. Off by default (HTTP/2 rapid reset and stream
	// cancellation attacks).
	EnableHTTP2 bool
	// HealthProbeBindAddress is where /healthz and /readyz are served; "0" disables them.
	HealthProbeBindAddress string
	// PprofBindAddress is where Go's profiler (net/http/pprof) is served, plain HTTP without
	// authentication; "" or "0" disables it (the default). For profiling on a trusted network only.
	PprofBindAddress string

	// LeaderElect turns leader election on, so that only one replica reconciles at a time.
	LeaderElect bool
	// LeaderElectionNamespace is the namespace of the lease; empty means the pod's own namespace.
	LeaderElectionNamespace string

	// WatchNamespace limits the cache of namespaced objects to these comma-separated namespaces;
	// empty watches all namespaces. Cluster-scoped objects are always watched.
	WatchNamespace string

	// LogFormat is json or console; empty means console with Development and json otherwise.
	LogFormat string
	// LogLevel is debug, info, warn or error, or a number N for logr verbosity V(N).
	LogLevel string
	// Development turns on development logging (console, stack traces on warnings, no sampling).
	Development bool
	// LogWriter receives the log output; nil means standard error. Not a flag (tests set it).
	LogWriter io.Writer

	// GracefulShutdownTimeout bounds how long runnables get to stop after the signal.
	GracefulShutdownTimeout time.Duration
	// KubeAPIQPS and KubeAPIBurst bound the client's request rate to the API server.
	KubeAPIQPS   float64
	KubeAPIBurst int

	// RestConfig is used instead of the in-cluster or kubeconfig configuration when set (tests).
	RestConfig *rest.Config
	// CacheByObject configures the cache per kind (not a flag), for a component's transforms that keep
	// less of an object than the API server holds. A kind's Transform replaces the default one, which
	// drops managedFields: it should drop them too.
	CacheByObject map[client.Object]cache.ByObject
}

// NewOptions returns the defaults for a component.
func NewOptions(component string) *Options {
	return &Options{
		Component:               component,
		MetricsBindAddress:      DefaultMetricsBindAddress,
		MetricsSecure:           true,
		HealthProbeBindAddress:  DefaultHealthProbeBindAddress,
		LeaderElect:             true,
		LogLevel:                "info",
		GracefulShutdownTimeout: DefaultGracefulShutdownTimeout,
		KubeAPIQPS:              DefaultKubeAPIQPS,
		KubeAPIBurst:            DefaultKubeAPIBurst,
	}
}

// AddFlags binds the options to flags on fs. The current values are the defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress,
		`Address the metrics endpoint binds to (HTTPS by default); "0" disables it.`)
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure,
		"Serve metrics over HTTPS with Kubernetes authentication and authorization. False serves plain HTTP.")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir,
		"Directory with tls.crt and tls.key for the metrics server; empty generates a self-signed certificate.")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", o.EnableHTTP2,
		"Allow HTTP/2 on the metrics server (off by default because of HTTP/2 stream attacks).")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress,
		`Address the /healthz and /readyz probes bind to; "0" disables them.`)
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", o.PprofBindAddress,
		`Address Go's profiler (/debug/pprof) binds to, plain HTTP without authentication; empty or "0" disables it.`)
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Elect a leader so that only one replica is active at a time.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace,
		"Namespace of the leader-election Lease; empty means the pod's namespace.")
	fs.StringVar(&o.WatchNamespace, "watch-namespace", o.WatchNamespace,
		"Comma-separated namespaces whose objects are watched; empty watches all namespaces.")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat,
		"Log format: json or console. Empty means console with --development and json otherwise.")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel,
		"Log level: debug, info, warn, error, or a number N for verbosity V(N).")
	fs.BoolVar(&o.Development, "development", o.Development,
		"Development logging: console format, debug level, stack traces on warnings, no sampling.")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", o.GracefulShutdownTimeout,
		"How long controllers get to finish after a termination signal.")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Queries per second to the Kubernetes API server.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of queries to the Kubernetes API server.")
}

// UserAgent is the user agent a component sends to every API server it talks to, the management
// cluster's and the child clusters': "exalsius-<component>".
func UserAgent(component string) string {
	return "exalsius-" + component
}

// LeaderElectionID is the name of the component's leader-election Lease: "<component>.exalsius.ai".
func (o *Options) LeaderElectionID() string {
	return o.Component + "." + LeaderElectionDomain
}

// WatchNamespaces returns the namespaces of WatchNamespace, or nil for all namespaces.
func (o *Options) WatchNamespaces() []string {
	var out []string
	for _, ns := range strings.Split(o.WatchNamespace, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// Validate reports every invalid option, naming its flag.
func (o *Options) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(o.Component); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("component %q: %s", o.Component, strings.Join(msgs, "; ")))
	}
	for _, ns := range o.WatchNamespaces() {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--watch-namespace: %q is not a namespace name: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	if ns := o.LeaderElectionNamespace; ns != "" {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--leader-election-namespace: %q is not a namespace name: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	switch o.LogFormat {
	case "", LogFormatJSON, LogFormatConsole:
	default:
		errs = append(errs, fmt.Errorf("--log-format: %q is not one of json, console", o.LogFormat))
	}
	if _, err := parseLevel(o.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("--log-level: %w", err))
	}
	if o.GracefulShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("--graceful-shutdown-timeout: %s is negative", o.GracefulShutdownTimeout))
	}
	if o.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps: %v must be positive", o.KubeAPIQPS))
	}
	if o.KubeAPIBurst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-burst: %d must be positive", o.KubeAPIBurst))
	}
	return errors.Join(errs...)
}
