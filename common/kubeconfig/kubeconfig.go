// Package kubeconfig turns a kubeconfig read from a Secret into a client configuration without
// letting the Secret's author steer the operator's own host or identity. It is the one place where
// every component builds a client from a kubeconfig it did not write.
//
// A kubeconfig Secret (`<cd>-kubeconfig`, a Region's, an adopted cluster's) can be written by anyone
// who may write Secrets in its namespace, a tenant included. Used as it is, a kubeconfig runs a
// command on the operator's host (`exec`, `auth-provider`), reads the operator's files and sends them
// as credentials (`tokenFile` naming the component's own ServiceAccount token; `certificate-authority`,
// `client-certificate` and `client-key` paths), takes another identity (`as`, `as-groups`, `as-uid`,
// `as-user-extra`), sends the traffic through a proxy of the author's choosing (`proxy-url`), or talks
// plain HTTP. RESTConfig refuses all of those, naming the field and never its value, and accepts only
// inline data: an https server, inline CA data, a bearer token, client certificate and key data, or a
// user name and password. `insecure-skip-tls-verify` is refused unless the platform allows it
// (Policy.AllowInsecureTLS, the components' --insecure-kubeconfig-tls flag).
//
// Only the current context, its cluster and its user are read; everything else in the kubeconfig is
// ignored, and the client configuration is built from a copy that holds only the accepted fields, so
// a field client-go learns later is not honoured by accident.
package kubeconfig

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// InsecureTLSFlag is the command-line flag of Policy.AllowInsecureTLS.
const InsecureTLSFlag = "insecure-kubeconfig-tls"

// Policy says what a kubeconfig from a Secret may ask for beyond inline credentials.
type Policy struct {
	// AllowInsecureTLS accepts `insecure-skip-tls-verify: true`: the server's certificate is then not
	// verified, so anyone on the path to it can read the credentials. Off by default; for test
	// clusters with self-signed certificates only.
	AllowInsecureTLS bool
}

// BindFlags binds the policy to its command-line flag on fs.
func (p *Policy) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&p.AllowInsecureTLS, InsecureTLSFlag, p.AllowInsecureTLS,
		"Accept kubeconfig Secrets that set insecure-skip-tls-verify (the child's certificate is then not verified). "+
			"Off by default; for test clusters only.")
}

// RefusedError says that a kubeconfig sets a field the policy refuses. Its message names the field,
// never its value.
type RefusedError struct {
	// Field is the kubeconfig field, as it is spelled in a kubeconfig file (`user.tokenFile`).
	Field string
	// Why says what the field would have made the operator do.
	Why string
}

// Error implements error.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("the kubeconfig sets %s, which is refused: %s", e.Field, e.Why)
}

// IsRefused reports whether err, or an error it wraps, is a *RefusedError.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// Errors of kubeconfigs that cannot be read at all. They never quote the kubeconfig.
var (
	ErrUnparsable = errors.New("the kubeconfig cannot be parsed")
	ErrEmpty      = errors.New("the kubeconfig is empty")
	ErrNoContext  = errors.New("the kubeconfig is invalid: it needs a current context with a cluster server and credentials")
	ErrUnusable   = errors.New("the kubeconfig cannot be used")
)

// Reasons a field is refused.
const (
	whyHostFile  = "it names a file on the operator's host; only inline data are accepted"
	whyCommand   = "it runs a command or a plugin on the operator's host; only inline credentials are accepted"
	whyIdentity  = "it makes the operator act as another identity"
	whyProxy     = "it sends the operator's traffic through a proxy the kubeconfig chooses"
	whyInsecure  = "the server's certificate would not be verified; the platform allows it only with --" + InsecureTLSFlag
	whyPlainHTTP = "the server must be an https:// URL with a host"
	whyUserinfo  = "the server URL must not carry a user name or password"
)

// RESTConfig parses data as a kubeconfig, checks its current context against p and returns a client
// configuration built from the accepted fields only. Its errors name the refused field (a
// *RefusedError) or say why the kubeconfig cannot be used; they never quote the kubeconfig.
func RESTConfig(data []byte, p Policy) (*rest.Config, error) {
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, ErrUnparsable
	}
	safe, err := Sanitize(raw, p)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*safe, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, ErrEmpty
		}
		if clientcmd.IsConfigurationInvalid(err) {
			return nil, ErrNoContext
		}
		return nil, ErrUnusable
	}
	return cfg, nil
}

