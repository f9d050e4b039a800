package kubeconfig

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// secretish is a value every refused field below carries, so that an error quoting a value shows.
const secretish = "s3cr3t-value-never-quoted"

// valid returns a kubeconfig with inline data only, which RESTConfig accepts.
func valid() *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://child.example:6443", CertificateAuthorityData: []byte("ca"), TLSServerName: "child"}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: secretish, ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key")}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	return cfg
}

func write(t testing.TB, cfg *clientcmdapi.Config) []byte {
	t.Helper()
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// refusedCases are the kubeconfigs RESTConfig must refuse, each with the field it must name.
func refusedCases() []struct {
	field  string
	mutate func(*clientcmdapi.Config)
} {
	cl := func(c *clientcmdapi.Config) *clientcmdapi.Cluster { return c.Clusters["c"] }
	us := func(c *clientcmdapi.Config) *clientcmdapi.AuthInfo { return c.AuthInfos["u"] }
	return []struct {
		field  string
		mutate func(*clientcmdapi.Config)
	}{
		{"user.tokenFile", func(c *clientcmdapi.Config) {
			us(c).TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token-" + secretish
		}},
		{"user.client-certificate", func(c *clientcmdapi.Config) { us(c).ClientCertificate = "/etc/" + secretish }},
		{"user.client-key", func(c *clientcmdapi.Config) { us(c).ClientKey = "/etc/" + secretish }},
		{"user.exec", func(c *clientcmdapi.Config) {
			us(c).Exec = &clientcmdapi.ExecConfig{Command: "/bin/" + secretish, APIVersion: "client.authentication.k8s.io/v1"}
		}},
		{"user.auth-provider", func(c *clientcmdapi.Config) {
			us(c).AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{"id-token": secretish}}
		}},
		{"user.as", func(c *clientcmdapi.Config) { us(c).Impersonate = "system:admin-" + secretish }},
		{"user.as-uid", func(c *clientcmdapi.Config) { us(c).ImpersonateUID = secretish }},
		{"user.as-groups", func(c *clientcmdapi.Config) { us(c).ImpersonateGroups = []string{"system:masters", secretish} }},
		{"user.as-user-extra", func(c *clientcmdapi.Config) { us(c).ImpersonateUserExtra = map[string][]string{"k": {secretish}} }},
		{"cluster.certificate-authority", func(c *clientcmdapi.Config) { cl(c).CertificateAuthority = "/etc/" + secretish }},
		{"cluster.proxy-url", func(c *clientcmdapi.Config) { cl(c).ProxyURL = "http://" + secretish + ":3128" }},
		{"cluster.insecure-skip-tls-verify", func(c *clientcmdapi.Config) {
			cl(c).InsecureSkipTLSVerify = true
			cl(c).CertificateAuthorityData = nil
		}},
		{"cluster.server", func(c *clientcmdapi.Config) { cl(c).Server = "http://" + secretish + ":6443" }},
		{"cluster.server", func(c *clientcmdapi.Config) { cl(c).Server = secretish + ":6443" }},
		{"cluster.server", func(c *clientcmdapi.Config) { cl(c).Server = "https://admin:" + secretish + "@child:6443" }},
		{"cluster.server", func(c *clientcmdapi.Config) { cl(c).Server = "unix:///var/run/" + secretish }},
		{"cluster.server", func(c *clientcmdapi.Config) { cl(c).Server = "https://" }},
	}
}

