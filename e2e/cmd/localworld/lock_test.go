package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runAs starts /bin/sleep under another program name and returns its pid.
func runAs(t *testing.T, name string) int {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	src, err := os.Open("/bin/sleep")
	if err != nil {
		t.Skip("no /bin/sleep:", err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	_ = dst.Close()
	cmd := exec.Command(bin, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

func TestLockTakesOverALockOfAnotherProgram(t *testing.T) {
	path := filepath.Join(t.TempDir(), "localworld.lock")
	other := runAs(t, "not-the-world")
	if err := os.WriteFile(path, []byte(itoa(other)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unlock, err := lock(path)
	if err != nil {
		t.Fatalf("a lock held by pid %d of another program was not taken over: %v", other, err)
	}
	unlock()
}

func TestLockRefusesWhileALocalWorldRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "localworld.lock")
	world := runAs(t, "localworld")
	if err := os.WriteFile(path, []byte(itoa(world)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := lock(path); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("lock while a local world (pid %d) runs: %v", world, err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