// Sanitize checks the current context of raw against p and returns a kubeconfig that holds that
// context alone, with only the accepted fields of its cluster and user.
func Sanitize(raw *clientcmdapi.Config, p Policy) (*clientcmdapi.Config, error) {
	if raw == nil || (len(raw.Clusters) == 0 && len(raw.AuthInfos) == 0 && len(raw.Contexts) == 0) {
		return nil, ErrEmpty
	}
	ctx := raw.Contexts[raw.CurrentContext]
	if raw.CurrentContext == "" || ctx == nil {
		return nil, ErrNoContext
	}
	cluster := raw.Clusters[ctx.Cluster]
	if cluster == nil {
		return nil, ErrNoContext
	}
	if err := checkCluster(cluster, p); err != nil {
		return nil, err
	}
	user := raw.AuthInfos[ctx.AuthInfo]
	if user == nil {
		if ctx.AuthInfo != "" {
			return nil, ErrNoContext // the context names a user the kubeconfig does not have
		}
		user = clientcmdapi.NewAuthInfo() // no credentials: the child decides what an anonymous request may do
	}
	if err := checkUser(user); err != nil {
		return nil, err
	}

	out := clientcmdapi.NewConfig()
	out.Clusters["cluster"] = &clientcmdapi.Cluster{
		Server:                   cluster.Server,
		TLSServerName:            cluster.TLSServerName,
		CertificateAuthorityData: cluster.CertificateAuthorityData,
		InsecureSkipTLSVerify:    cluster.InsecureSkipTLSVerify,
		DisableCompression:       cluster.DisableCompression,
	}
	out.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: user.ClientCertificateData,
		ClientKeyData:         user.ClientKeyData,
		Token:                 user.Token,
		Username:              user.Username,
		Password:              user.Password,
	}
	out.Contexts["context"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	out.CurrentContext = "context"
	return out, nil
}

// checkCluster refuses the cluster fields that reach beyond inline data.
func checkCluster(c *clientcmdapi.Cluster, p Policy) error {
	u, err := url.Parse(c.Server)
	switch {
	case err != nil || !strings.EqualFold(u.Scheme, "https") || u.Host == "":
		return &RefusedError{Field: "cluster.server", Why: whyPlainHTTP}
	case u.User != nil:
		return &RefusedError{Field: "cluster.server", Why: whyUserinfo}
	case c.CertificateAuthority != "":
		return &RefusedError{Field: "cluster.certificate-authority", Why: whyHostFile}
	case c.ProxyURL != "":
		return &RefusedError{Field: "cluster.proxy-url", Why: whyProxy}
	case c.InsecureSkipTLSVerify && !p.AllowInsecureTLS:
		return &RefusedError{Field: "cluster.insecure-skip-tls-verify", Why: whyInsecure}
	}
	return nil
}

// checkUser refuses the user fields that reach beyond inline credentials.
func checkUser(a *clientcmdapi.AuthInfo) error {
	switch {
	case a.TokenFile != "":
		return &RefusedError{Field: "user.tokenFile", Why: whyHostFile}
	case a.ClientCertificate != "":
		return &RefusedError{Field: "user.client-certificate", Why: whyHostFile}
	case a.ClientKey != "":
		return &RefusedError{Field: "user.client-key", Why: whyHostFile}
	case a.Exec != nil:
		return &RefusedError{Field: "user.exec", Why: whyCommand}
	case a.AuthProvider != nil:
		return &RefusedError{Field: "user.auth-provider", Why: whyCommand}
	case a.Impersonate != "":
		return &RefusedError{Field: "user.as", Why: whyIdentity}
	case a.ImpersonateUID != "":
		return &RefusedError{Field: "user.as-uid", Why: whyIdentity}
	case len(a.ImpersonateGroups) > 0:
		return &RefusedError{Field: "user.as-groups", Why: whyIdentity}
	case len(a.ImpersonateUserExtra) > 0:
		return &RefusedError{Field: "user.as-user-extra", Why: whyIdentity}
	}
	return nil
}
