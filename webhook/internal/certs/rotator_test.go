package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

var mgmt *testenv.Management

func TestMain(m *testing.M) {
	testenv.Main(m, func(mg *testenv.Management) error {
		mgmt = mg
		return nil
	})
}

// allowServer serves an allow-everything admission webhook over TLS with the rotator's certificate.
func allowServer(t *testing.T, r *Rotator) string {
	t.Helper()
	allow := &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})}
	mux := http.NewServeMux()
	mux.Handle("/allow", allow)
	// A plain listener: httptest would add its own certificate, which Go prefers over GetCertificate
	// for clients that send no server name (the API server dialling an IP address).
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// installConfigs registers a validating and a mutating configuration, by URL, for ConfigMaps in
// namespaces labelled rotation-test=<name>, with no caBundle: the rotator must inject it.
func installConfigs(t *testing.T, name, addr string) {
	t.Helper()
	url := "https://" + addr + "/allow"
	fail, none := admissionv1.Fail, admissionv1.SideEffectClassNone
	rules := []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
		Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"rotation-test": name}}
	timeout := int32(5)
	vwc := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionv1.ValidatingWebhook{{Name: "v." + name + ".exalsius.ai", ClientConfig: admissionv1.WebhookClientConfig{URL: &url},
			Rules: rules, FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, NamespaceSelector: sel, TimeoutSeconds: &timeout}}}
	mwc := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionv1.MutatingWebhook{{Name: "m." + name + ".exalsius.ai", ClientConfig: admissionv1.WebhookClientConfig{URL: &url},
			Rules: rules, FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, NamespaceSelector: sel, TimeoutSeconds: &timeout}}}
	ctx := context.Background()
	for _, obj := range []client.Object{vwc, mwc,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rotation-test": name}}}} {
		if err := mgmt.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

func newRotator(t *testing.T, name string, ca, serving time.Duration) *Rotator {
	t.Helper()
	r, err := New(Options{
		Client:            mgmt.Client,
		Secret:            client.ObjectKey{Namespace: name, Name: DefaultSecret},
		WebhookConfigName: name,
		DNSNames:          []string{"exalsius-operator-webhook." + name + ".svc"},
		IPAddresses:       []net.IP{net.ParseIP("127.0.0.1")},
		CAValidity:        ca,
		ServingValidity:   serving,
		CheckInterval:     100 * time.Millisecond,
		CABundleFile:      t.TempDir() + "/ca.crt",
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// served dials addr and returns the leaf certificate it serves.
func served(addr string) (*x509.Certificate, error) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // inspected only
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// injected returns the caBundles of both configurations, the validating one first.
func injected(t *testing.T, name string) ([]byte, []byte) {
	t.Helper()
	ctx := context.Background()
	vwc := &admissionv1.ValidatingWebhookConfiguration{}
	mwc := &admissionv1.MutatingWebhookConfiguration{}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Name: name}, vwc); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Name: name}, mwc); err != nil {
		t.Fatal(err)
	}
	return vwc.Webhooks[0].ClientConfig.CABundle, mwc.Webhooks[0].ClientConfig.CABundle
}

