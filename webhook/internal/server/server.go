// Package server wires the webhook: its flags, its HTTPS server (certificates from the rotator of
// internal/certs or from files cert-manager writes), the admission handlers and the readiness check.
// main.go only parses flags and starts the manager.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/webhook/internal/admission"
	"github.com/exalsius/exalsius-operator/webhook/internal/certs"
	wsvalidation "github.com/exalsius/exalsius-operator/webhook/internal/validation"

	corev1 "k8s.io/api/core/v1"
)

// Component is the component word: logger name, event reporter, metrics prefix and user agent.
const Component = "webhook"

// Certificate modes.
const (
	// CertModeSelf means the webhook keeps its own CA and serving certificate in a Secret and injects the
	// CA bundle into its webhook configurations.
	CertModeSelf = "self"
	// CertModeCertManager means cert-manager writes tls.crt, tls.key and ca.crt into --cert-dir and its
	// cainjector fills the caBundle; the webhook reloads the files when they change.
	CertModeCertManager = "cert-manager"
)

// Defaults of the flags.
const (
	DefaultPort              = 9443
	DefaultServiceName       = "exalsius-operator-webhook"
	DefaultServiceNamespace  = "exalsius-system"
	DefaultWebhookConfigName = "exalsius-operator-webhook"
	DefaultCertDir           = "/tmp/k8s-webhook-server/serving-certs"
)

// Options are the webhook's settings, besides the ones every binary shares (bootstrap.Options).
// DefaultOptions fills the defaults, BindFlags binds them to command-line flags, and Setup wires the
// webhook with them; main.go and the test suite use the same three.
type Options struct {
	Host              string
	Port              int
	CertDir           string
	CertMode          string
	CertSecretName    string
	ServiceName       string
	ServiceNamespace  string
	WebhookConfigName string
	ExtraDNSNames     string
	IPAddresses       string
	CABundleFile      string
	CAValidity        time.Duration
	CertValidity      time.Duration
	CertCheckInterval time.Duration
	InjectionGrace    time.Duration
	MaxReplicas       int
	// WorkspaceControllerUser is the workspace-controller's user name
	// (system:serviceaccount:<namespace>:<name>), the only one allowed to set a WorkspaceDeployment's
	// adoption annotations; empty leaves them unchecked. The chart sets it.
	WorkspaceControllerUser string
}

// DefaultOptions returns the defaults; the service namespace defaults to $POD_NAMESPACE when set.
func DefaultOptions() Options {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = DefaultServiceNamespace
	}
	return Options{
		Port:              DefaultPort,
		CertDir:           DefaultCertDir,
		CertMode:          CertModeSelf,
		CertSecretName:    certs.DefaultSecret,
		ServiceName:       DefaultServiceName,
		ServiceNamespace:  ns,
		WebhookConfigName: DefaultWebhookConfigName,
		CAValidity:        certs.DefaultCAValidity,
		CertValidity:      certs.DefaultServingValidity,
		CertCheckInterval: certs.DefaultCheckInterval,
		InjectionGrace:    certs.DefaultInjectionGrace,
		MaxReplicas:       wsvalidation.DefaultMaxReplicas,
	}
}

