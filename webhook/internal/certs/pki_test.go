package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestServingCertificateChainsAndRenews(t *testing.T) {
	ca, err := newCA("test-ca", t0, 30*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"svc.ns.svc", "localhost"}
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	s, err := newServing(ca, names, ips, t0, 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !servingValid(s, ca, names, ips, t0.Add(time.Hour)) {
		t.Fatal("a fresh certificate is not valid")
	}
	if servingValid(s, ca, names, ips, t0.Add(2*time.Hour+time.Minute)) {
		t.Fatal("a certificate two thirds through its life is not due for renewal")
	}
	if servingValid(s, ca, append(names, "new.name"), ips, t0) {
		t.Fatal("a certificate without a wanted DNS name passes")
	}
	if servingValid(s, ca, names, []net.IP{net.ParseIP("10.0.0.1")}, t0) {
		t.Fatal("a certificate without a wanted IP passes")
	}
	other, _ := newCA("other", t0, 30*time.Hour)
	if servingValid(s, other, names, ips, t0) {
		t.Fatal("a certificate from another CA passes")
	}
	// A serving certificate never outlives its CA.
	long, err := newServing(ca, names, ips, t0, 100*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !long.cert.NotAfter.Equal(ca.cert.NotAfter) {
		t.Fatalf("serving NotAfter %s is not capped at the CA's %s", long.cert.NotAfter, ca.cert.NotAfter)
	}
	// Round trip through PEM.
	back, err := parseKeyPair(s.certPEM, s.keyPEM)
	if err != nil || !back.cert.Equal(s.cert) {
		t.Fatalf("PEM round trip: %v", err)
	}
	if _, err := parseKeyPair(s.certPEM, ca.keyPEM); err == nil {
		t.Fatal("a certificate with another key parses")
	}
}

func TestBundleKeepsValidPreviousCAs(t *testing.T) {
	oldCA, _ := newCA("old", t0, 3*time.Hour)
	newer, _ := newCA("new", t0.Add(2*time.Hour), 3*time.Hour)
	bundle := buildBundle(newer.cert, []*x509.Certificate{oldCA.cert, oldCA.cert, newer.cert}, t0.Add(2*time.Hour))
	if got := parseCerts(bundle); len(got) != 2 || !got[0].Equal(newer.cert) || !got[1].Equal(oldCA.cert) {
		t.Fatalf("want the new CA then the old one once, got %d certificates", len(got))
	}
	bundle = buildBundle(newer.cert, parseCerts(bundle), t0.Add(4*time.Hour))
	if got := parseCerts(bundle); len(got) != 1 {
		t.Fatalf("an expired CA stays in the bundle: %d certificates", len(got))
	}
}

func TestTLSChecker(t *testing.T) {
	now := time.Now()
	ca, _ := newCA("ca", now, time.Hour)
	s, _ := newServing(ca, []string{"svc.ns.svc"}, []net.IP{net.ParseIP("127.0.0.1")}, now, 10*time.Minute)
	pair, err := tls.X509KeyPair(s.certPEM, s.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	var serve *tls.Certificate
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if serve == nil {
			return nil, errNoCert
		}
		return serve, nil
	}}
	srv.StartTLS()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	check := &TLSChecker{Addr: addr, ServerName: "svc.ns.svc", Roots: func() []byte { return ca.certPEM }}

	if err := check.Check(nil); err == nil {
		t.Fatal("ready without a certificate")
	}
	serve = &pair
	if err := check.Check(nil); err != nil {
		t.Fatalf("not ready with a valid certificate: %v", err)
	}
	check.Now = func() time.Time { return now.Add(11 * time.Minute) }
	if err := check.Check(nil); err == nil {
		t.Fatal("ready with an expired certificate")
	}
	check.Now = nil
	other, _ := newCA("other", now, time.Hour)
	check.Roots = func() []byte { return other.certPEM }
	if err := check.Check(nil); err == nil {
		t.Fatal("ready with a certificate the bundle does not trust")
	}
	check.Roots = func() []byte { return nil } // cert-manager without ca.crt: validity only
	if err := check.Check(nil); err != nil {
		t.Fatalf("not ready without roots: %v", err)
	}
	check.Addr = "127.0.0.1:1"
	if err := check.Check(nil); err == nil {
		t.Fatal("ready while nothing listens")
	}
}

var errNoCert = errors.New("no certificate")
