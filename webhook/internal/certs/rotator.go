// Package certs gives the webhook its own TLS: a CA and a serving certificate kept in one Secret,
// the CA bundle injected into the webhook's Validating- and MutatingWebhookConfiguration, rotation
// before expiry, and a readiness check that dials the webhook's own port.
//
// Every replica runs the same loop and needs no leader: the Secret is written with optimistic
// concurrency, so when two replicas renew at once one write wins and the other adopts it on its next
// pass. A CA is renewed in steps so that the API server never meets a certificate it cannot verify:
// first the new CA joins the bundle (next to the old one, until that expires) and the bundle is
// injected; the replica that sees the configurations carry a bundle first records the time in the
// Secret (annotation InjectedAnnotation), and no replica serves a certificate from a CA new in the
// bundle until InjectionGrace has passed since then. So a second replica that finds the bundle
// already injected by the first one waits just as the first does, and the API servers have time to
// pick up the configurations. The serving certificate is served from memory
// (tls.Config.GetCertificate), so nothing waits for a kubelet to refresh a mounted volume.
//
// Ready is a readiness check: it fails until a pass has injected the bundle into both
// configurations, and whenever the last pass could not.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;update,resourceNames=exalsius-operator-webhook-tls
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;update,resourceNames=exalsius-operator-webhook
package certs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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
	// InjectedAnnotation on the Secret records which bundle the configurations carry and since when:
	// "<first 16 hex digits of the bundle's SHA-256>/<RFC 3339 time>".
	InjectedAnnotation = "webhook.exalsius.ai/ca-bundle-injected"
)

// Defaults of the rotation.
const (
	DefaultCAValidity      = 10 * 365 * 24 * time.Hour
	DefaultServingValidity = 365 * 24 * time.Hour
	DefaultCheckInterval   = time.Minute
	// DefaultInjectionGrace is how long a bundle must have been injected before a certificate from a
	// CA new in it is served: the API servers' webhook configuration informers need a moment.
	DefaultInjectionGrace = 30 * time.Second
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
	// InjectionGrace is how long a bundle must have been in the configurations (as recorded in the
	// Secret) before any replica serves a certificate from a CA that is new in it.
	InjectionGrace time.Duration
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
	// injectErr is the last pass's injection result; nil before the first pass stands for "not yet".
	injectErr atomic.Pointer[error]
	mu        sync.Mutex // serialises Sync
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
	if opts.InjectionGrace < 0 {
		opts.InjectionGrace = 0
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
	_, injectErr := r.inject(ctx, data[CABundleKey])
	r.injectErr.Store(&injectErr)
	settled := r.opts.WebhookConfigName == ""
	if injectErr == nil && r.opts.WebhookConfigName != "" {
		since, err := r.injectedSince(ctx, secret, now)
		if err != nil {
			return err
		}
		data = secret.Data
		settled = !now.Before(since.Add(r.opts.InjectionGrace))
	}

	serving, _ := parseKeyPair(data[ServingCert], data[ServingKey])
	if !servingValid(serving, ca, r.opts.DNSNames, r.opts.IPAddresses, now) {
		// A new serving certificate waits for a later pass until the configurations have carried the
		// bundle for InjectionGrace (recorded in the Secret, so every replica waits alike), so that
		// the API servers have seen the CA before they meet a certificate from it; unless the
		// current certificate has expired or there is none.
		stillServable := serving != nil && now.Before(serving.cert.NotAfter)
		if stillServable && !settled {
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

// injectedSince returns since when the configurations carry the Secret's bundle, recording now in
// the Secret when they did not carry it before (or nothing was recorded).
func (r *Rotator) injectedSince(ctx context.Context, secret *corev1.Secret, now time.Time) (time.Time, error) {
	sum := sha256.Sum256(secret.Data[CABundleKey])
	id := hex.EncodeToString(sum[:8])
	if rec, at, ok := strings.Cut(secret.Annotations[InjectedAnnotation], "/"); ok && rec == id {
		if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
			return t, nil
		}
	}
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[InjectedAnnotation] = id + "/" + now.UTC().Format(time.RFC3339Nano)
	if err := r.opts.Client.Update(ctx, secret); err != nil {
		return time.Time{}, fmt.Errorf("recording the injection in Secret %s: %w", r.opts.Secret, err)
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	return now, nil
}

// Ready is a readiness check (healthz.Checker): it fails before the first pass and while the last
// pass could not inject the CA bundle into the webhook configurations, so that a replica whose
// certificate the API server may not trust takes no traffic.
func (r *Rotator) Ready(*http.Request) error {
	p := r.injectErr.Load()
	if p == nil {
		return errors.New("the CA bundle has not been injected yet")
	}
	return *p
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
// change any. A configuration that does not exist (yet) is an error: the API server would not trust
// the webhook; the next pass tries again.
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
	} else {
		errs = append(errs, fmt.Errorf("ValidatingWebhookConfiguration %s: %w", r.opts.WebhookConfigName, err))
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
	} else {
		errs = append(errs, fmt.Errorf("MutatingWebhookConfiguration %s: %w", r.opts.WebhookConfigName, err))
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
