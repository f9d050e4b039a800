package testenv

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeServer writes a script that prints its pid and then sleeps like a server.
func fakeServer(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "fake-server")
	script := "#!/bin/sh\nif [ \"$1\" = --help ]; then echo '  --some-flag  help text'; exit 0; fi\n" +
		"echo $$\nexec sleep 600\n"
	if err := os.WriteFile(bin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return bin
}

// startWrapped runs the watchdog wrapper for a fake server watching parent, with data in cleanup and
// its pid in pidFile (unless empty); it returns the wrapper command and the fake server's pid once the fake server runs.
func startWrapped(t *testing.T, parent int, cleanup, pidFile string) (*exec.Cmd, int) {
	t.Helper()
	wrapper, err := writeWatchdog(t.TempDir(), fakeServer(t, t.TempDir()), parent, cleanup, pidFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(wrapper, "--some-flag=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the fake server's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	return cmd, pid
}

func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestWatchdogKillsServerWhenTestProcessDies(t *testing.T) {
	// A stand-in for the test process: the wrapper watches it instead of us.
	parent := exec.Command("sleep", "600")
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(data, "etcd"), 0o700); err != nil {
		t.Fatal(err)
	}
	wrapper, server := startWrapped(t, parent.Process.Pid, data, "")

	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()

	// The wrapper exits only once its server is gone.
	err := wrapper.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("wrapper exit: %v, want the killed server's status", err)
	}
	if !processGone(server) {
		t.Fatalf("server %d still runs after the test process died", server)
	}
	// The watcher removes the data right after the kill; wait for it to finish (it exits then).
	waitGone(t, data)
}

// waitGone waits until path no longer exists (the test's timeout bounds the wait).
func waitGone(t *testing.T, path string) {
	t.Helper()
	for {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestWatchdogForwardsTerm(t *testing.T) {
	data := t.TempDir()
	wrapper, server := startWrapped(t, os.Getpid(), data, "")
	// envtest stops a server by signalling its process group; the wrapper alone must suffice too.
	if err := wrapper.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = wrapper.Wait()
	if !processGone(server) {
		t.Fatalf("server %d still runs after SIGTERM to its wrapper", server)
	}
	// A graceful stop keeps the data: Restart and Resume rely on it.
	if _, err := os.Stat(data); err != nil {
		t.Fatalf("data removed on a graceful stop: %v", err)
	}
}

// TestWatchdogWritesThePidFile: while the server runs, the pid file holds its pid (the server's,
// not the wrapper's, so that a kill reaches it); once it has stopped, the file is gone.
func TestWatchdogWritesThePidFile(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "fake-server.pid")
	wrapper, server := startWrapped(t, os.Getpid(), "", pidFile)
	// The wrapper writes the file right after starting the server, which may already have printed
	// its pid: wait for the file.
	var got string
	for {
		b, err := os.ReadFile(pidFile)
		if got = strings.TrimSpace(string(b)); err == nil && got != "" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != strconv.Itoa(server) {
		t.Fatalf("pid file holds %q, want the server's pid %d (the wrapper is %d)", got, server, wrapper.Process.Pid)
	}
	if err := wrapper.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = wrapper.Wait()
	if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pid file left behind after the server stopped: %v", err)
	}
}

func TestWatchdogPassesHelpThrough(t *testing.T) {
	wrapper, err := writeWatchdog(t.TempDir(), fakeServer(t, t.TempDir()), os.Getpid(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(wrapper, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help through the wrapper: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "--some-flag") {
		t.Fatalf("--help output lost: %q", out)
	}
}

func TestWatchdogRefusesToReplaceItsBinary(t *testing.T) {
	dir := t.TempDir()
	bin := fakeServer(t, dir)
	if _, err := writeWatchdog(dir, bin, os.Getpid(), "", ""); err == nil {
		t.Fatal("writeWatchdog wrote a wrapper over the binary it wraps")
	}
	b, err := os.ReadFile(bin)
	if err != nil || !strings.Contains(string(b), "exec sleep") {
		t.Fatalf("the wrapped binary changed: %q, %v", b, err)
	}
}

func TestShellQuote(t *testing.T) {
	for _, s := range []string{"plain", "with space", "it's", `a"b`, "$HOME", "`x`", ""} {
		out, err := exec.Command("sh", "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if string(out) != s {
			t.Errorf("shellQuote(%q) evaluates to %q", s, out)
		}
	}
}
