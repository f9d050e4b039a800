// Package stack assembles the whole local world, as `make run` and the e2e suites use it: the
// management cluster and child clusters (package world), the k0rdent simulator (package k0rdentsim,
// in this process) and the four components as separate processes from their built binaries.
//
// It is test tooling: nothing here runs in production.
package stack

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

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/common/components"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// Components are the four binaries, in start order: the webhook first, then the others as listed.
var Components = startOrder(components.Names())

func startOrder(names []string) []string {
	out := []string{"webhook"}
	for _, n := range names {
		if n != "webhook" {
			out = append(out, n)
		}
	}
	return out
}

// SystemNamespace is where the components keep their leader-election leases and webhook state.
const SystemNamespace = "exalsius-system"

// Options configure Start.
type Options struct {
	// RepoRoot is the repository (examples/charts and the components' config are read from it).
	RepoRoot string
	// BinDir holds the built component binaries (`make build`).
	BinDir string
	// RunDir receives every log; a fresh folder under <RepoRoot>/.run when empty.
	RunDir string
	// Out receives progress lines; nil discards them.
	Out io.Writer
	// Components to start; nil means all four.
	Components []string
	// OnManagementUp runs as soon as the management API server answers (see world.Options).
	OnManagementUp func(kubeconfig string)
	// StatusInterval is the simulator's status-collection interval (k0rdentsim.Options).
	StatusInterval time.Duration
}

// Stack is the running local world.
type Stack struct {
	World      *world.World
	Sim        *k0rdentsim.Simulator
	Client     client.Client
	RunDir     string
	RepoRoot   string
	ChartsDir  string
	Components map[string]*Component
	// Missing lists components that could not start (no binary yet), with the reason.
	Missing map[string]string

	rbac    *chartRBAC
	quit    chan struct{}
	out     io.Writer
	simLog  *os.File
	stopMu  sync.Mutex
	stopped bool
}

// Start brings the whole local world up. On error everything started so far is stopped.
func Start(ctx context.Context, o Options) (s *Stack, err error) {
	if o.RepoRoot == "" {
		return nil, errors.New("stack: RepoRoot is required")
	}
	root, err := filepath.Abs(o.RepoRoot)
	if err != nil {
		return nil, err
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	runDir := o.RunDir
	if runDir == "" {
		if runDir, err = world.NewRunDir(filepath.Join(root, ".run")); err != nil {
			return nil, err
		}
	}
	s = &Stack{RunDir: runDir, RepoRoot: root, ChartsDir: filepath.Join(root, "examples", "charts"),
		Components: map[string]*Component{}, Missing: map[string]string{}, out: out, quit: make(chan struct{})}
	defer func() {
		if err != nil {
			if ctx.Err() == nil {
				s.DumpLogs(out, 40)
			}
			_ = s.Stop()
		}
	}()
	start := time.Now()
	s.progress("run folder: %s", runDir)
	if s.World, err = world.Start(ctx, world.Options{RunDir: runDir, Out: out, OnManagementUp: o.OnManagementUp}); err != nil {
		return s, err
	}
	s.Client, err = client.New(s.World.Management.Config, client.Options{Scheme: k0rdentsim.Scheme()})
	if err != nil {
		return s, err
	}
	if s.simLog, err = os.Create(filepath.Join(runDir, "k0rdent-simulator.log")); err != nil {
		return s, err
	}
	s.World.RegisterLog("k0rdent-simulator", s.simLog.Name())
	s.Sim, err = k0rdentsim.Start(ctx, k0rdentsim.Options{Config: s.World.Management.Config, World: s.World, ChartsDir: s.ChartsDir, Log: s.simLog, StatusInterval: o.StatusInterval})
	if err != nil {
		return s, err
	}
	s.progress("k0rdent simulator running (charts from %s)", s.ChartsDir)
	if err := k0rdentsim.Ensure(ctx, s.Client, namespace(SystemNamespace)); err != nil {
		return s, err
	}
	if s.rbac, err = s.applyChartRBAC(ctx); err != nil {
		return s, err
	}
	names := o.Components
	if names == nil {
		names = Components
	}
	for _, name := range names {
		c, err := s.startComponent(ctx, name, o.BinDir)
		if err != nil {
			s.Missing[name] = err.Error()
			s.progress("%s NOT started: %v", name, err)
			continue
		}
		s.Components[name] = c
		s.progress("%s running (pid %d, metrics %s, health %s)", name, c.Process.Pid(), c.MetricsAddr, c.HealthAddr)
	}
	for _, c := range s.Components {
		go s.supervise(c)
	}
	s.progress("local world up in %s", time.Since(start).Round(time.Millisecond))
	return s, nil
}

func (s *Stack) progress(format string, args ...any) {
	// Progress lines go to the test log: one that cannot be written is no reason to fail a run.
	_, _ = fmt.Fprintf(s.out, "[stack] "+format+"\n", args...)
}

// DumpLogs writes the tail of every log of the world, the simulator and the components.
func (s *Stack) DumpLogs(out io.Writer, lines int) {
	if s.World != nil {
		s.World.DumpLogs(out, lines)
	}
	names := make([]string, 0, len(s.Components))
	for n := range s.Components {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := s.Components[n].Process
		if _, err := fmt.Fprintf(out, "\n===== %s (%s), last %d lines =====\n%s\n", p.Name, p.LogPath, lines, p.Tail(lines)); err != nil {
			return // out is broken: the rest would not arrive either
		}
	}
}

// Stop ends the components, the simulator and the world, in that order. It is safe to call twice.
func (s *Stack) Stop() error {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	close(s.quit)
	var errs []error
	for i := len(Components) - 1; i >= 0; i-- {
		if c := s.Components[Components[i]]; c != nil {
			errs = append(errs, c.Process.Stop(world.StopGrace))
		}
	}
	if s.Sim != nil {
		if err := s.Sim.Stop(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	if s.World != nil {
		errs = append(errs, s.World.Stop())
	}
	if s.simLog != nil {
		_ = s.simLog.Close()
	}
	return errors.Join(errs...)
}
