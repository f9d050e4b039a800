// Package certs gives the webhook its own TLS: a CA and a serving certificate kept in one Secret,
// the CA bundle injected into the webhook's Validating- and MutatingWebhookConfiguration, rotation
// before expiry, and a readiness check that dials the webhook's own port.
//
// Every replica runs the same loop and needs no leader: the Secret is written with optimistic
// concurrency, so when two replicas renew at once one write wins and the other adopts it on its next
// pass. A CA is renewed in two passes so that the API server never meets a certificate it cannot
// verify: first the new CA joins the bundle (next to the old one, until that expires) and the bundle
// is injected; only on a later pass, after a successful injection, is a serving certificate issued by
// the new CA. The serving certificate is served from memory (tls.Config.GetCertificate), so nothing
// waits for a kubelet to refresh a mounted volume.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;update,resourceNames=exalsius-operator-webhook-tls
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;update,resourceNames=exalsius-operator-webhook
package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Secret data keys.
const (
	CACertKey     = "ca.crt"
	CAKeyKey      = "ca.key"
	CABundleKey   = "ca-bundle.crt"
	ServingCert   = "tls.crt"
	ServingKey    = "tls.key"
	DefaultSecret = "exalsius-operator-webhook-tls"
)

// Defaults of the rotation.
const (
	DefaultCAValidity      = 10 * 365 * 24 * time.Hour
	DefaultServingValidity = 365 * 24 * time.Hour
	DefaultCheckInterval   = time.Minute
)

// Options configure a Rotator.
type Options struct {
	// Client reads and writes the Secret and the webhook configurations; it should not be cached, so
	// that RBAC can name the objects (get and update by resourceNames, no list or watch).
	Client client.Client
	// Secret is where the CA and the serving certificate live.
	Secret client.ObjectKey
	// WebhookConfigName names both the Validating- and the MutatingWebhookConfiguration that receive
	// the CA bundle; empty injects nothing.
	WebhookConfigName string
	// DNSNames and IPAddresses are the serving certificate's subject alternative names. The first DNS
	// name is the one the readiness check verifies.
	DNSNames    []string
	IPAddresses []net.IP
	// CAValidity and ServingValidity are the certificates' lifetimes; each is renewed once two thirds
	// of it have passed.
	CAValidity, ServingValidity time.Duration
	// CheckInterval is how often the certificates and the injected bundle are checked.
	CheckInterval time.Duration
	// CABundleFile, when set, receives the CA bundle (for webhook configurations registered by hand).
	CABundleFile string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Log receives what the rotator does; never key material.
	Log logr.Logger
}

// Rotator keeps the webhook's certificates valid. It is a manager.Runnable that runs on every replica.
type Rotator struct {
	opts    Options
	serving atomic.Pointer[tls.Certificate]
	bundle  atomic.Pointer[[]byte]
	mu      sync.Mutex // serialises Sync
}

