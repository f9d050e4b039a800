// Package suites holds the end-to-end suites (sigs.k8s.io/e2e-framework features) that run against
// the local world: a real management API server with kube-controller-manager, child clusters with
// kwok nodes, the k0rdent simulator, and the four components as separate processes.
//
// Run them with `make test-e2e` (which builds the components first); the run folder with every
// process's log is printed at the start, and the tail of every log is printed when a feature fails.
package suites

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/e2e/internal/stack"
)

var (
	testEnv env.Environment
	// world is the running local world every feature uses.
	world *stack.Stack
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if clusterTimeout, err = durationEnv(envClusterTimeout, clusterTimeout); err == nil {
		workspaceTimeout, err = durationEnv(envWorkspaceTimeout, workspaceTimeout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if path := os.Getenv(envKubeconfig); path != "" {
		return runReal(m, path)
	}
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	start := time.Now()
	// `go test` run directly must not test stale binaries: build what is missing or older than its
	// sources (make test-e2e has just built them, so this is a check there).
	binDir, err := stack.EnsureBinaries(context.Background(), root, os.Getenv("EXALSIUS_BIN_DIR"), stack.Components, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the component binaries:", err)
		return 1
	}
	// E2E_STATUS_INTERVAL runs every suite at another status-collection cadence (e.g. KCM's 10s).
	statusInterval, err := durationEnvAllowZero("E2E_STATUS_INTERVAL")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	world, err = stack.Start(context.Background(), stack.Options{
		RepoRoot:       root,
		BinDir:         binDir,
		Out:            os.Stdout,
		StatusInterval: statusInterval,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the local world:", err)
		return 1
	}
	tgt = localTarget{}
	fmt.Printf("e2e: local world started in %s (run folder %s)\n", time.Since(start).Round(time.Millisecond), world.RunDir)
	if crds, _ := testenv.K0rdentCRDs(); crds != "" {
		fmt.Printf("e2e: k0rdent's real CRDs from %s\n", crds)
	}
	for name, why := range world.Missing {
		fmt.Printf("e2e: WARNING: component %s is not running (%s); features needing it will fail\n", name, why)
	}
	kl, err := klient.New(world.World.Management.Config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		_ = world.Stop()
		return 1
	}
	testEnv = env.NewWithConfig(envconf.New().WithClient(kl))
	// Liveness: a component that died (even if the world restarted it) fails the feature at hand
	// with its log, instead of every later wait timing out.
	crashes := map[string]int{}
	testEnv.BeforeEachFeature(func(ctx context.Context, _ *envconf.Config, t *testing.T, f features.Feature) (context.Context, error) {
		for name, c := range world.Components {
			n, _ := c.Crashes()
			crashes[name] = n
			if !c.Process.Running() && !c.IsHeld() {
				t.Fatalf("component %s is not running before %q; its log:\n%s", name, f.Name(), c.Process.Tail(60))
			}
		}
		return ctx, nil
	})
	testEnv.AfterEachFeature(func(ctx context.Context, _ *envconf.Config, t *testing.T, f features.Feature) (context.Context, error) {
		for name, c := range world.Components {
			if n, last := c.Crashes(); n > crashes[name] {
				t.Errorf("component %s crashed %d time(s) during %q (%s); its log:\n%s", name, n-crashes[name], f.Name(), last, c.Process.Tail(60))
			}
		}
		if t.Failed() {
			fmt.Printf("\n######## feature %q failed: logs of the local world (%s) ########\n", f.Name(), world.RunDir)
			world.DumpLogs(os.Stdout, 150)
			world.World.DumpChildren(os.Stdout, 30)
		}
		return ctx, nil
	})
	code := testEnv.Run(m)
	// Every component runs as its chart ServiceAccount: a request the chart's RBAC denies fails the
	// suite even when no feature noticed it.
	denials, err := world.Denials()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: reading the component logs:", err)
		code = 1
	}
	for name, lines := range denials {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: the chart RBAC denied %s %d request(s), first:\n%s\n", name, len(lines), lines[0])
		code = 1
	}
	if err := world.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stopping the local world:", err)
	}
	return code
}

// runReal runs the suites against a real management cluster (E2E_KUBECONFIG); local-only tests skip.
func runReal(m *testing.M, path string) int {
	r, err := newRealTarget(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	tgt = r
	fmt.Printf("e2e: running against the management cluster of %s (local-only tests skip)\n", path)
	kl, err := klient.New(r.Config())
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	testEnv = env.NewWithConfig(envconf.New().WithClient(kl))
	return testEnv.Run(m)
}

// repoRoot walks up from the working directory to the folder holding go.work.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work above %s", wd)
		}
	}
}
