// Command localworld is `make run`: it starts the local world (a management cluster, child clusters
// with simulated GPU nodes, the k0rdent simulator and the four components), applies the quick start
// and keeps everything running for kubectl until Ctrl-C, then cleans up every process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/exalsius/exalsius-operator/e2e/internal/stack"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

func main() {
	binDir := flag.String("bin-dir", os.Getenv("EXALSIUS_BIN_DIR"), "folder of the built component binaries (make build)")
	repoRoot := flag.String("repo-root", "..", "the repository root")
	quickstart := flag.String("quickstart", "", "folder of manifests to apply (default <repo-root>/examples/quickstart; \"none\" applies nothing)")
	timeout := flag.Duration("timeout", 5*time.Minute, "how long to wait for the quick start's workspace to reach Running")
	flag.Parse()
	if err := run(*binDir, *repoRoot, *quickstart, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "localworld:", err)
		os.Exit(1)
	}
}

func run(binDir, repoRoot, quickstart string, timeout time.Duration) error {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		return err
	}
	unlock, err := lock(filepath.Join(root, ".run", "localworld.lock"))
	if err != nil {
		return err
	}
	defer unlock()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	st, err := stack.Start(ctx, stack.Options{RepoRoot: root, BinDir: binDir, Out: os.Stdout})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("\n[localworld] stopping every process ...")
		if err := st.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "[localworld] cleanup:", err)
		}
		fmt.Println("[localworld] stopped; logs stay in", st.RunDir)
	}()
	for name, why := range st.Missing {
		fmt.Printf("[localworld] NOTE: %s is not running: %s\n", name, why)
	}

	if quickstart != "none" {
		if quickstart == "" {
			quickstart = filepath.Join(root, "examples", "quickstart")
		}
		fmt.Println("[localworld] applying", quickstart)
		if err := st.ApplyDir(ctx, quickstart); err != nil {
			return err
		}
		if err := watchQuickstart(ctx, st, timeout); err != nil {
			fmt.Println("[localworld] the quick start did not reach Running:", err)
			fmt.Println("[localworld] recent logs:")
			st.DumpLogs(os.Stdout, 15)
		}
	}
	kubectl(st, "get", "exalsius", "-A")
	fmt.Printf(`
[localworld] the local world is running. In another terminal:

    export KUBECONFIG=%s
    kubectl get exalsius -A
    kubectl -n demo get clusterdeployments,servicesets
    kubectl -n demo get secret demo-kubeconfig -o jsonpath='{.data.kubeconfig}' | base64 -d > /tmp/demo.kubeconfig
    kubectl --kubeconfig /tmp/demo.kubeconfig get nodes,pods -A   # the Colony's merged kubeconfig, one context per cluster

Logs of every process: %s
Press Ctrl-C to stop and clean up.
`, st.World.AdminKubeconfig, st.RunDir)
	<-ctx.Done()
	return nil
}

// watchQuickstart prints the progress of the quick start's objects until the workspace is Running.
func watchQuickstart(ctx context.Context, st *stack.Stack, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	last := ""
	for {
		line, done := quickstartState(ctx, st)
		if line != last {
			fmt.Printf("[localworld] %6s  %s\n", time.Since(start).Round(time.Second), line)
			last = line
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// kubectl runs kubectl against the management cluster and prints its output.
func kubectl(st *stack.Stack, args ...string) {
	bin, err := world.FindTool("kubectl")
	if err != nil {
		fmt.Println("[localworld]", err)
		return
	}
	fmt.Printf("\n$ kubectl %s\n", strings.Join(args, " "))
	cmd := exec.Command(bin, append([]string{"--kubeconfig", st.World.AdminKubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	_ = cmd.Run()
}

// lock takes the run lock, or explains which local world already holds it.
func lock(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 2; attempt++ {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%d\n", os.Getpid())
			_ = f.Close()
			return func() { _ = os.Remove(path) }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		b, _ := os.ReadFile(path)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			return nil, fmt.Errorf("a local world is already running (pid %d, lock %s): use it (its KUBECONFIG is printed in its terminal), or stop it with Ctrl-C there or `kill %d`", pid, path, pid)
		}
		// The holder is gone: a stale lock from a crash.
		_ = os.Remove(path)
	}
	return nil, fmt.Errorf("cannot take the lock %s", path)
}
