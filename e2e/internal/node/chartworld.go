package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
	"github.com/exalsius/exalsius-operator/e2e/internal/stack"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// Release and Namespace are where the umbrella chart is installed, as a user would.
const (
	Release   = "exalsius-operator"
	Namespace = "exalsius-system"
)

// WorldOptions configure StartWorld.
type WorldOptions struct {
	// RepoRoot is the repository.
	RepoRoot string
	// ImagesDir holds the component images (hack/images.sh); default <RepoRoot>/dist/images.
	ImagesDir string
	// Out receives progress lines; nil discards them.
	Out io.Writer
	// WaitForNode is how long to wait while another local world's node runs on this machine (one
	// node per machine); 0 fails at once.
	WaitForNode time.Duration
}

// World is the local world with a real node instead of component processes: the management cluster
// (API server on the node's address), the k0rdent simulator with its child clusters, and the node
// with the component images imported. Nothing of the operator runs until the chart is installed.
type World struct {
	World      *world.World
	Sim        *k0rdentsim.Simulator
	Node       *Node
	Client     client.Client
	RunDir     string
	RepoRoot   string
	Kubeconfig string // cluster-admin kubeconfig of the management cluster

	out    io.Writer
	unlock func()
	simLog *os.File
}

// StartWorld prepares the node's network, starts the management cluster and the simulator, then the
// node. On error everything started is stopped.
func StartWorld(ctx context.Context, o WorldOptions) (w *World, err error) {
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	if o.ImagesDir == "" {
		o.ImagesDir = filepath.Join(o.RepoRoot, "dist", "images")
	}
	images, err := filepath.Glob(filepath.Join(o.ImagesDir, "*.tar"))
	if err != nil {
		return nil, err
	}
	if len(images) == 0 {
		return nil, fmt.Errorf("no component images in %s: run hack/images.sh", o.ImagesDir)
	}
	w = &World{RepoRoot: o.RepoRoot, out: out}
	defer func() {
		if err != nil {
			w.DumpLogs(out, 30)
			_ = w.Stop()
		}
	}()
	if w.RunDir, err = world.NewRunDir(filepath.Join(o.RepoRoot, ".run")); err != nil {
		return w, err
	}
	w.progress("run folder: %s", w.RunDir)
	if w.unlock, err = Prepare(o.WaitForNode, out); err != nil {
		return w, fmt.Errorf("this machine cannot run the node: %w", err)
	}
	if w.World, err = world.Start(ctx, world.Options{RunDir: w.RunDir, Out: out, Management: ManagementOptions()}); err != nil {
		return w, err
	}
	w.Kubeconfig = w.World.AdminKubeconfig
	if w.Client, err = client.New(w.World.Management.Config, client.Options{Scheme: k0rdentsim.Scheme()}); err != nil {
		return w, err
	}
	if w.simLog, err = os.Create(filepath.Join(w.RunDir, "k0rdent-simulator.log")); err != nil {
		return w, err
	}
	w.World.RegisterLog("k0rdent-simulator", w.simLog.Name())
	w.Sim, err = k0rdentsim.Start(ctx, k0rdentsim.Options{Config: w.World.Management.Config, World: w.World,
		ChartsDir: filepath.Join(o.RepoRoot, "examples", "charts"), Log: w.simLog})
	if err != nil {
		return w, err
	}
	w.progress("k0rdent simulator running")
	w.Node, err = Start(ctx, w.World.Management, w.World.AdminKubeconfig, Options{
		RepoRoot: o.RepoRoot,
		LogDir:   filepath.Join(w.RunDir, "node"),
		Images:   images,
		Out:      w.progress,
	})
	if err != nil {
		return w, err
	}
	return w, nil
}

func (w *World) progress(format string, args ...any) {
	// Progress lines go to the test log: one that cannot be written is no reason to fail a run.
	_, _ = fmt.Fprintf(w.out, "[node] "+format+"\n", args...)
}

// Helm runs helm against the management cluster and returns its combined output.
func (w *World) Helm(ctx context.Context, args ...string) (string, error) {
	helm, err := world.FindTool("helm")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, helm, append([]string{"--kubeconfig", w.Kubeconfig}, args...)...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	cmd.WaitDelay = 10 * time.Second // a canceled helm's children must not hold the output open
	if err := cmd.Run(); err != nil {
		return b.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(b.String()))
	}
	return b.String(), nil
}

// ChartDir is the umbrella chart in the repository.
func (w *World) ChartDir() string { return filepath.Join(w.RepoRoot, "charts", "exalsius-operator") }

// Install runs `helm install` of the umbrella chart into Namespace with the given extra arguments
// (e.g. --set ...), waiting for every workload to be ready. It first checks that the node has every
// image the chart would run.
func (w *World) Install(ctx context.Context, extra ...string) error {
	if err := w.CheckImages(ctx, extra...); err != nil {
		return err
	}
	args := append([]string{"install", Release, w.ChartDir(), "--namespace", Namespace, "--create-namespace", "--wait", "--timeout", "10m"}, extra...)
	start := time.Now()
	if _, err := w.Helm(ctx, args...); err != nil {
		return err
	}
	w.progress("helm install %s done (%s)", Release, time.Since(start).Round(time.Second))
	return nil
}

// ApplyDir server-side applies every manifest of a folder (the quick start), as kubectl apply would.
func (w *World) ApplyDir(ctx context.Context, dir string) error {
	objs, err := stack.ReadManifests(dir)
	if err != nil {
		return err
	}
	return stack.Apply(ctx, w.Client, objs)
}

// DumpLogs writes the tail of every log: the world's, the node's and the pods' container logs.
func (w *World) DumpLogs(out io.Writer, lines int) {
	if w.World != nil {
		w.World.DumpLogs(out, lines)
	}
	if w.Node != nil {
		for _, p := range w.Node.Processes() {
			if _, err := fmt.Fprintf(out, "\n===== %s (%s), last %d lines =====\n%s\n", p.Name, p.LogPath, lines, p.Tail(lines)); err != nil {
				return // out is broken: the rest would not arrive either
			}
		}
	}
	logs, _ := filepath.Glob("/var/log/pods/" + Namespace + "_*/*/*.log")
	for _, l := range logs {
		if _, err := fmt.Fprintf(out, "\n===== pod log %s, last %d lines =====\n%s\n", l, lines, world.TailFile(l, lines)); err != nil {
			return
		}
	}
}

// Stop ends the node, the simulator and the world, and releases the node lock.
func (w *World) Stop() error {
	var errs []error
	if w.Node != nil {
		errs = append(errs, w.Node.Stop())
		w.Node = nil
	}
	if w.Sim != nil {
		if err := w.Sim.Stop(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
		w.Sim = nil
	}
	if w.World != nil {
		errs = append(errs, w.World.Stop())
		w.World = nil
	}
	if w.simLog != nil {
		_ = w.simLog.Close()
	}
	if w.unlock != nil {
		w.unlock()
		w.unlock = nil
	}
	return errors.Join(errs...)
}
