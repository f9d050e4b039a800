package suites

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// The suites run against a target: the local world (default) or, given E2E_KUBECONFIG, a real
// management cluster with k0rdent and the operator installed. Tests that need the local world (its
// processes, the simulator's node shapes, its timing hooks) call localOnly and are skipped there.
const (
	// envKubeconfig points at a real management cluster's kubeconfig.
	envKubeconfig = "E2E_KUBECONFIG"
	// envClusterTemplate and envCredential name the ClusterTemplate and Credential the suites use on a
	// real cluster; they are copied from envFixturesNamespace (default kcm-system) into each test
	// namespace.
	envClusterTemplate   = "E2E_CLUSTER_TEMPLATE"
	envCredential        = "E2E_CREDENTIAL"
	envFixturesNamespace = "E2E_FIXTURES_NAMESPACE"
	// envClusterConfig is a JSON or YAML file with the spec.config of every ClusterDeployment the
	// suites create on a real cluster.
	envClusterConfig = "E2E_CLUSTER_CONFIG"
	// envClusterTimeout and envWorkspaceTimeout override the wait budgets (Go durations).
	envClusterTimeout   = "E2E_CLUSTER_TIMEOUT"
	envWorkspaceTimeout = "E2E_WORKSPACE_TIMEOUT"
)

// target is what the suites need from a management cluster.
type target interface {
	// Client and Config reach the management cluster as an administrator.
	Client() client.Client
	Config() *rest.Config
	// Kubeconfig is the path of the administrator's kubeconfig (for kubectl).
	Kubeconfig() string
	// Child returns the child cluster of a ClusterDeployment once it is reachable, else nil.
	Child(ctx context.Context, ns, cd string) (*childCluster, error)
	// Fixtures makes a namespace hold a ready ClusterTemplate and Credential and returns their names.
	Fixtures(ctx context.Context, ns string) (template, credential string, err error)
	// ClusterConfig returns the spec.config of a ClusterDeployment: the simulator's node pools in the
	// local world, E2E_CLUSTER_CONFIG on a real cluster.
	ClusterConfig(cfg w.ClusterConfig) (*apiextensionsv1.JSON, error)
	// DumpLogs writes what helps after a failure.
	DumpLogs(out io.Writer, lines int)
}

// tgt is the target of this run.
var tgt target

// childCluster is a child cluster the suites look at.
type childCluster struct {
	Name string
	// KubeconfigPath is an administrator's kubeconfig file of the child.
	KubeconfigPath string
	client         client.Client
	local          *w.ChildCluster
}

// Client returns an administrator's client of the child.
func (c *childCluster) Client() client.Client { return c.client }

// onRealCluster reports whether the suites run against E2E_KUBECONFIG.
func onRealCluster() bool { return os.Getenv(envKubeconfig) != "" }

// localOnly skips a test that needs the local world.
func localOnly(t *testing.T, why string) {
	t.Helper()
	if onRealCluster() {
		t.Skipf("local-only (%s): skipped against %s=%s", why, envKubeconfig, os.Getenv(envKubeconfig))
	}
}

// durationEnv reads a duration from the environment, def when unset.
func durationEnv(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q is not a positive duration", name, v)
	}
	return d, nil
}

// durationEnvAllowZero reads a duration (zero when unset).
func durationEnvAllowZero(name string) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q is not a duration", name, v)
	}
	return d, nil
}

// localTarget is the local world.
type localTarget struct{}

func (localTarget) Client() client.Client { return world.Client }
func (localTarget) Config() *rest.Config  { return world.World.Management.Config }
func (localTarget) Kubeconfig() string    { return world.World.AdminKubeconfig }
func (localTarget) DumpLogs(out io.Writer, lines int) {
	world.DumpLogs(out, lines)
}
func (localTarget) Child(_ context.Context, ns, cd string) (*childCluster, error) {
	c := world.World.Child(k0rdentsim.ChildName(ns, cd))
	if c == nil {
		return nil, nil
	}
	return &childCluster{Name: c.Name, KubeconfigPath: c.KubeconfigPath, client: c.Client(), local: c}, nil
}
func (localTarget) Fixtures(ctx context.Context, ns string) (string, string, error) {
	return k0rdentsim.ClusterTemplateName, k0rdentsim.CredentialName, k0rdentsim.EnsureClusterFixtures(ctx, world.Client, ns)
}
func (localTarget) ClusterConfig(cfg w.ClusterConfig) (*apiextensionsv1.JSON, error) {
	b, err := jsonMarshal(cfg)
	return &apiextensionsv1.JSON{Raw: b}, err
}

