// Package testenv starts real Kubernetes API servers for tests: one management server (kube-apiserver
// and etcd) with every CRD the project uses, and any number of separate child servers standing in for
// the clusters k0rdent provisions.
//
// The binaries come from KUBEBUILDER_ASSETS (`make tools` builds them; `hack/tools.sh assets` prints
// the directory). When they are missing every entry point fails with a message naming `make tools`;
// nothing is ever skipped.
//
// A package's tests share one management server through TestMain:
//
//	var mgmt *testenv.Management
//
//	func TestMain(m *testing.M) {
//		testenv.Main(m, func(m *testenv.Management) error {
//			mgmt = m
//			return nil
//		})
//	}
//
// Set TESTENV_VERBOSE=1 to see the output of the servers.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/scheme"
)

const (
	// EnvVerbose names the variable that, set to 1 or true, attaches the servers' output to the test's stdout/stderr.
	EnvVerbose = "TESTENV_VERBOSE"

	// KubeconfigSecretType is the type Cluster API gives kubeconfig Secrets.
	KubeconfigSecretType corev1.SecretType = "cluster.x-k8s.io/secret"
	// ClusterNameLabel labels a kubeconfig Secret with the name of its cluster.
	ClusterNameLabel = "cluster.x-k8s.io/cluster-name"

	// EnvK0rdentCRDs names a folder of k0rdent's real CRDs (KCM's own YAML files) that replaces the
	// project's k0rdent mirror on the management server. A relative path is taken from the
	// repository root.
	EnvK0rdentCRDs = "K0RDENT_CRDS"

	envAssets       = "KUBEBUILDER_ASSETS"
	envStartTimeout = "KUBEBUILDER_CONTROLPLANE_START_TIMEOUT"
	// shutdownWatchGraceFlag bounds how long a stopping kube-apiserver waits for open watches to drain;
	// without it, Stop waits for every watch stream (up to --request-timeout) and times out whenever a
	// client still watches the server.
	shutdownWatchGraceFlag = "shutdown-watch-termination-grace-period"
	shutdownWatchGrace     = "2s"
	// defaultStartTimeout is generous: the test machines are small and shared.
	defaultStartTimeout = 2 * time.Minute
)

// errAssets is the message every entry point returns when the binaries are missing.
const errAssets = "KUBEBUILDER_ASSETS is not set or lacks kube-apiserver/etcd: run `make tools` " +
	"(or export KUBEBUILDER_ASSETS=$(hack/tools.sh assets))"

// AssetsDir returns KUBEBUILDER_ASSETS after checking that it holds kube-apiserver and etcd.
func AssetsDir() (string, error) {
	dir := os.Getenv(envAssets)
	if dir == "" {
		return "", errors.New(errAssets)
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		st, err := os.Stat(filepath.Join(dir, bin))
		if err != nil || st.IsDir() || st.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("%s (%s has no executable %s)", errAssets, dir, bin)
		}
	}
	return dir, nil
}

// Option configures StartManagement.
type Option func(*options)

type options struct {
	webhook  *envtest.WebhookInstallOptions
	crdDirs  []string
	scheme   *k8sruntime.Scheme
	apiFlags map[string]string
	logDir   string
	noOwn    bool
}

// WithWebhook installs the given webhook configurations on the management server, rewritten to call
// a local webhook server. The test starts that server with the host, port and certificate directory
// envtest chose: Management.Env.WebhookInstallOptions.LocalServingHost, LocalServingPort and
// LocalServingCertDir.
func WithWebhook(o envtest.WebhookInstallOptions) Option {
	return func(opts *options) { opts.webhook = &o }
}

// WithCRDDirs installs the CRDs found in dirs in addition to the project's own and the k0rdent mirror.
func WithCRDDirs(dirs ...string) Option {
	return func(opts *options) { opts.crdDirs = append(opts.crdDirs, dirs...) }
}

// WithoutOwnCRDs leaves the project's CRDs (common/config/crd/bases) out, installing only the
// k0rdent mirror and WithCRDDirs: for a cluster on which the chart installs them, as on a user's.
func WithoutOwnCRDs() Option {
	return func(opts *options) { opts.noOwn = true }
}

// WithScheme replaces the scheme of the management client (the default is common/scheme.New()).
func WithScheme(s *k8sruntime.Scheme) Option {
	return func(opts *options) { opts.scheme = s }
}

// WithAPIServerFlag sets a kube-apiserver flag (without the leading dashes) on the management server.
func WithAPIServerFlag(name, value string) Option {
	return func(opts *options) {
		if opts.apiFlags == nil {
			opts.apiFlags = map[string]string{}
		}
		opts.apiFlags[name] = value
	}
}

