// Package world runs the local world the e2e suites and `make run` use: a management API server with
// kube-controller-manager (garbage collection, namespaces) and every CRD, and child clusters on
// demand, each a separate API server with kube-controller-manager, kube-scheduler and kwok faking its
// nodes (GPU capacity and labels included). Every external process logs into one run folder.
//
// It is test tooling: nothing here runs in production.
package world

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// StopGrace is how long a process gets between SIGTERM and SIGKILL.
const StopGrace = 10 * time.Second

// Options configure a World.
type Options struct {
	// RunDir receives every log and generated file. Required.
	RunDir string
	// Management options are passed to testenv.StartManagement (e.g. testenv.WithWebhook).
	Management []testenv.Option
	// Out receives progress lines; nil discards them.
	Out io.Writer
	// OnManagementUp runs as soon as the management API server answers, with the path of its admin
	// kubeconfig (`make run` prints the KUBECONFIG line there).
	OnManagementUp func(kubeconfig string)
}

// World is a running management cluster plus its child clusters.
type World struct {
	// RunDir holds logs, kubeconfigs and configuration files of this run.
	RunDir string
	// Management is the management API server with the CRDs.
	Management *testenv.Management
	// AdminKubeconfig is the path of a cluster-admin kubeconfig for the management cluster.
	AdminKubeconfig string

	out               io.Writer
	controllerManager *Process

	mu       sync.Mutex
	children map[string]*ChildCluster
	extra    map[string]string // name -> log path of in-process parts (the simulator)
}

// NewRunDir creates a fresh, timestamped folder under root (for example <repo>/.run).
func NewRunDir(root string) (string, error) {
	d := filepath.Join(root, time.Now().UTC().Format("20060102-150405.000"))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", err
	}
	return d, nil
}

// Start brings up the management cluster: an API server and etcd with every CRD (common/testing/testenv) and
// kube-controller-manager for garbage collection and namespace deletion.
func Start(ctx context.Context, opts Options) (_ *World, err error) {
	if opts.RunDir == "" {
		return nil, errors.New("world: RunDir is required")
	}
	if err := os.MkdirAll(opts.RunDir, 0o755); err != nil {
		return nil, err
	}
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	w := &World{RunDir: opts.RunDir, out: out, children: map[string]*ChildCluster{}, extra: map[string]string{}}
	defer func() {
		if err != nil {
			_ = w.Stop()
		}
	}()
	start := time.Now()
	mopts := append([]testenv.Option{testenv.WithLogDir(filepath.Join(w.RunDir, "management"))}, opts.Management...)
	w.Management, err = testenv.StartManagement(mopts...)
	if err != nil {
		return nil, fmt.Errorf("starting the management API server: %w", err)
	}
	w.AdminKubeconfig = filepath.Join(w.RunDir, "management.kubeconfig")
	if err := WriteKubeconfig(w.Management.Config, "exalsius-local", w.AdminKubeconfig); err != nil {
		return nil, err
	}
	w.progress("management API server up at %s (%s)", w.Management.Config.Host, time.Since(start).Round(time.Millisecond))
	if opts.OnManagementUp != nil {
		opts.OnManagementUp(w.AdminKubeconfig)
	}
	w.controllerManager, err = startControllerManager("management/kube-controller-manager", w.AdminKubeconfig, filepath.Join(w.RunDir, "management"))
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (w *World) progress(format string, args ...any) {
	// Progress lines go to the test log: one that cannot be written is no reason to fail a run.
	_, _ = fmt.Fprintf(w.out, "[world] "+format+"\n", args...)
}

// RegisterLog adds a log file of an in-process part (the simulator, a component) to DumpLogs.
func (w *World) RegisterLog(name, path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.extra[name] = path
}

// Child returns the running child cluster with that name, or nil.
func (w *World) Child(name string) *ChildCluster {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.children[name]
}

// Children returns the names of the running child clusters.
func (w *World) Children() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.children))
	for n := range w.children {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// StopChild tears a child cluster down; a missing child is not an error.
func (w *World) StopChild(name string) error {
	w.mu.Lock()
	c := w.children[name]
	delete(w.children, name)
	w.mu.Unlock()
	if c == nil {
		return nil
	}
	w.progress("child cluster %s: stopping", name)
	return c.stop()
}

// Processes returns every external process of the world.
func (w *World) Processes() []*Process {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ps []*Process
	if w.controllerManager != nil {
		ps = append(ps, w.controllerManager)
	}
	for _, n := range sortedKeys(w.children) {
		ps = append(ps, w.children[n].procs...)
	}
	return ps
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// DumpLogs writes the last lines of every log of the world to out, for a failed test.
func (w *World) DumpLogs(out io.Writer, lines int) {
	for _, p := range w.Processes() {
		if _, err := fmt.Fprintf(out, "\n===== %s (%s), last %d lines =====\n%s\n", p.Name, p.LogPath, lines, p.Tail(lines)); err != nil {
			return // out is broken: the rest would not arrive either
		}
	}
	w.mu.Lock()
	extra := make(map[string]string, len(w.extra))
	for k, v := range w.extra {
		extra[k] = v
	}
	w.mu.Unlock()
	for _, name := range sortedKeys(extra) {
		if _, err := fmt.Fprintf(out, "\n===== %s (%s), last %d lines =====\n%s\n", name, extra[name], lines, TailFile(extra[name], lines)); err != nil {
			return
		}
	}
}

// Stop tears down every child cluster, the controller manager and the management API server.
func (w *World) Stop() error {
	var errs []error
	for _, n := range w.Children() {
		errs = append(errs, w.StopChild(n))
	}
	if w.controllerManager != nil {
		errs = append(errs, w.controllerManager.Stop(StopGrace))
	}
	if w.Management != nil {
		errs = append(errs, w.Management.Stop())
		w.Management = nil
	}
	return errors.Join(errs...)
}

// startControllerManager runs kube-controller-manager on a kubeconfig. The service-account token
// controller is off: the test API servers have no service-account signing key for it.
func startControllerManager(name, kubeconfig, dir string) (*Process, error) {
	bin, err := FindTool("kube-controller-manager")
	if err != nil {
		return nil, err
	}
	p := &Process{
		Name: name,
		Path: bin,
		Args: []string{
			"--kubeconfig=" + kubeconfig,
			"--controllers=*,-serviceaccount-token",
			"--leader-elect=false",
			"--secure-port=0",
			"--use-service-account-credentials=false",
			"--concurrent-gc-syncs=5",
			"--namespace-sync-period=30s",
			"--node-monitor-grace-period=60s",
			"--v=1",
		},
		LogPath: filepath.Join(dir, "kube-controller-manager.log"),
	}
	return p, p.Start()
}
