package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestServingAddress starts a management and a child server on another address than 127.0.0.1 (a
// loopback alias here; the local world's node uses its bridge address) and checks that both listen
// there and that the management certificate is valid for the in-cluster names pods use. (The
// kubernetes Service's endpoint on a non-loopback address is exercised by e2e/suites/chartnode.)
func TestServingAddress(t *testing.T) {
	const addr = "127.0.0.7"
	t.Setenv(EnvServingAddress, addr)
	ctx := context.Background()
	m, err := StartManagement()
	if err != nil {
		t.Fatalf("StartManagement: %v", err)
	}
	t.Cleanup(func() { _ = m.Stop() })
	u, err := url.Parse(m.Config.Host)
	if err != nil || u.Hostname() != addr {
		t.Fatalf("management host %q, want %s", m.Config.Host, addr)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(m.Config.CAData) {
		t.Fatal("no CA in the management config")
	}
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: pool, ServerName: "kubernetes.default.svc"})
	if err != nil {
		t.Fatalf("TLS as kubernetes.default.svc: %v", err)
	}
	leaf := conn.ConnectionState().PeerCertificates[0]
	_ = conn.Close()
	if err := leaf.VerifyHostname(KubernetesServiceIP); err != nil {
		t.Errorf("certificate not valid for the kubernetes Service IP: %v", err)
	}

	c, err := StartChild("serving")
	if err != nil {
		t.Fatalf("StartChild: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	cu, err := url.Parse(c.Config.Host)
	if err != nil || cu.Hostname() != addr {
		t.Fatalf("child host %q, want %s", c.Config.Host, addr)
	}
	var nss corev1.NamespaceList
	if err := c.Client.List(ctx, &nss); err != nil {
		t.Errorf("child client over %s: %v", addr, err)
	}
}

func TestServingAddressInvalid(t *testing.T) {
	t.Setenv(EnvServingAddress, "not-an-ip")
	if _, err := StartManagement(); err == nil {
		t.Fatal("StartManagement accepted a non-IP serving address")
	}
}