// realTarget is a real management cluster with k0rdent and the operator.
type realTarget struct {
	cfg        *rest.Config
	c          client.Client
	kubeconfig string
	dir        string
}

func newRealTarget(path string) (*realTarget, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envKubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	for _, name := range []string{envClusterTemplate, envCredential, envClusterConfig} {
		if os.Getenv(name) == "" {
			return nil, fmt.Errorf("%s is set: %s is required as well (see docs/LOCAL_WORLD.md)", envKubeconfig, name)
		}
	}
	dir, err := os.MkdirTemp("", "e2e-real-")
	if err != nil {
		return nil, err
	}
	return &realTarget{cfg: cfg, c: c, kubeconfig: path, dir: dir}, nil
}

func (r *realTarget) Client() client.Client { return r.c }
func (r *realTarget) Config() *rest.Config  { return r.cfg }
func (r *realTarget) Kubeconfig() string    { return r.kubeconfig }
func (r *realTarget) DumpLogs(out io.Writer, _ int) {
	// Nothing follows this line: a write error leaves nothing else to skip.
	_, _ = fmt.Fprintln(out, "(a real management cluster: read the components' logs with kubectl logs)")
}

// Child reads the ClusterDeployment's kubeconfig Secret, as the operator does.
func (r *realTarget) Child(ctx context.Context, ns, cd string) (*childCluster, error) {
	var s corev1.Secret
	if err := r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: k0rdentv1beta1.KubeconfigSecretName(cd)}, &s); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	kc := s.Data[k0rdentv1beta1.KubeconfigSecretKey]
	path := filepath.Join(r.dir, ns+"-"+cd+".kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	return &childCluster{Name: ns + "-" + cd, KubeconfigPath: path, client: c}, nil
}

// Fixtures copies the ClusterTemplate and Credential named by E2E_CLUSTER_TEMPLATE and
// E2E_CREDENTIAL from E2E_FIXTURES_NAMESPACE into ns and waits until KCM reports them valid and ready.
func (r *realTarget) Fixtures(ctx context.Context, ns string) (string, string, error) {
	from := os.Getenv(envFixturesNamespace)
	if from == "" {
		from = "kcm-system"
	}
	tmplName, credName := os.Getenv(envClusterTemplate), os.Getenv(envCredential)
	var tmpl k0rdentv1beta1.ClusterTemplate
	if err := r.c.Get(ctx, types.NamespacedName{Namespace: from, Name: tmplName}, &tmpl); err != nil {
		return "", "", fmt.Errorf("%s %s/%s: %w", envClusterTemplate, from, tmplName, err)
	}
	var cred k0rdentv1beta1.Credential
	if err := r.c.Get(ctx, types.NamespacedName{Namespace: from, Name: credName}, &cred); err != nil {
		return "", "", fmt.Errorf("%s %s/%s: %w", envCredential, from, credName, err)
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&k0rdentv1beta1.ClusterTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tmplName}, Spec: tmpl.Spec},
		&k0rdentv1beta1.Credential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: credName}, Spec: cred.Spec},
	}
	for _, o := range objs {
		if err := r.c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", "", err
		}
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, clusterTimeout, true, func(ctx context.Context) (bool, error) {
		var t k0rdentv1beta1.ClusterTemplate
		var c k0rdentv1beta1.Credential
		if r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: tmplName}, &t) != nil || r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: credName}, &c) != nil {
			return false, nil
		}
		return t.Status.Valid && c.Status.Ready, nil
	})
	return tmplName, credName, err
}

// ClusterConfig returns E2E_CLUSTER_CONFIG: a real template has its own configuration.
func (r *realTarget) ClusterConfig(w.ClusterConfig) (*apiextensionsv1.JSON, error) {
	b, err := os.ReadFile(os.Getenv(envClusterConfig))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envClusterConfig, err)
	}
	j, err := yamlToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envClusterConfig, err)
	}
	return &apiextensionsv1.JSON{Raw: j}, nil
}
