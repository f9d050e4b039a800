package stack

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A component that dies on its own is restarted, counted as a crash and logged; one stopped through
// Kill is left alone until Start.
func TestSuperviseRestartsCrashedComponent(t *testing.T) {
	out := &syncBuffer{}
	s := &Stack{quit: make(chan struct{}), out: out}
	dir := t.TempDir()
	c := &Component{Name: "sleeper", Process: &world.Process{Name: "component/sleeper", Path: "/bin/sleep", Args: []string{"600"}, LogPath: filepath.Join(dir, "sleeper.log")}}
	if err := c.Process.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { close(s.quit); _ = c.Process.Kill() }()
	go s.supervise(c)
	first := c.Process.Pid()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "restarted with a new pid", func() bool { p := c.Process.Pid(); return p != 0 && p != first })
	if n, last := c.Crashes(); n != 1 || !strings.Contains(last, "sleeper exited") {
		t.Errorf("crashes %d (%q), want 1", n, last)
	}
	waitFor(t, "the restart logged", func() bool { return strings.Contains(out.String(), "restarting in 1s") })

	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	// Start waits two seconds for the probe-less process: the supervisor has long seen the exit.
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Crashes(); n != 1 {
		t.Errorf("a Kill was counted as a crash: %d crashes, want 1", n)
	}
}