// BindFlags binds the options to flags on fs. The current values are the flags' defaults.
func (c *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Host, "host", c.Host, "Address the webhook server binds to; empty binds every interface.")
	fs.StringVar(&c.WorkspaceControllerUser, "workspace-controller-user", c.WorkspaceControllerUser,
		"User name of the workspace-controller (system:serviceaccount:<namespace>:<name>), the only one allowed to set a WorkspaceDeployment's adoption annotations; empty leaves them unchecked.")
	fs.IntVar(&c.Port, "port", c.Port, "Port the webhook server listens on.")
	fs.StringVar(&c.CertDir, "cert-dir", c.CertDir, "Directory with tls.crt, tls.key and ca.crt (--cert-mode=cert-manager).")
	fs.StringVar(&c.CertMode, "cert-mode", c.CertMode, "Where certificates come from: self (own CA in a Secret, rotated) or cert-manager (files in --cert-dir).")
	fs.StringVar(&c.CertSecretName, "cert-secret-name", c.CertSecretName, "Secret in --service-namespace holding the CA and serving certificate (--cert-mode=self).")
	fs.StringVar(&c.ServiceName, "service-name", c.ServiceName, "Service in front of the webhook; its DNS names go into the serving certificate.")
	fs.StringVar(&c.ServiceNamespace, "service-namespace", c.ServiceNamespace, "Namespace of the Service and the certificate Secret (default $POD_NAMESPACE).")
	fs.StringVar(&c.WebhookConfigName, "webhook-config-name", c.WebhookConfigName, "Name of the Validating- and MutatingWebhookConfiguration that receive the CA bundle; empty injects nothing.")
	fs.StringVar(&c.ExtraDNSNames, "cert-extra-dns-names", c.ExtraDNSNames, "Comma-separated extra DNS names for the serving certificate (for example localhost).")
	fs.StringVar(&c.IPAddresses, "cert-ip-addresses", c.IPAddresses, "Comma-separated IP addresses for the serving certificate (for webhook configurations that use a url such as https://127.0.0.1:9443).")
	fs.StringVar(&c.CABundleFile, "ca-bundle-file", c.CABundleFile, "File the CA bundle is written to whenever it changes (--cert-mode=self).")
	fs.DurationVar(&c.CAValidity, "ca-validity", c.CAValidity, "Lifetime of the self-managed CA; renewed after two thirds.")
	fs.DurationVar(&c.CertValidity, "cert-validity", c.CertValidity, "Lifetime of the self-managed serving certificate; renewed after two thirds.")
	fs.DurationVar(&c.CertCheckInterval, "cert-check-interval", c.CertCheckInterval, "How often certificates and the injected CA bundle are checked.")
	fs.DurationVar(&c.InjectionGrace, "ca-injection-grace", c.InjectionGrace, "How long a renewed CA bundle must have been in the webhook configurations before any replica serves a certificate from the new CA.")
	fs.IntVar(&c.MaxReplicas, "max-replicas", c.MaxReplicas, "Largest spec.resources.replicas a WorkspaceDeployment may ask for.")
}

// Validate reports every invalid flag.
func (c *Options) Validate() error {
	var errs []error
	if c.Port < 1 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port: %d is not a port", c.Port))
	}
	switch c.CertMode {
	case CertModeSelf:
		if msgs := validation.IsDNS1123Subdomain(c.CertSecretName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--cert-secret-name: %s", strings.Join(msgs, "; ")))
		}
		if c.CertValidity <= 0 || c.CAValidity <= 0 || c.CertValidity > c.CAValidity {
			errs = append(errs, fmt.Errorf("--cert-validity (%s) must be positive and at most --ca-validity (%s)", c.CertValidity, c.CAValidity))
		}
		if c.CertCheckInterval <= 0 {
			errs = append(errs, fmt.Errorf("--cert-check-interval: %s must be positive", c.CertCheckInterval))
		}
		if c.InjectionGrace < 0 {
			errs = append(errs, fmt.Errorf("--ca-injection-grace: %s must not be negative", c.InjectionGrace))
		}
	case CertModeCertManager:
		if c.CertDir == "" {
			errs = append(errs, errors.New("--cert-dir is required with --cert-mode=cert-manager"))
		}
	default:
		errs = append(errs, fmt.Errorf("--cert-mode: %q is not one of self, cert-manager", c.CertMode))
	}
	for flagName, v := range map[string]string{"--service-name": c.ServiceName, "--service-namespace": c.ServiceNamespace} {
		if msgs := validation.IsDNS1123Label(v); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s: %q: %s", flagName, v, strings.Join(msgs, "; ")))
		}
	}
	if _, err := c.ips(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxReplicas < 1 || c.MaxReplicas > 1<<20 {
		errs = append(errs, fmt.Errorf("--max-replicas: %d must be at least 1", c.MaxReplicas))
	}
	return errors.Join(errs...)
}

