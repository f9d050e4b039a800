package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

const wantKubeVersion = "v1.37.2"

var mgmt *Management

// envPresetLogger makes TestMain set a logger before Main (see TestMainKeepsALoggerSetBefore).
const envPresetLogger = "TESTENV_TEST_PRESET_LOGGER"

func TestMain(m *testing.M) {
	if os.Getenv(envPresetLogger) != "" {
		ctrllog.SetLogger(funcr.New(func(prefix, args string) {
			fmt.Fprintln(os.Stderr, "preset-logger:", prefix, args)
		}, funcr.Options{}))
	}
	start := time.Now()
	Main(m, func(mg *Management) error {
		fmt.Printf("testenv: StartManagement took %s\n", time.Since(start).Round(time.Millisecond))
		mgmt = mg
		return nil
	})
}

// startChild starts a child and stops it when the test ends.
func startChild(t *testing.T, name string) *Child {
	t.Helper()
	start := time.Now()
	ch, err := StartChild(name)
	if err != nil {
		t.Fatalf("StartChild(%q): %v", name, err)
	}
	t.Logf("StartChild(%q) took %s", name, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := ch.Stop(); err != nil {
			t.Errorf("stopping child %s: %v", name, err)
		}
	})
	return ch
}

func TestManagementServesEveryCRD(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(mgmt.Config)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		infrav1.GroupVersion.String():  {"colonies"},
		"workspaces.exalsius.ai/v1":    {"workspaceclasses", "workspacedeployments", "workspacequotas"},
		"k0rdent.mirantis.com/v1beta1": {"clusterdeployments", "clustertemplates", "credentials", "servicesets", "servicetemplates"},
	}
	for gv, names := range want {
		resources, err := dc.ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Errorf("discovery of %s: %v", gv, err)
			continue
		}
		served := map[string]bool{}
		for _, r := range resources.APIResources {
			served[r.Name] = true
		}
		for _, name := range names {
			if !served[name] {
				t.Errorf("discovery of %s lists no %s", gv, name)
			}
		}
	}

	// The typed client round-trips through the scheme: an empty list proves the CRD is served.
	var colonies infrav1.ColonyList
	if err := mgmt.Client.List(context.Background(), &colonies); err != nil {
		t.Fatalf("listing colonies: %v", err)
	}
}

func TestServersReportStampedVersion(t *testing.T) {
	child := startChild(t, "version")
	for name, cfg := range map[string]*rest.Config{"management": mgmt.Config, "child": child.Config} {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		v, err := dc.ServerVersion()
		if err != nil {
			t.Fatalf("%s: server version: %v", name, err)
		}
		if v.GitVersion != wantKubeVersion {
			t.Errorf("%s: gitVersion = %q, want %q", name, v.GitVersion, wantKubeVersion)
		}
	}
}

func TestChildrenAreSeparate(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	children, err := StartChildren("a", "b")
	if err != nil {
		t.Fatalf("StartChildren: %v", err)
	}
	t.Logf("StartChildren(a, b) took %s", time.Since(start).Round(time.Millisecond))
	for _, c := range children {
		t.Cleanup(func() {
			if err := c.Stop(); err != nil {
				t.Errorf("stopping child %s: %v", c.Name, err)
			}
		})
	}
	a, b := children[0], children[1]
	if a.Config.Host == b.Config.Host || a.Config.Host == mgmt.Config.Host {
		t.Fatalf("children share an address: a=%s b=%s management=%s", a.Config.Host, b.Config.Host, mgmt.Config.Host)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-in-a"}}
	if err := a.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace in a: %v", err)
	}
	if err := a.Client.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}); err != nil {
		t.Fatalf("namespace missing in a: %v", err)
	}
	for name, c := range map[string]client.Client{"b": b.Client, "management": mgmt.Client} {
		err := c.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("namespace created in a: Get from %s = %v, want NotFound", name, err)
		}
	}

	// A child serves no CRDs.
	err = a.Client.List(ctx, &infrav1.ColonyList{})
	if err == nil {
		t.Errorf("child serves colonies; want no CRDs on a child")
	}
}