func verifies(leaf *x509.Certificate, bundle []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return fmt.Errorf("empty bundle")
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// TestRotation runs the rotator with lifetimes of seconds while the API server keeps calling the
// webhook: the served certificate changes, the CA changes, the injected bundle follows, and not one
// admission call fails on the way. A certificate is renewed at two thirds of its life: a serving
// lifetime of 12 s leaves 4 s for a renewal pass to come on a loaded machine (3 s, 1 s of slack, was
// seen to expire before the pass under two parallel `make test` runs).
func TestRotation(t *testing.T) {
	const name = "rotation"
	r := newRotator(t, name, 36*time.Second, 12*time.Second)
	// Half a second between the pass that injects a new CA and the one that serves a certificate
	// from it: time for the API server to see the new bundle on a busy machine.
	r.opts.CheckInterval = 500 * time.Millisecond
	r.opts.InjectionGrace = 500 * time.Millisecond
	addr := allowServer(t, r)
	installConfigs(t, name, addr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Start(ctx) }()
	t.Cleanup(cancel)

	// The first certificate has no predecessor to keep serving while the API server learns the new
	// bundle: wait until an admission call goes through before counting.
	bootstrapDeadline := time.Now().Add(time.Minute)
	for {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: name, GenerateName: "bootstrap-"}}
		if err := mgmt.Client.Create(context.Background(), cm); err == nil {
			break
		} else if time.Now().After(bootstrapDeadline) {
			t.Fatalf("the webhook never admitted a request: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	serials, cas := map[string]bool{}, map[string]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; len(serials) < 4 || len(cas) < 2; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("saw %d serving certificates and %d CAs before the deadline; want 4 and 2", len(serials), len(cas))
		}
		leaf, err := served(addr)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		serials[leaf.SerialNumber.String()] = true
		vb, mb := injected(t, name)
		for _, c := range parseCerts(append(vb, mb...)) {
			cas[c.SerialNumber.String()] = true
		}
		// Every admission call goes through the webhook, verified with the injected bundle.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: fmt.Sprintf("cm-%d", i)}}
		if err := mgmt.Client.Create(context.Background(), cm); err != nil {
			t.Fatalf("an admission call failed during rotation (serving %s): %v", leaf.SerialNumber, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Once the rotator settles (one more pass, with the loop stopped), both configurations carry
	// the bundle, it trusts what is served, and the file and the Secret agree with it.
	cancel()
	<-done
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	vb, mb := injected(t, name)
	if !bytes.Equal(vb, r.CABundle()) || !bytes.Equal(mb, r.CABundle()) {
		t.Fatal("the configurations do not carry the current bundle")
	}
	leaf, err := served(addr)
	if err != nil {
		t.Fatal(err)
	}
	bundle := r.CABundle()
	if err := verifies(leaf, bundle); err != nil {
		t.Fatalf("the bundle does not trust the served certificate: %v", err)
	}
	file, err := os.ReadFile(r.opts.CABundleFile)
	if err != nil || !bytes.Equal(file, bundle) {
		t.Fatalf("the CA bundle file is not current: %v", err)
	}
	secret := &corev1.Secret{}
	if err := mgmt.Client.Get(context.Background(), r.opts.Secret, secret); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(secret.Data[CABundleKey], bundle) {
		t.Fatal("the Secret's bundle differs from the served one")
	}
}

// TestReplicasAgree: two rotators on one Secret (two replicas) end up serving one CA, and the first
// creates the Secret when it is missing.
func TestReplicasAgree(t *testing.T) {
	const name = "replicas"
	installConfigs(t, name, "127.0.0.1:1")
	a := newRotator(t, name, time.Hour, 10*time.Minute)
	b := newRotator(t, name, time.Hour, 10*time.Minute)
	ctx := context.Background()
	if _, err := a.GetCertificate(nil); err == nil {
		t.Fatal("a certificate before the first sync")
	}
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ca, _ := a.GetCertificate(nil)
	cb, _ := b.GetCertificate(nil)
	if !bytes.Equal(ca.Certificate[0], cb.Certificate[0]) || !bytes.Equal(a.CABundle(), b.CABundle()) {
		t.Fatal("the replicas serve different certificates")
	}
	// A second pass with nothing due changes nothing.
	before := &corev1.Secret{}
	if err := mgmt.Client.Get(ctx, a.opts.Secret, before); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	after := &corev1.Secret{}
	if err := mgmt.Client.Get(ctx, a.opts.Secret, after); err != nil {
		t.Fatal(err)
	}
	if before.ResourceVersion != after.ResourceVersion {
		t.Fatal("a pass with nothing due rewrote the Secret")
	}
}

// clock is a settable time source shared by rotators.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// TestReplicasWaitForTheInjectionOfANewCA: when one replica renews the CA and injects the new bundle,
// the other replica finds the configurations already carrying it; it must still not serve a
// certificate from the new CA until the injection has been in place for InjectionGrace, because the
// API servers may not have picked the configurations up yet.
func TestReplicasWaitForTheInjectionOfANewCA(t *testing.T) {
	const name = "newca"
	installConfigs(t, name, "127.0.0.1:1")
	clk := &clock{now: time.Now()}
	rot := func() *Rotator {
		r := newRotator(t, name, 3*time.Hour, 3*time.Hour)
		r.opts.Now = clk.Now
		r.opts.InjectionGrace = time.Minute
		return r
	}
	a, b := rot(), rot()
	ctx := context.Background()
	for _, r := range []*Rotator{a, b} {
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	first, _ := a.GetCertificate(nil)
	issuer := func(r *Rotator) string {
		c, err := r.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%x", c.Leaf.AuthorityKeyId)
	}
	if first == nil || first.Leaf == nil {
		t.Fatal("no certificate after the first pass")
	}
	oldIssuer := issuer(a)

	// Two thirds of the CA's life: a renews the CA and injects the bundle with both CAs.
	clk.now = clk.now.Add(2*time.Hour + time.Minute)
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	vb, _ := injected(t, name)
	if len(parseCerts(vb)) != 2 {
		t.Fatalf("the injected bundle should hold the old and the new CA, holds %d", len(parseCerts(vb)))
	}
	// b finds the bundle injected already; both keep serving the old CA's certificate.
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for n, r := range map[string]*Rotator{"a": a, "b": b} {
		if got := issuer(r); got != oldIssuer {
			t.Errorf("replica %s serves a certificate from the new CA before the injection grace passed", n)
		}
	}
	// Once the grace has passed, the first replica to sync issues from the new CA and the other
	// adopts that certificate.
	clk.now = clk.now.Add(time.Minute + time.Second)
	for _, r := range []*Rotator{b, a} {
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if issuer(a) == oldIssuer || issuer(a) != issuer(b) {
		t.Errorf("after the grace the replicas should serve one certificate from the new CA")
	}
	ca, _ := a.GetCertificate(nil)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(vb)
	if _, err := ca.Leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: clk.now}); err != nil {
		t.Errorf("the served certificate is not trusted by the injected bundle: %v", err)
	}
}

// TestNotReadyWhileInjectionFails: the readiness check fails before the first pass and while the
// webhook configurations cannot receive the bundle (here: they do not exist), and passes once they do.
func TestNotReadyWhileInjectionFails(t *testing.T) {
	const name = "noinject"
	if err := mgmt.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	r := newRotator(t, name, time.Hour, 10*time.Minute)
	if err := r.Ready(nil); err == nil {
		t.Fatal("ready before the first pass")
	}
	if err := r.Sync(context.Background()); err == nil {
		t.Fatal("a pass without webhook configurations reported success")
	}
	if _, err := r.GetCertificate(nil); err != nil {
		t.Fatalf("no certificate to serve after the first pass: %v", err)
	}
	if err := r.Ready(nil); err == nil {
		t.Fatal("ready although the CA bundle could not be injected")
	}
	ctx := context.Background()
	installConfigs(t, name, "127.0.0.1:1")
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Ready(nil); err != nil {
		t.Fatalf("not ready after a successful injection: %v", err)
	}
}
