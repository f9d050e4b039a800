package stack

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// Component is one of the four binaries running as a separate process.
type Component struct {
	Name string
	// ServiceAccount is the chart ServiceAccount the component's kubeconfig impersonates.
	ServiceAccount types.NamespacedName
	Process        *world.Process
	Kubeconfig     string
	MetricsAddr    string
	HealthAddr     string
	// Flags are the flags the binary declares (read from its -help output).
	Flags map[string]bool

	// postStart runs after each start once the component is ready (the webhook waits for its CA
	// bundle to be injected).
	postStart func(context.Context) error
	sup       supervision
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

var flagLine = regexp.MustCompile(`(?m)^\s+--?([a-zA-Z0-9][a-zA-Z0-9._-]*)`)

// binaryFlags runs `<bin> -help` and returns the flag names it prints.
func binaryFlags(bin string) map[string]bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, "-help").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	return flags
}

// startComponent starts one component binary with its own kubeconfig, which impersonates the
// component's chart ServiceAccount (so only the chart's RBAC authorizes what it does), leader
// election on in the release namespace, and metrics and probes on free loopback
// ports, then waits for its readiness probe.
func (s *Stack) startComponent(ctx context.Context, name, binDir string) (*Component, error) {
	if binDir == "" {
		return nil, fmt.Errorf("no binary directory given (run `make build`)")
	}
	bin := filepath.Join(binDir, name)
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		return nil, fmt.Errorf("binary %s not found (run `make build`)", bin)
	}
	dir := filepath.Join(s.RunDir, "components")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// The certificate user may impersonate (system:masters); every request it makes impersonates
	// the ServiceAccount, and is authorized as that ServiceAccount alone.
	user, err := s.World.Management.Env.AddUser(envtest.User{Name: "exalsius:" + name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("creating the %s user: %w", name, err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	sa, ok := s.rbac.ServiceAccounts[name]
	if !ok {
		return nil, fmt.Errorf("the chart renders no ServiceAccount for %s", name)
	}
	if kc, err = impersonate(kc, sa); err != nil {
		return nil, fmt.Errorf("the %s kubeconfig: %w", name, err)
	}
	c := &Component{Name: name, ServiceAccount: sa, Kubeconfig: filepath.Join(dir, name+".kubeconfig"), Flags: binaryFlags(bin)}
	if err := os.WriteFile(c.Kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	if c.MetricsAddr, err = world.FreeAddr(); err != nil {
		return nil, err
	}
	if c.HealthAddr, err = world.FreeAddr(); err != nil {
		return nil, err
	}
	// Leader election as the chart sets it (the webhook has none: every replica serves).
	leaderElect := "true"
	if v, ok := s.rbac.LeaderElect[name]; ok {
		leaderElect = v
	}
	want := []struct{ flag, value string }{
		{"kubeconfig", c.Kubeconfig},
		{"leader-elect", leaderElect},
		{"leader-election-namespace", SystemNamespace},
		{"metrics-bind-address", c.MetricsAddr},
		{"health-probe-bind-address", c.HealthAddr},
		{"development", "true"},
	}
	extra, err := s.componentArgs(ctx, c)
	if err != nil {
		return nil, err
	}
	var args []string
	for _, f := range want {
		if c.Flags[f.flag] {
			args = append(args, "--"+f.flag+"="+f.value)
		}
	}
	args = append(args, extra...)
	c.Process = &world.Process{
		Name:    "component/" + name,
		Path:    bin,
		Args:    args,
		Env:     []string{"POD_NAMESPACE=" + SystemNamespace, "KUBECONFIG=" + c.Kubeconfig},
		LogPath: filepath.Join(dir, name+".log"),
	}
	if err := c.Process.Start(); err != nil {
		return nil, err
	}
	if err := c.WaitReady(ctx, 90*time.Second); err != nil {
		_ = c.Process.Stop(world.StopGrace)
		return nil, fmt.Errorf("%w; log:\n%s", err, c.Process.Tail(30))
	}
	return c, nil
}

// WaitReady waits until the component's readiness probe answers 200 (or, for a binary without a
// probe flag, until it has stayed up for two seconds).
func (c *Component) WaitReady(ctx context.Context, timeout time.Duration) error {
	if !c.Flags["health-probe-bind-address"] {
		select {
		case <-c.Process.Exited():
			return fmt.Errorf("%s exited: %v", c.Name, c.Process.ExitError())
		case <-time.After(2 * time.Second):
			return nil
		}
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback probe
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-c.Process.Exited():
			return false, fmt.Errorf("%s exited: %v", c.Name, c.Process.ExitError())
		default:
		}
		resp, err := hc.Get("http://" + c.HealthAddr + "/readyz")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		_ = resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready (%s): %w", c.Name, last, err)
	}
	if c.postStart != nil {
		if err := c.postStart(ctx); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	return nil
}

// Restart stops (SIGTERM, or SIGKILL when kill is set) and starts the component again, then waits
// for readiness.
func (c *Component) Restart(ctx context.Context, kill bool) error {
	c.hold(true)
	defer c.hold(false)
	var err error
	if kill {
		err = c.Process.Kill()
	} else {
		err = c.Process.Stop(world.StopGrace)
	}
	if err != nil {
		return err
	}
	if err := c.Process.Start(); err != nil {
		return err
	}
	return c.WaitReady(ctx, 90*time.Second)
}

// componentArgs returns component-specific flags (the webhook's serving setup).
func (s *Stack) componentArgs(ctx context.Context, c *Component) ([]string, error) {
	if c.Name != "webhook" {
		return nil, nil
	}
	return s.webhookArgs(ctx, c)
}
