// Command chartworld is `make run-chart`: the local world with a real node (containerd, kubelet,
// kube-proxy) for the management cluster, the umbrella chart installed with `helm install` and its
// default values (the component images are imported into the node under the chart's default
// references), then the quick start applied and watched until its workspace is Running, as a user
// would do it on a real cluster. It keeps everything running for kubectl until Ctrl-C.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/e2e/internal/node"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

func main() {
	repoRoot := flag.String("repo-root", "..", "the repository root")
	timeout := flag.Duration("timeout", 10*time.Minute, "how long to wait for the quick start's workspace to reach Running")
	exit := flag.Bool("exit", false, "stop and clean up once the quick start runs (or failed) instead of waiting for Ctrl-C")
	flag.Parse()
	if err := run(*repoRoot, *timeout, *exit); err != nil {
		fmt.Fprintln(os.Stderr, "chartworld:", err)
		os.Exit(1)
	}
}

func run(repoRoot string, timeout time.Duration, exit bool) error {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	w, err := node.StartWorld(ctx, node.WorldOptions{RepoRoot: root, Out: os.Stdout})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("\n[chartworld] stopping the node and the world ...")
		if err := w.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "[chartworld] cleanup:", err)
		}
		fmt.Println("[chartworld] stopped; logs stay in", w.RunDir)
	}()
	fmt.Printf("\n$ helm install %s %s --namespace %s --create-namespace --wait\n", node.Release, w.ChartDir(), node.Namespace)
	if err := w.Install(ctx); err != nil {
		w.DumpLogs(os.Stdout, 20)
		return err
	}
	kubectl(w, "-n", node.Namespace, "get", "pods", "-o", "wide")
	qs := filepath.Join(root, "examples", "quickstart")
	fmt.Println("\n[chartworld] applying", qs)
	if err := w.ApplyDir(ctx, qs); err != nil {
		return err
	}
	if err := watch(ctx, w, timeout); err != nil {
		fmt.Println("[chartworld] the quick start did not reach Running:", err)
		w.DumpLogs(os.Stdout, 15)
		if exit {
			return err
		}
	} else {
		fmt.Println("[chartworld] the quick start is Running, served by the chart's pods")
	}
	kubectl(w, "get", "colonies,workspaceclasses,workspacedeployments", "-A")
	kubectl(w, "-n", node.Namespace, "get", "pods", "-o", "wide")
	if exit {
		return nil
	}
	fmt.Printf(`
[chartworld] the local world with its node is running. In another terminal:

    export KUBECONFIG=%s
    kubectl get nodes -o wide
    kubectl -n %s get pods,svc,leases
    helm -n %s status %s

Logs: %s (node/ has containerd, kubelet, kube-proxy; pod logs are in /var/log/pods)
Press Ctrl-C to stop and clean up.
`, w.Kubeconfig, node.Namespace, node.Namespace, node.Release, w.RunDir)
	<-ctx.Done()
	return nil
}

func watch(ctx context.Context, w *node.World, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start, last := time.Now(), ""
	for {
		var parts []string
		var colony infrav1.Colony
		if err := w.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "demo"}, &colony); err == nil {
			parts = append(parts, fmt.Sprintf("colony demo: %s %d/%d", colony.Status.Phase, colony.Status.ReadyClusters, colony.Status.TotalClusters))
		}
		var ws workspacesv1.WorkspaceDeployment
		running := false
		if err := w.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "my-notebook"}, &ws); err == nil {
			parts = append(parts, fmt.Sprintf("workspace my-notebook: %s %s", ws.Status.Phase, ws.Status.Message))
			running = ws.Status.Phase == workspacesv1.PhaseRunning
		}
		if line := strings.Join(parts, " | "); line != last {
			fmt.Printf("[chartworld] %6s  %s\n", time.Since(start).Round(time.Second), line)
			last = line
		}
		if running {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func kubectl(w *node.World, args ...string) {
	bin, err := world.FindTool("kubectl")
	if err != nil {
		fmt.Println("[chartworld]", err)
		return
	}
	fmt.Printf("\n$ kubectl %s\n", strings.Join(args, " "))
	cmd := exec.Command(bin, append([]string{"--kubeconfig", w.Kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	_ = cmd.Run()
}