// New returns a Rotator with the defaults filled in.
func New(opts Options) (*Rotator, error) {
	if opts.Secret.Name == "" || opts.Secret.Namespace == "" {
		return nil, errors.New("certs: the Secret's namespace and name are required")
	}
	if len(opts.DNSNames) == 0 && len(opts.IPAddresses) == 0 {
		return nil, errors.New("certs: the serving certificate needs at least one DNS name or IP address")
	}
	if opts.CAValidity <= 0 {
		opts.CAValidity = DefaultCAValidity
	}
	if opts.ServingValidity <= 0 {
		opts.ServingValidity = DefaultServingValidity
	}
	if opts.ServingValidity > opts.CAValidity {
		return nil, fmt.Errorf("certs: the serving validity %s exceeds the CA validity %s", opts.ServingValidity, opts.CAValidity)
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Rotator{opts: opts}, nil
}

// SetClient sets the client when it was not known at New (it needs the manager's configuration).
func (r *Rotator) SetClient(c client.Client) { r.opts.Client = c }

// NeedLeaderElection is false: every replica serves, so every replica keeps its certificate current.
func (r *Rotator) NeedLeaderElection() bool { return false }

// Start syncs at once and then every CheckInterval until ctx ends. Failures are logged and retried;
// until the first success the webhook has no certificate and its readiness check fails.
func (r *Rotator) Start(ctx context.Context) error {
	retry := 200 * time.Millisecond
	for {
		wait := r.opts.CheckInterval
		if err := r.Sync(ctx); err != nil {
			r.opts.Log.Error(err, "syncing the webhook certificates")
			wait = min(retry, r.opts.CheckInterval)
			retry = min(2*retry, r.opts.CheckInterval)
		} else {
			retry = 200 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// GetCertificate serves the current certificate; use it as tls.Config.GetCertificate.
func (r *Rotator) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := r.serving.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("the webhook has no serving certificate yet")
}

// CABundle returns the PEM CA bundle clients should trust, nil before the first sync.
func (r *Rotator) CABundle() []byte {
	if b := r.bundle.Load(); b != nil {
		return *b
	}
	return nil
}

// Sync runs one pass: CA, bundle, injection, serving certificate, in that order.
func (r *Rotator) Sync(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opts.Client == nil {
		return errors.New("certs: no client")
	}
	now := r.opts.Now()
	secret, err := r.secret(ctx)
	if err != nil {
		return err
	}
	data := secret.Data
	ca, caErr := parseKeyPair(data[CACertKey], data[CAKeyKey])
	previous := parseCerts(data[CABundleKey])
	changed := false
	if caErr != nil || dueForRenewal(ca.cert, now) {
		if ca, err = newCA("exalsius-operator-webhook-ca", now, r.opts.CAValidity); err != nil {
			return err
		}
		data[CACertKey], data[CAKeyKey] = ca.certPEM, ca.keyPEM
		r.opts.Log.Info("issued a new webhook CA", "notAfter", ca.cert.NotAfter)
		changed = true
	}
	if bundle := buildBundle(ca.cert, previous, now); !bytes.Equal(bundle, data[CABundleKey]) {
		data[CABundleKey] = bundle
		changed = true
	}
	if changed {
		if err := r.opts.Client.Update(ctx, secret); err != nil {
			return fmt.Errorf("writing the CA to Secret %s: %w", r.opts.Secret, err)
		}
		data = secret.Data // Update decoded the server's answer into a new map
	}
	injected, injectErr := r.inject(ctx, data[CABundleKey])

	serving, _ := parseKeyPair(data[ServingCert], data[ServingKey])
	if !servingValid(serving, ca, r.opts.DNSNames, r.opts.IPAddresses, now) {
		// A new serving certificate waits for a later pass when the configurations did not carry the
		// bundle before this pass (a new CA was just injected, or injection failed), so that the API
		// server has seen the CA before it meets a certificate from it; unless the current
		// certificate has expired.
		stillServable := serving != nil && now.Before(serving.cert.NotAfter)
		if stillServable && (injectErr != nil || injected) {
			if err := r.load(data); err != nil {
				return err
			}
			return injectErr
		}
		if serving, err = newServing(ca, r.opts.DNSNames, r.opts.IPAddresses, now, r.opts.ServingValidity); err != nil {
			return err
		}
		data[ServingCert], data[ServingKey] = serving.certPEM, serving.keyPEM
		if err := r.opts.Client.Update(ctx, secret); err != nil {
			return fmt.Errorf("writing the serving certificate to Secret %s: %w", r.opts.Secret, err)
		}
		data = secret.Data
		r.opts.Log.Info("issued a new webhook serving certificate", "notAfter", serving.cert.NotAfter, "dnsNames", r.opts.DNSNames)
	}
	if err := r.load(data); err != nil {
		return err
	}
	return injectErr
}

// secret reads the Secret, creating it empty when it does not exist yet (the chart normally does).
func (r *Rotator) secret(ctx context.Context) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := r.opts.Client.Get(ctx, r.opts.Secret, secret)
	if apierrors.IsNotFound(err) {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.Secret.Namespace, Name: r.opts.Secret.Name,
				Labels: map[string]string{"app.kubernetes.io/component": "webhook", "app.kubernetes.io/part-of": "exalsius-operator"}},
			Type: corev1.SecretTypeOpaque,
		}
		if err = r.opts.Client.Create(ctx, secret); apierrors.IsAlreadyExists(err) {
			err = r.opts.Client.Get(ctx, r.opts.Secret, secret)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s: %w", r.opts.Secret, err)
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	return secret, nil
}

// load makes the Secret's serving certificate the one served and publishes the bundle.
func (r *Rotator) load(data map[string][]byte) error {
	pair, err := tls.X509KeyPair(data[ServingCert], data[ServingKey])
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	if pair.Leaf == nil && len(pair.Certificate) > 0 {
		pair.Leaf, _ = x509.ParseCertificate(pair.Certificate[0])
	}
	r.serving.Store(&pair)
	bundle := bytes.Clone(data[CABundleKey])
	old := r.bundle.Swap(&bundle)
	if r.opts.CABundleFile != "" && (old == nil || !bytes.Equal(*old, bundle)) {
		if err := writeFileAtomic(r.opts.CABundleFile, bundle); err != nil {
			return fmt.Errorf("writing the CA bundle to %s: %w", r.opts.CABundleFile, err)
		}
	}
	return nil
}

// inject writes the bundle into every webhook of both configurations and reports whether it had to
// change any. A configuration that does not exist yet is skipped; the next pass tries again.
func (r *Rotator) inject(ctx context.Context, bundle []byte) (bool, error) {
	if r.opts.WebhookConfigName == "" {
		return false, nil
	}
	updated := false
	key := client.ObjectKey{Name: r.opts.WebhookConfigName}
	var errs []error
	vwc := &admissionv1.ValidatingWebhookConfiguration{}
	if err := r.opts.Client.Get(ctx, key, vwc); err == nil {
		dirty := false
		for i := range vwc.Webhooks {
			if !bytes.Equal(vwc.Webhooks[i].ClientConfig.CABundle, bundle) {
				vwc.Webhooks[i].ClientConfig.CABundle, dirty = bundle, true
			}
		}
		if dirty {
			errs = append(errs, r.opts.Client.Update(ctx, vwc))
			updated = true
		}
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	mwc := &admissionv1.MutatingWebhookConfiguration{}
	if err := r.opts.Client.Get(ctx, key, mwc); err == nil {
		dirty := false
		for i := range mwc.Webhooks {
			if !bytes.Equal(mwc.Webhooks[i].ClientConfig.CABundle, bundle) {
				mwc.Webhooks[i].ClientConfig.CABundle, dirty = bundle, true
			}
		}
		if dirty {
			errs = append(errs, r.opts.Client.Update(ctx, mwc))
			updated = true
		}
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return updated, fmt.Errorf("injecting the CA bundle into %s: %w", r.opts.WebhookConfigName, err)
	}
	return updated, nil
}

func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ca-bundle-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
