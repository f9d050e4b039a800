package world

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestProcessLifecycle(t *testing.T) {
	p := &Process{
		Name:    "sleeper",
		Path:    "/bin/sh",
		Args:    []string{"-c", "echo started; trap 'echo got TERM; exit 0' TERM; while true; do sleep 0.1; done"},
		LogPath: filepath.Join(t.TempDir(), "sleeper.log"),
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if !p.Running() || p.Pid() == 0 {
		t.Fatal("not running after Start")
	}
	if err := p.Start(); err == nil {
		t.Fatal("a second Start of a running process must fail")
	}
	waitLog(t, p, "started")
	// The pid file beside the log names the running process.
	if b, err := os.ReadFile(p.PidPath()); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(p.Pid()) {
		t.Fatalf("pid file %s: %q, %v; want %d", p.PidPath(), b, err, p.Pid())
	}
	if filepath.Base(p.PidPath()) != "sleeper.pid" {
		t.Errorf("pid file %s, want sleeper.pid beside sleeper.log", p.PidPath())
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Fatal("running after Stop")
	}
	if _, err := os.Stat(p.PidPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pid file left after Stop: %v", err)
	}
	waitLog(t, p, "got TERM")
	if err := p.Restart(time.Second); err != nil {
		t.Fatal(err)
	}
	if !p.Running() {
		t.Fatal("not running after Restart")
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if p.ExitError() == nil {
		t.Error("a killed process must report its signal")
	}
	if n := strings.Count(TailFile(p.LogPath, 100), "==== "); n != 4 {
		t.Errorf("log has %d start/exit markers, want 4 (two runs):\n%s", n, TailFile(p.LogPath, 100))
	}
	if err := p.Stop(time.Second); err != nil {
		t.Errorf("stopping an exited process: %v", err)
	}
}

func waitLog(t *testing.T, p *Process, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.Tail(50), want) {
		if time.Now().After(deadline) {
			t.Fatalf("log lacks %q:\n%s", want, p.Tail(50))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTailFile(t *testing.T) {
	if got := TailFile(filepath.Join(t.TempDir(), "missing"), 3); !strings.HasPrefix(got, "(no log") {
		t.Errorf("missing file: %q", got)
	}
}
