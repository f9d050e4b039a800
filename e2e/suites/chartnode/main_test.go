// Package chartnode is the e2e suite of the chart-installed operator: the local world with a real node
// (containerd, kubelet, kube-proxy; e2e/internal/node), the umbrella chart installed with helm from the
// project's own images, and the chart's pods checked as a cluster operator would: Ready under their
// security context, metrics over HTTPS behind authentication, the webhook called through its Service,
// leader-election failover, a one-component upgrade, and an uninstall that leaves nothing behind.
//
// It needs root and a host that can run containers, so it runs only when EXALSIUS_NODE_E2E=1 (set by
// `make test-node`, which first checks the host and says exactly why when it cannot); `go test ./...`
// of the e2e module skips it with a message.
package chartnode

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

	"github.com/exalsius/exalsius-operator/e2e/internal/node"
)

// EnvEnable turns the suite on.
const EnvEnable = "EXALSIUS_NODE_E2E"

// nodeLockWait is how long the suite waits while another run's node holds this machine (two clones
// testing on one machine); with the suite's own run it stays inside the 40-minute timeout hack/test-node.sh gives.
const nodeLockWait = 20 * time.Minute

var (
	testEnv env.Environment
	w       *node.World
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv(EnvEnable) != "1" {
		fmt.Printf("chartnode: SKIPPED: the chart-on-a-node suite runs with `make test-node` (%s=1); it needs root, containerd and runc\n", EnvEnable)
		return 0
	}
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartnode:", err)
		return 1
	}
	if err := node.Preflight(); err != nil {
		fmt.Fprintln(os.Stderr, "chartnode: FAIL: this host cannot run the node:", err)
		return 1
	}
	start := time.Now()
	w, err = node.StartWorld(context.Background(), node.WorldOptions{RepoRoot: root, Out: os.Stdout, WaitForNode: nodeLockWait})
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartnode: starting the world with its node:", err)
		return 1
	}
	fmt.Printf("chartnode: world and node up in %s (run folder %s)\n", time.Since(start).Round(time.Second), w.RunDir)
	kl, err := klient.New(w.World.Management.Config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartnode:", err)
		_ = w.Stop()
		return 1
	}
	testEnv = env.NewWithConfig(envconf.New().WithClient(kl))
	testEnv.AfterEachFeature(func(ctx context.Context, _ *envconf.Config, t *testing.T, f features.Feature) (context.Context, error) {
		if t.Failed() {
			fmt.Printf("\n######## feature %q failed: logs (%s) ########\n", f.Name(), w.RunDir)
			w.DumpLogs(os.Stdout, 40)
		}
		return ctx, nil
	})
	code := testEnv.Run(m)
	if err := w.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "chartnode: stopping:", err)
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
