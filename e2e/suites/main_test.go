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
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	start := time.Now()
	world, err = stack.Start(context.Background(), stack.Options{
		RepoRoot: root,
		BinDir:   os.Getenv("EXALSIUS_BIN_DIR"),
		Out:      os.Stdout,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the local world:", err)
		return 1
	}
	fmt.Printf("e2e: local world started in %s (run folder %s)\n", time.Since(start).Round(time.Millisecond), world.RunDir)
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
	testEnv.AfterEachFeature(func(ctx context.Context, _ *envconf.Config, t *testing.T, f features.Feature) (context.Context, error) {
		if t.Failed() {
			fmt.Printf("\n######## feature %q failed: logs of the local world (%s) ########\n", f.Name(), world.RunDir)
			world.DumpLogs(os.Stdout, 60)
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