func TestWriteKubeconfigSecretReachesChild(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "secret")
	const namespace, cd = "kubeconfig-ns", "cd-one"

	if err := mgmt.WriteKubeconfigSecret(ctx, namespace, cd, []byte("stale")); err != nil {
		t.Fatalf("first write (namespace missing): %v", err)
	}
	if err := mgmt.WriteKubeconfigSecret(ctx, namespace, cd, child.Kubeconfig); err != nil {
		t.Fatalf("second write (update): %v", err)
	}

	var secret corev1.Secret
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cd + "-kubeconfig"}, &secret); err != nil {
		t.Fatalf("reading the Secret: %v", err)
	}
	if secret.Type != KubeconfigSecretType {
		t.Errorf("type = %q, want %q", secret.Type, KubeconfigSecretType)
	}
	if got := secret.Labels[ClusterNameLabel]; got != cd {
		t.Errorf("label %s = %q, want %q", ClusterNameLabel, got, cd)
	}

	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[k0rdentv1beta1.KubeconfigSecretKey])
	if err != nil {
		t.Fatalf("parsing kubeconfig from the Secret: %v", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	marker := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "made-via-secret"}}
	if err := c.Create(ctx, marker); err != nil {
		t.Fatalf("creating through the Secret's kubeconfig: %v", err)
	}
	if err := child.Client.Get(ctx, client.ObjectKeyFromObject(marker), &corev1.Namespace{}); err != nil {
		t.Fatalf("object created through the Secret's kubeconfig is not on the child: %v", err)
	}
}

func TestWriteKubeconfigSecretRejectsEmptyNames(t *testing.T) {
	if err := mgmt.WriteKubeconfigSecret(context.Background(), "", "cd", nil); err == nil {
		t.Error("empty namespace accepted")
	}
	if err := mgmt.WriteKubeconfigSecret(context.Background(), "ns", "", nil); err == nil {
		t.Error("empty cluster name accepted")
	}
}

func TestChildRestartKeepsAddressAndData(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "restart")
	hostBefore := child.Config.Host
	kubeconfig := child.Kubeconfig

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "survives"},
		Data:       map[string]string{"k": "v"},
	}
	if err := child.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}

	if err := child.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if child.Config.Host != hostBefore {
		t.Fatalf("host changed across Restart: %s -> %s", hostBefore, child.Config.Host)
	}

	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), &got); err != nil {
		t.Fatalf("kubeconfig from before the restart: %v", err)
	}
	if got.Data["k"] != "v" {
		t.Errorf("data lost across Restart: %v", got.Data)
	}
	if err := child.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
		t.Errorf("child.Client after Restart: %v", err)
	}
}

func TestChildUnreachableWhilePaused(t *testing.T) {
	child := startChild(t, "down")
	hostBefore := child.Config.Host

	// An open watch (as the child-cluster cache's informers keep) must not hold up Pause.
	cs, err := kubernetes.NewForConfig(child.Config)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Namespaces().Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	if err := child.Pause(); err != nil {
		t.Fatalf("Pause with an open watch: %v", err)
	}
	cfg := *child.Config
	cfg.Timeout = 5 * time.Second
	c, err := client.New(&cfg, client.Options{})
	if err == nil {
		err = c.Get(context.Background(), client.ObjectKey{Name: "default"}, &corev1.Namespace{})
	}
	if err == nil {
		t.Fatalf("child at %s answered while paused", hostBefore)
	}
	if err := child.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if child.Config.Host != hostBefore {
		t.Errorf("host changed across Pause/Resume: %s -> %s", hostBefore, child.Config.Host)
	}
	if err := child.Client.Get(context.Background(), client.ObjectKey{Name: "default"}, &corev1.Namespace{}); err != nil {
		t.Fatalf("child unreachable after Restart: %v", err)
	}
}

