package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// envStandIn makes the test binary, started again by runAs, wait instead of running the tests: it
// stands in for another program that holds the lock's pid.
const envStandIn = "LOCALWORLD_LOCK_TEST_STAND_IN"

// standInReady is the line the stand-in prints once it runs.
const standInReady = "stand-in running"

func TestMain(m *testing.M) {
	if os.Getenv(envStandIn) == "1" {
		// Say it runs: its command line is readable from now on (right after exec, before the new
		// program has started, /proc/<pid>/cmdline can still read empty).
		fmt.Println(standInReady)
		// Wait until the test that started this process kills it (or the test binary's stdin closes,
		// so that an interrupted test leaves no process behind).
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runAs starts a copy of this test binary under another program name (so that its command line
// names it) and returns its pid. The binary is the test's own, so the test needs nothing of the host.
func runAs(t *testing.T, name string) int {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal("locating the test binary:", err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close() }() // read only: nothing to lose
	bin := filepath.Join(t.TempDir(), name)
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), envStandIn+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Start returns once the kernel has begun the new program, which can be before its command line
	// is set: wait for the stand-in to say it runs.
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != standInReady {
		t.Fatalf("the stand-in %s did not start: %q, %v", name, line, err)
	}
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
