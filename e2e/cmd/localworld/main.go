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
	"sync"
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
	statusInterval := flag.Duration("status-interval", 0, "how often the k0rdent simulator collects service states into ServiceSet status (KCM: 10s; 0: at once)")
	flag.Parse()
	if err := run(*binDir, *repoRoot, *quickstart, *timeout, *statusInterval); err != nil {
		fmt.Fprintln(os.Stderr, "localworld:", err)
		os.Exit(1)
	}
}

func run(binDir, repoRoot, quickstart string, timeout, statusInterval time.Duration) error {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		return err
	}
	unlock, err := lock(filepath.Join(root, ".run", "localworld.lock"))
	if err != nil {
		return err
	}
	defer unlock()

	// The first Ctrl-C (or SIGTERM) stops everything cleanly; a second one forces the exit.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var st *stack.Stack
	go func() {
		<-sigs
		fmt.Println("\n[localworld] interrupted: stopping every process (Ctrl-C again to force) ...")
		cancel()
		<-sigs
		fmt.Println("\n[localworld] forced exit: killing the components; API servers may linger (see the run folder)")
		if st != nil {
			for _, c := range st.Components {
				_ = c.Process.Kill()
			}
		}
		unlock()
		os.Exit(130)
	}()

	runDir, err := world.NewRunDir(filepath.Join(root, ".run"))
	if err != nil {
		return err
	}
	latest := filepath.Join(root, ".run", "latest")
	_ = os.Remove(latest)
	if err := os.Symlink(filepath.Base(runDir), latest); err != nil {
		fmt.Println("[localworld] NOTE: cannot link", latest, err)
	}
	kubectlBin, kerr := world.FindTool("kubectl")
	st, err = stack.Start(ctx, stack.Options{RepoRoot: root, BinDir: binDir, RunDir: runDir, Out: os.Stdout, StatusInterval: statusInterval,
		OnManagementUp: func(kubeconfig string) {
			fmt.Printf("\n[localworld] the management API server is up; in another terminal:\n\n    export KUBECONFIG=%s\n", kubeconfig)
			if kerr == nil {
				fmt.Printf("    export PATH=%s:$PATH   # the built kubectl\n", filepath.Dir(kubectlBin))
			}
			fmt.Println()
		}})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Println("[localworld] stopped before the world was up; logs stay in", runDir)
			return nil
		}
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
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := watchQuickstart(ctx, st, timeout); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Println("[localworld] the quick start did not reach Running:", err)
			fmt.Println("[localworld] recent logs:")
			st.DumpLogs(os.Stdout, 15)
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	kubectl(st, "get", "exalsius", "-A")
	kc := "kubectl"
	if kerr == nil {
		kc = kubectlBin
	}
	fmt.Printf(`
[localworld] the local world is running. In another terminal:

    export KUBECONFIG=%[1]s
    alias kubectl=%[2]s
    kubectl get exalsius -A
    kubectl -n demo get clusterdeployments,servicesets
    kubectl -n demo get secret demo-kubeconfig -o jsonpath='{.data.kubeconfig}' | base64 -d > /tmp/demo.kubeconfig
    kubectl --kubeconfig /tmp/demo.kubeconfig get nodes,pods -A   # the Colony's merged kubeconfig, one context per cluster
    kubectl -n exalsius-system get events   # crashes and restarts of the components

Restart a component by hand (the world starts it again, with backoff):

    kill $(cat %[3]s/components/<component>.pid)   # webhook, colony-controller, workspace-controller, inventory-collector

Logs of every process (API servers and etcd included): %[3]s (also %[4]s);
beside each log, a .pid file holds the process's pid while it runs (management/kube-apiserver.pid, ...)
Press Ctrl-C to stop and clean up.
`, st.World.AdminKubeconfig, kc, st.RunDir, latest)
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

// lock takes the run lock, or explains which local world already holds it. A lock whose pid is gone
// or belongs to another program (the pid was reused) is stale and taken over.
func lock(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 2; attempt++ {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			// A lock without its pid reads as stale to the next run, which would take it over.
			_, werr := fmt.Fprintf(f, "%d\n", os.Getpid())
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				_ = os.Remove(path)
				return nil, fmt.Errorf("writing the lock %s: %w", path, werr)
			}
			var once sync.Once
			return func() { once.Do(func() { _ = os.Remove(path) }) }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		b, _ := os.ReadFile(path)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid > 0 && isLocalWorld(pid) {
			return nil, fmt.Errorf("a local world is already running (pid %d, lock %s): use it (its KUBECONFIG is printed in its terminal, and .run/latest links its run folder), or stop it with Ctrl-C there or `kill %d`", pid, path, pid)
		}
		// The holder is gone (or the pid now belongs to another program): a stale lock from a crash.
		fmt.Printf("[localworld] removing the stale lock %s (pid %d is not a running local world)\n", path, pid)
		_ = os.Remove(path)
	}
	return nil, fmt.Errorf("cannot take the lock %s", path)
}

// isLocalWorld reports whether pid is a running localworld process (checked through its command
// line, so that a reused pid is not mistaken for one).
func isLocalWorld(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	for _, arg := range strings.Split(string(cmdline), "\x00") {
		if filepath.Base(arg) == "localworld" {
			return true
		}
	}
	return false
}