func TestRefusedFieldsAreNamedNeverQuoted(t *testing.T) {
	for _, tc := range refusedCases() {
		t.Run(tc.field, func(t *testing.T) {
			cfg := valid()
			tc.mutate(cfg)
			_, err := RESTConfig(write(t, cfg), Policy{})
			var r *RefusedError
			if !errors.As(err, &r) || r.Field != tc.field {
				t.Fatalf("want %s refused, got %v", tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.field) || strings.Contains(err.Error(), secretish) {
				t.Fatalf("the error must name %s and never quote a value: %q", tc.field, err)
			}
		})
	}
}

func TestInlineDataAccepted(t *testing.T) {
	cfg, err := RESTConfig(write(t, valid()), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://child.example:6443" || cfg.BearerToken != secretish || string(cfg.CAData) != "ca" ||
		string(cfg.CertData) != "cert" || string(cfg.KeyData) != "key" || cfg.ServerName != "child" {
		t.Fatalf("inline data not carried over: %+v", cfg)
	}
	// Basic authentication is inline too.
	basic := valid()
	basic.AuthInfos["u"] = &clientcmdapi.AuthInfo{Username: "admin", Password: secretish}
	cfg, err = RESTConfig(write(t, basic), Policy{})
	if err != nil || cfg.Username != "admin" || cfg.Password != secretish {
		t.Fatalf("basic auth: %v %+v", err, cfg)
	}
}

func TestInsecureTLSOnlyWithThePolicy(t *testing.T) {
	cfg := valid()
	cfg.Clusters["c"].InsecureSkipTLSVerify = true
	cfg.Clusters["c"].CertificateAuthorityData = nil
	if _, err := RESTConfig(write(t, cfg), Policy{}); !IsRefused(err) {
		t.Fatalf("insecure TLS without the policy: want refused, got %v", err)
	}
	rc, err := RESTConfig(write(t, cfg), Policy{AllowInsecureTLS: true})
	if err != nil || !rc.Insecure {
		t.Fatalf("insecure TLS with the policy: want accepted, got %v", err)
	}
}

// TestOnlyTheCurrentContextCounts: a refused field in a context that is not current is never read,
// and the returned configuration holds nothing from it.
func TestOnlyTheCurrentContextCounts(t *testing.T) {
	cfg := valid()
	cfg.Clusters["other"] = &clientcmdapi.Cluster{Server: "http://elsewhere", ProxyURL: "http://proxy"}
	cfg.AuthInfos["other"] = &clientcmdapi.AuthInfo{TokenFile: "/etc/token", Exec: &clientcmdapi.ExecConfig{Command: "x"}}
	cfg.Contexts["other"] = &clientcmdapi.Context{Cluster: "other", AuthInfo: "other"}
	rc, err := RESTConfig(write(t, cfg), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	assertNothingFromTheHost(t, rc)
}

func TestUnusableKubeconfigs(t *testing.T) {
	noCurrent := valid()
	noCurrent.CurrentContext = ""
	missingCluster := valid()
	missingCluster.Contexts["x"].Cluster = "gone"
	missingUser := valid()
	missingUser.Contexts["x"].AuthInfo = "gone"
	for name, tc := range map[string]struct {
		data []byte
		want error
	}{
		"garbage":         {[]byte("token: " + secretish + "\n{{{"), ErrUnparsable},
		"empty":           {nil, ErrEmpty},
		"no current":      {write(t, noCurrent), ErrNoContext},
		"missing cluster": {write(t, missingCluster), ErrNoContext},
		"missing user":    {write(t, missingUser), ErrNoContext},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := RESTConfig(tc.data, Policy{})
			if !errors.Is(err, tc.want) || strings.Contains(err.Error(), secretish) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
		})
	}
}

// assertNothingFromTheHost fails when a client configuration would read, run or proxy anything the
// kubeconfig named on the operator's host, or act as another identity.
func assertNothingFromTheHost(t testing.TB, rc *rest.Config) {
	t.Helper()
	switch {
	case rc.BearerTokenFile != "", rc.CAFile != "", rc.CertFile != "", rc.KeyFile != "":
		t.Fatalf("a file path reached the client configuration: %+v", rc.TLSClientConfig)
	case rc.ExecProvider != nil, rc.AuthProvider != nil, rc.AuthConfigPersister != nil:
		t.Fatal("a command or auth plugin reached the client configuration")
	case rc.Impersonate.UserName != "", rc.Impersonate.UID != "", len(rc.Impersonate.Groups) > 0, len(rc.Impersonate.Extra) > 0:
		t.Fatal("impersonation reached the client configuration")
	case rc.Proxy != nil:
		t.Fatal("a proxy reached the client configuration")
	case !strings.HasPrefix(strings.ToLower(rc.Host), "https://"):
		t.Fatalf("a server that is not https: %q", rc.Host)
	case rc.Insecure:
		t.Fatal("insecure TLS without the policy")
	}
}

// FuzzRESTConfig: on any input RESTConfig never panics, and whatever it accepts reads, runs and
// proxies nothing and acts as no one else.
func FuzzRESTConfig(f *testing.F) {
	f.Add(write(f, valid()))
	for _, tc := range refusedCases() {
		cfg := valid()
		tc.mutate(cfg)
		f.Add(write(f, cfg))
	}
	f.Add([]byte("apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n" +
		"clusters: [{name: c, cluster: {server: 'HTTPS://h'}}]\nusers: [{name: u, user: {token: t}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rc, err := RESTConfig(data, Policy{})
		if err != nil {
			return
		}
		assertNothingFromTheHost(t, rc)
	})
}
