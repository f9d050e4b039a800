package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// TLSChecker is a readiness check that dials the webhook's own port and verifies the certificate it
// serves: chained to the trusted bundle, valid now, and issued for ServerName. It fails while the
// webhook has no certificate, serves an expired one, or does not listen.
type TLSChecker struct {
	// Addr is the webhook's host:port; an empty or unspecified host dials loopback.
	Addr string
	// ServerName is the name the certificate must carry (the Service's DNS name, or an IP).
	ServerName string
	// Roots returns the CA bundle to verify against; when it returns nil (cert-manager without a
	// ca.crt) only the validity period is checked.
	Roots func() []byte
	// Timeout bounds the dial and handshake; 2s when zero.
	Timeout time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Check implements healthz.Checker.
func (c *TLSChecker) Check(*http.Request) error {
	addr, err := dialAddr(c.Addr)
	if err != nil {
		return err
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: true} //nolint:gosec // verified below
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", addr, cfg)
	if err != nil {
		return fmt.Errorf("dialing the webhook at %s: %w", addr, err)
	}
	defer func() { _ = conn.Close() }()
	peer := conn.ConnectionState().PeerCertificates
	if len(peer) == 0 {
		return errors.New("the webhook served no certificate")
	}
	leaf := peer[0]
	var roots []byte
	if c.Roots != nil {
		roots = c.Roots()
	}
	if len(roots) == 0 {
		t := now()
		if t.Before(leaf.NotBefore) || t.After(leaf.NotAfter) {
			return fmt.Errorf("the served certificate is valid from %s to %s only", leaf.NotBefore, leaf.NotAfter)
		}
		return nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(roots) {
		return errors.New("the CA bundle holds no certificate")
	}
	inter := x509.NewCertPool()
	for _, p := range peer[1:] {
		inter.AddCert(p)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: c.ServerName, Roots: pool, Intermediates: inter,
		CurrentTime: now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("the served certificate does not verify: %w", err)
	}
	return nil
}

func dialAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("webhook address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}