// Management is a running management API server with every CRD of the project installed.
type Management struct {
	// Config reaches the server as a member of system:masters.
	Config *rest.Config
	// Client is a controller-runtime client for Config using Scheme.
	Client client.Client
	// Scheme holds every API group the project uses.
	Scheme *k8sruntime.Scheme
	// Env is the underlying envtest environment (webhook options, installed CRDs, AddUser).
	Env *envtest.Environment
	// Kubeconfig is an admin kubeconfig for the server.
	Kubeconfig []byte

	root      string
	closeLogs func() error
	stopOnce  sync.Once
	stopErr   error
}

// StartManagement starts kube-apiserver and etcd and installs the CRDs of common/config/crd/bases,
// Cluster API's Cluster (common/config/crd/capi) and, when present, the k0rdent mirror in
// common/config/crd/k0rdent (or KCM's own CRDs, see K0rdentCRDs).
func StartManagement(opts ...Option) (*Management, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	dirs, err := crdDirs()
	if err != nil {
		return nil, err
	}
	if o.noOwn {
		dirs = dirs[1:] // crdDirs lists the project's own first
	}
	dirs = append(dirs, o.crdDirs...)
	s := o.scheme
	if s == nil {
		s = scheme.New()
	}

	root, err := os.MkdirTemp("", "testenv-management-")
	if err != nil {
		return nil, fmt.Errorf("management: %w", err)
	}
	apiPath, etcdPath, err := makeServerDirs(root, assets, o.logDir)
	if err != nil {
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("management: %w", err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		ControlPlane: envtest.ControlPlane{
			APIServer: &envtest.APIServer{Path: apiPath, CertDir: filepath.Join(root, "apiserver")},
			Etcd:      &envtest.Etcd{Path: etcdPath, DataDir: filepath.Join(root, "etcd")},
		},
		CRDDirectoryPaths:     dirs,
		ErrorIfCRDPathMissing: true,
		Scheme:                s,
	}
	configureEnv(env)
	if addr, err := servingAddress(); err != nil {
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("management: %w", err)
	} else if addr != "" {
		api := env.ControlPlane.GetAPIServer()
		if err := listenOn(api, addr); err != nil {
			_ = os.RemoveAll(root)
			return nil, fmt.Errorf("management: %w", err)
		}
		if err := writeClusterServingCerts(api, api.CertDir, addr); err != nil {
			_ = os.RemoveAll(root)
			return nil, fmt.Errorf("management: serving certificates: %w", err)
		}
	}
	if o.webhook != nil {
		env.WebhookInstallOptions = *o.webhook
	}
	// Close open watches (controllers' informers) quickly on Stop instead of waiting for them.
	env.ControlPlane.GetAPIServer().Configure().Set(shutdownWatchGraceFlag, shutdownWatchGrace)
	for name, value := range o.apiFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}

	m := &Management{Scheme: s, Env: env, root: root}
	if o.logDir != "" {
		if m.closeLogs, err = serverLogs(env, o.logDir); err != nil {
			_ = os.RemoveAll(root)
			return nil, fmt.Errorf("management: %w", err)
		}
	}
	cfg, err := env.Start()
	if err != nil {
		_ = m.Stop()
		return nil, fmt.Errorf("starting the management API server: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		_ = m.Stop()
		return nil, fmt.Errorf("building the management client: %w", err)
	}
	m.Config, m.Client, m.Kubeconfig = cfg, c, env.KubeConfig
	return m, nil
}

// Stop stops the management server and removes its data. Stopping twice is harmless.
func (m *Management) Stop() error {
	if m == nil || m.Env == nil {
		return nil
	}
	m.stopOnce.Do(func() {
		m.stopErr = m.Env.Stop()
		if err := os.RemoveAll(m.root); err != nil {
			m.stopErr = errors.Join(m.stopErr, err)
		}
		if m.closeLogs != nil {
			m.stopErr = errors.Join(m.stopErr, m.closeLogs())
		}
	})
	return m.stopErr
}

// WriteKubeconfigSecret creates or updates the Secret "<cdName>-kubeconfig" in namespace, the way
// k0rdent (Cluster API) publishes a ClusterDeployment's kubeconfig: data key "value", type
// cluster.x-k8s.io/secret, label cluster.x-k8s.io/cluster-name=<cdName>. The namespace is created
// when missing.
func (m *Management) WriteKubeconfigSecret(ctx context.Context, namespace, cdName string, kubeconfig []byte) error {
	if namespace == "" || cdName == "" {
		return fmt.Errorf("WriteKubeconfigSecret: namespace (%q) and cdName (%q) must not be empty", namespace, cdName)
	}
	if err := ensureNamespace(ctx, m.Client, namespace); err != nil {
		return err
	}
	name := k0rdentv1beta1.KubeconfigSecretName(cdName)
	secret := &corev1.Secret{}
	err := m.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: namespace,
				Name:      name,
				Labels:    map[string]string{ClusterNameLabel: cdName},
			},
			Type: KubeconfigSecretType,
			Data: map[string][]byte{k0rdentv1beta1.KubeconfigSecretKey: kubeconfig},
		}
		if err := m.Client.Create(ctx, secret); err != nil {
			return fmt.Errorf("creating Secret %s/%s: %w", namespace, name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
	}
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	secret.Labels[ClusterNameLabel] = cdName
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data[k0rdentv1beta1.KubeconfigSecretKey] = kubeconfig
	if err := m.Client.Update(ctx, secret); err != nil {
		return fmt.Errorf("updating Secret %s/%s: %w", namespace, name, err)
	}
	return nil
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// configureEnv applies the settings shared by management and child servers: quiet output unless
// TESTENV_VERBOSE is set, and a start timeout suited to small shared machines.
func configureEnv(env *envtest.Environment) {
	env.AttachControlPlaneOutput = verbose()
	if os.Getenv(envStartTimeout) == "" {
		env.ControlPlaneStartTimeout = defaultStartTimeout
	}
}

func verbose() bool {
	switch os.Getenv(EnvVerbose) {
	case "1", "true", "TRUE", "True", "yes":
		return true
	}
	return false
}

// K0rdentCRDs returns the folder of k0rdent's real CRDs the management server installs instead of
// the mirror's (K0RDENT_CRDS, made absolute), or "" when the mirror's are used.
func K0rdentCRDs() (string, error) {
	dir := os.Getenv(EnvK0rdentCRDs)
	if dir == "" {
		return "", nil
	}
	if !filepath.IsAbs(dir) {
		root, err := commonDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(filepath.Dir(root), dir)
	}
	if !isDir(dir) {
		return "", fmt.Errorf("%s=%s: not a folder of CRD files", EnvK0rdentCRDs, os.Getenv(EnvK0rdentCRDs))
	}
	return dir, nil
}

// RealK0rdentCRDs reports whether the management server runs with k0rdent's real CRDs (K0RDENT_CRDS).
func RealK0rdentCRDs() bool { return os.Getenv(EnvK0rdentCRDs) != "" }

// MirrorOnly skips a test that checks a behaviour of the project's k0rdent mirror CRDs that KCM's
// real CRDs do not have, when the management server runs with the real ones (K0RDENT_CRDS).
func MirrorOnly(t testing.TB, behaviour string) {
	t.Helper()
	if os.Getenv(EnvK0rdentCRDs) != "" {
		t.Skipf("mirror-only behaviour (%s): skipped under k0rdent's real CRDs (%s=%s)", behaviour, EnvK0rdentCRDs, os.Getenv(EnvK0rdentCRDs))
	}
}

// crdDirs returns the project's CRD directory (required) and the k0rdent CRDs: the real ones of
// K0RDENT_CRDS when set, else the mirror's (when present).
func crdDirs() ([]string, error) {
	root, err := commonDir()
	if err != nil {
		return nil, err
	}
	// Cluster API's Cluster CRD comes with k0rdent on a real management cluster, whichever KCM CRDs
	// are installed, so it is installed with the mirror and with KCM's own CRDs alike.
	dirs := []string{filepath.Join(root, "config", "crd", "bases"), filepath.Join(root, "config", "crd", "capi")}
	real, err := K0rdentCRDs()
	if err != nil {
		return nil, err
	}
	if real != "" {
		return append(dirs, real), nil
	}
	mirror := filepath.Join(root, "config", "crd", "k0rdent")
	if st, err := os.Stat(mirror); err == nil && st.IsDir() {
		dirs = append(dirs, mirror)
	}
	return dirs, nil
}

// commonDir locates the common module: from this source file's path (works from any module's tests),
// else by walking up from the working directory (for builds with -trimpath).
func commonDir() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir := filepath.Join(filepath.Dir(file), "..", "..") // common/testing/testenv/testenv.go
		if isDir(filepath.Join(dir, "config", "crd", "bases")) {
			return dir, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("locating common/config/crd: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		for _, cand := range []string{dir, filepath.Join(dir, "common")} {
			if isDir(filepath.Join(cand, "config", "crd", "bases")) && isFile(filepath.Join(cand, "go.mod")) {
				return cand, nil
			}
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("cannot find common/config/crd/bases from the testenv source or from %s", wd)
		}
	}
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
