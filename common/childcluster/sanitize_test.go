package childcluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/kubeconfig"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/common/testing/tlsrecorder"
)

// clientCertFiles writes a self-signed client certificate and key to dir.
func clientCertFiles(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "operator"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// writeAsTenant writes the kubeconfig Secret `<cd>-kubeconfig` as tenant does: through its own
// client, with the rights of its namespaced Role.
func writeAsTenant(ctx context.Context, t *testing.T, tenant client.Client, ns, cd string, data []byte) {
	t.Helper()
	name := k0rdentv1beta1.KubeconfigSecretName(cd)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{testenv.ClusterNameLabel: cd}},
		Type: testenv.KubeconfigSecretType, Data: map[string][]byte{k0rdentv1beta1.KubeconfigSecretKey: data}}
	if err := tenant.Create(ctx, s); err != nil {
		t.Fatalf("the tenant writes Secret %s/%s: %v", ns, name, err)
	}
}

// TestTenantKubeconfigCannotSteerTheOperator: a tenant who may write Secrets in its own namespace
// writes `<cd>-kubeconfig` aimed at a server it controls, with each field that would make the
// component read a file of its host (its own ServiceAccount token above all), run a command, act as
// someone else, use a proxy, skip TLS verification or talk plain HTTP. The connect is refused with
// KubeconfigInvalid naming the field, and the tenant's server sees no connection at all. The controls
// show that the server does record what reaches it.
func TestTenantKubeconfigCannotSteerTheOperator(t *testing.T) {
	ctx := context.Background()
	ns := "tenant-kubeconfig"
	tenant, err := mgmt.Tenant(ctx, ns, "tenant-a", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "get", "update", "delete"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := tlsrecorder.New(t)
	dir := t.TempDir()
	// The operator's own token, as a file on its host (in a pod:
	// /var/run/secrets/kubernetes.io/serviceaccount/token).
	const operatorToken = "operator-serviceaccount-token-4f1d"
	tokenFile := filepath.Join(dir, "token")
	caFile := filepath.Join(dir, "ca.crt")
	marker := filepath.Join(dir, "exec-ran")
	execScript := filepath.Join(dir, "exec.sh")
	certFile, keyFile := clientCertFiles(t, dir)
	for path, content := range map[string]string{
		tokenFile: operatorToken,
		caFile:    string(rec.CAPEM()),
		execScript: "#!/bin/sh\ntouch " + marker + "\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\"," +
			"\"kind\":\"ExecCredential\",\"status\":{\"token\":\"" + operatorToken + "\"}}'\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o700); err != nil {
			t.Fatal(err)
		}
	}

	// base aims at the recorder with inline data only.
	base := func() *clientcmdapi.Config {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: rec.URL(), CertificateAuthorityData: rec.CAPEM()}
		cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{}
		cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
		cfg.CurrentContext = "x"
		return cfg
	}
	cases := []struct {
		cd, field string
		mutate    func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)
	}{
		{"token-file", "user.tokenFile", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.TokenFile = tokenFile }},
		{"exec", "user.exec", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Exec = &clientcmdapi.ExecConfig{Command: execScript, APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		}},
		{"auth-provider", "user.auth-provider", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{"id-token": operatorToken, "client-id": "x", "idp-issuer-url": rec.URL()}}
		}},
		{"client-cert-file", "user.client-certificate", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.ClientCertificate, u.ClientKey = certFile, keyFile
		}},
		{"client-key-file", "user.client-key", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.ClientKey = keyFile
			pemCert, _ := os.ReadFile(certFile)
			u.ClientCertificateData = pemCert
		}},
		{"ca-file", "cluster.certificate-authority", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.CertificateAuthority, c.CertificateAuthorityData = caFile, nil
		}},
		{"impersonate", "user.as", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token, u.Impersonate = "t", "system:admin" }},
		{"impersonate-groups", "user.as-groups", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Token, u.ImpersonateGroups = "t", []string{"system:masters"}
		}},
		{"proxy", "cluster.proxy-url", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.Server, c.ProxyURL = "https://127.0.0.1:1", "http://"+rec.Addr()
		}},
		{"insecure", "cluster.insecure-skip-tls-verify", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.InsecureSkipTLSVerify, c.CertificateAuthorityData, u.Token = true, nil, "t"
		}},
		{"plain-http", "cluster.server", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.Server, c.CertificateAuthorityData, u.Token = "http://"+rec.Addr(), nil, "t"
		}},
	}
	c := newCache(t, Options{})
	for _, tc := range cases {
		t.Run(tc.cd, func(t *testing.T) {
			cfg := base()
			tc.mutate(cfg.Clusters["c"], cfg.AuthInfos["u"])
			data, err := clientcmd.Write(*cfg)
			if err != nil {
				t.Fatal(err)
			}
			writeAsTenant(ctx, t, tenant, ns, tc.cd, data)
			before, _ := rec.Seen()
			_, err = c.Get(ctx, ns, tc.cd)
			if UnreachableReason(err) != ReasonKubeconfigInvalid || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("want KubeconfigInvalid naming %s, got %v", tc.field, err)
			}
			if err != nil && (strings.Contains(err.Error(), operatorToken) || strings.Contains(err.Error(), dir)) {
				t.Errorf("the error quotes the kubeconfig: %v", err)
			}
			if conns, auth := rec.Seen(); conns != before {
				t.Fatalf("the tenant's server was reached: %d connections, credentials %q", conns-before, auth)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the kubeconfig's exec command ran on the operator's host")
			}
		})
	}

	// Controls: what is accepted does reach the recorder, so the assertions above can fail.
	t.Run("control: inline token", func(t *testing.T) {
		cfg := base()
		cfg.AuthInfos["u"].Token = "tenant-token"
		data, _ := clientcmd.Write(*cfg)
		writeAsTenant(ctx, t, tenant, ns, "inline", data)
		_, before := rec.Seen()
		if _, err := c.Get(ctx, ns, "inline"); UnreachableReason(err) != ReasonUnauthorized {
			t.Fatalf("want Unauthorized from the recorder, got %v", err)
		}
		if _, auth := rec.Seen(); len(auth) == len(before) || auth[len(before)] != "Authorization: Bearer tenant-token" {
			t.Fatalf("the recorder did not see the inline token: %q", auth[len(before):])
		}
	})
	t.Run("control: insecure TLS with the flag", func(t *testing.T) {
		allowed := newCache(t, Options{Kubeconfig: kubeconfig.Policy{AllowInsecureTLS: true}})
		before, _ := rec.Seen()
		if _, err := allowed.Get(ctx, ns, "insecure"); UnreachableReason(err) != ReasonUnauthorized {
			t.Fatalf("with --%s: want Unauthorized from the recorder, got %v", kubeconfig.InsecureTLSFlag, err)
		}
		if after, _ := rec.Seen(); after == before {
			t.Fatal("with the flag the insecure kubeconfig did not reach the recorder")
		}
	})
}