// DNSNames are the serving certificate's names: the Service's, then the extra ones.
func (c *Options) DNSNames() []string {
	svc, ns := c.ServiceName, c.ServiceNamespace
	names := []string{svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local", svc + "." + ns, svc}
	for _, n := range strings.Split(c.ExtraDNSNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

func (c *Options) ips() ([]net.IP, error) {
	var out []net.IP
	for _, s := range strings.Split(c.IPAddresses, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("--cert-ip-addresses: %q is not an IP address", s)
		}
		out = append(out, ip)
	}
	return out, nil
}

// Webhook is the wired webhook: the server to hand to the manager and, in self mode, the rotator.
type Webhook struct {
	Server  webhook.Server
	Rotator *certs.Rotator
	checker *certs.TLSChecker
}

// newWebhook builds the webhook server and, in self mode, the certificate rotator.
func newWebhook(c *Options) (*Webhook, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ips, _ := c.ips()
	w := &Webhook{}
	// HTTP/1.1 only, as on the metrics port: HTTP/2 on an endpoint reachable from the network is
	// exposed to the HTTP/2 Stream Cancellation and Rapid Reset attacks (CVE-2023-44487,
	// CVE-2023-39325), and the API server calls webhooks over HTTP/1.1 just as well.
	opts := webhook.Options{Host: c.Host, Port: c.Port, CertDir: c.CertDir,
		TLSOpts: []func(*tls.Config){DisableHTTP2, func(t *tls.Config) { t.MinVersion = tls.VersionTLS12 }}}
	serverName := c.DNSNames()[0]
	roots := func() []byte {
		b, err := os.ReadFile(filepath.Join(c.CertDir, "ca.crt"))
		if err != nil {
			return nil
		}
		return b
	}
	if c.CertMode == CertModeSelf {
		r, err := certs.New(certs.Options{
			Secret:            client.ObjectKey{Namespace: c.ServiceNamespace, Name: c.CertSecretName},
			WebhookConfigName: c.WebhookConfigName,
			DNSNames:          c.DNSNames(),
			IPAddresses:       ips,
			CAValidity:        c.CAValidity,
			ServingValidity:   c.CertValidity,
			CheckInterval:     c.CertCheckInterval,
			InjectionGrace:    c.InjectionGrace,
			CABundleFile:      c.CABundleFile,
			Log:               ctrl.Log.WithName("certs"),
		})
		if err != nil {
			return nil, err
		}
		w.Rotator = r
		opts.TLSOpts = append(opts.TLSOpts, func(t *tls.Config) { t.GetCertificate = r.GetCertificate })
		roots = r.CABundle
	}
	w.Server = webhook.NewServer(opts)
	w.checker = &certs.TLSChecker{Addr: net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), ServerName: serverName, Roots: roots}
	return w, nil
}

// Setup wires the webhook into mgr: it builds the webhook server (HTTP/1.1, TLS 1.2 or later) and,
// in self mode, the certificate rotator, adds both to mgr, registers the admission handlers and the
// readiness checks "webhook-tls" (and "webhook-ca-injection" in self mode), and warms the caches the
// handlers read. It returns the wired webhook (its readiness checker and rotator). ctx is unused
// today; it is there so that every component's Setup has the same shape.
func Setup(_ context.Context, mgr ctrl.Manager, opts Options) (*Webhook, error) {
	w, err := newWebhook(&opts)
	if err != nil {
		return nil, err
	}
	if err := w.setup(mgr, &opts); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Webhook) setup(mgr ctrl.Manager, c *Options) error {
	// The server is a runnable of its own (the manager starts webhook servers before the caches and
	// controllers), instead of the manager's default one.
	if err := mgr.Add(w.Server); err != nil {
		return err
	}
	if w.Rotator != nil {
		// The rotator reads one Secret and two webhook configurations by name: an uncached client,
		// so that no informer caches Secrets and RBAC can name the objects.
		direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return fmt.Errorf("building the certificate client: %w", err)
		}
		w.Rotator.SetClient(direct)
		if err := mgr.Add(w.Rotator); err != nil {
			return err
		}
	}
	admission.Register(w.Server, mgr.GetScheme(), admission.Options{
		Reader:     mgr.GetClient(),
		LiveReader: mgr.GetAPIReader(),
		Deployment: wsvalidation.DeploymentOptions{MaxReplicas: int32(c.MaxReplicas)},
		// The manager's client creates reviews directly (only reads go through its cache).
		Reviewer:       mgr.GetClient(),
		ControllerUser: c.WorkspaceControllerUser,
	})
	for _, obj := range []client.Object{&workspacesv1.WorkspaceClass{}, &corev1.Namespace{}, &workspacesv1.WorkspaceQuota{}} {
		if _, err := mgr.GetCache().GetInformer(context.Background(), obj); err != nil {
			return fmt.Errorf("starting the informer for %T: %w", obj, err)
		}
	}
	if err := mgr.AddReadyzCheck("webhook-tls", w.checker.Check); err != nil {
		return err
	}
	if w.Rotator != nil {
		// Not ready while the API server may not trust the served certificate.
		return mgr.AddReadyzCheck("webhook-ca-injection", w.Rotator.Ready)
	}
	return nil
}

// DisableHTTP2 restricts a TLS server to HTTP/1.1.
func DisableHTTP2(t *tls.Config) { t.NextProtos = []string{"http/1.1"} }

// Checker is the readiness check, for tests.
func (w *Webhook) Checker() *certs.TLSChecker { return w.checker }