func TestAssetsDirNamesMakeTools(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		t.Setenv("KUBEBUILDER_ASSETS", dir)
		_, err := AssetsDir()
		if err == nil {
			t.Fatalf("AssetsDir with KUBEBUILDER_ASSETS=%q: no error", dir)
		}
		if !strings.Contains(err.Error(), "make tools") {
			t.Errorf("AssetsDir error %q does not name `make tools`", err)
		}
		if _, err := StartChild("x"); err == nil || !strings.Contains(err.Error(), "make tools") {
			t.Errorf("StartChild with KUBEBUILDER_ASSETS=%q: %v, want an error naming `make tools`", dir, err)
		}
		if _, err := StartManagement(); err == nil || !strings.Contains(err.Error(), "make tools") {
			t.Errorf("StartManagement with KUBEBUILDER_ASSETS=%q: %v, want an error naming `make tools`", dir, err)
		}
	}
}

// TestMainFailsLoudlyWithoutAssets runs this test binary again without KUBEBUILDER_ASSETS: its
// TestMain (testenv.Main) must exit 1 naming `make tools` rather than skip or pass.
func TestMainFailsLoudlyWithoutAssets(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("test binary without assets: %v, want exit status 1; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "make tools") {
		t.Fatalf("output does not name `make tools`:\n%s", out)
	}
}

// TestMainKeepsALoggerSetBefore runs this test binary again (without assets, so that it stops right
// after Main's first log line): a logger set before Main gets that line; without one, Main's default
// logger discards it.
func TestMainKeepsALoggerSetBefore(t *testing.T) {
	for _, preset := range []bool{true, false} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS=", EnvVerbose+"=")
		if preset {
			cmd.Env = append(cmd.Env, envPresetLogger+"=1")
		}
		out, _ := cmd.CombinedOutput()
		logged := strings.Contains(string(out), "preset-logger:") &&
			strings.Contains(string(out), "starting the management API server")
		if logged != preset {
			t.Errorf("logger set before Main: %v; Main's line reached it: %v; output:\n%s", preset, logged, out)
		}
		if strings.Contains(string(out), "log.SetLogger(...) was never called") {
			t.Errorf("controller-runtime warns about a missing logger:\n%s", out)
		}
	}
}

func TestWithWebhookInstallsConfigurations(t *testing.T) {
	ctx := context.Background()
	path := "/validate-configmap"
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "testenv-check"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "check.testenv.exalsius.ai",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: "system", Name: "webhook", Path: &path},
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"},
				},
			}},
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	start := time.Now()
	m, err := StartManagement(WithWebhook(envtest.WebhookInstallOptions{
		ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{vwc},
	}))
	if err != nil {
		t.Fatalf("StartManagement(WithWebhook): %v", err)
	}
	t.Logf("StartManagement(WithWebhook) took %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})

	var got admissionregistrationv1.ValidatingWebhookConfiguration
	if err := m.Client.Get(ctx, client.ObjectKey{Name: vwc.Name}, &got); err != nil {
		t.Fatalf("webhook configuration not installed: %v", err)
	}
	wo := m.Env.WebhookInstallOptions
	wantHost := net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(wo.LocalServingPort))
	cc := got.Webhooks[0].ClientConfig
	u, err := url.Parse(ptrString(cc.URL))
	// envtest joins host and path with an extra slash; the path itself must survive.
	if err != nil || u.Scheme != "https" || u.Host != wantHost || strings.TrimLeft(u.Path, "/") != strings.TrimLeft(path, "/") {
		t.Errorf("webhook URL = %s, want https://%s%s (the local serving address)", ptrString(cc.URL), wantHost, path)
	}
	if len(cc.CABundle) == 0 || string(cc.CABundle) != string(wo.LocalServingCAData) {
		t.Error("webhook CA bundle is not the local serving CA")
	}
	if wo.LocalServingCertDir == "" {
		t.Error("no local serving certificates prepared")
	}
	// The shared management server has no such configuration: each Management is its own server.
	err = mgmt.Client.Get(ctx, client.ObjectKey{Name: vwc.Name}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("shared management server: %v, want NotFound", err)
	}
}

func ptrString(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
