package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// errorLooking matches a line a newcomer would read as something gone wrong.
var errorLooking = regexp.MustCompile(`(?i)error|fail|panic|warn|cannot|unable|refused|exit status`)

// TestCleanStop runs `make run`'s program (the local world without the quick start and without
// components, to stay cheap) until it is up, checks that its run folder holds a pid file per API
// server, etcd and kube-controller-manager naming the running process, stops it as Ctrl-C does, and
// checks that it exits 0, prints no error-looking line while stopping, and leaves no pid file.
func TestCleanStop(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, ".run", "localworld.lock")); err == nil {
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 && isLocalWorld(pid) {
			t.Skipf("SKIPPED: a local world (pid %d) holds %s/.run/localworld.lock; stop it to run this test", pid, root)
		}
	}
	bin := filepath.Join(t.TempDir(), "localworld")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building localworld: %v\n%s", err, out)
	}
	var out lockedBuffer
	cmd := exec.Command(bin, "--bin-dir", t.TempDir(), "--repo-root", root, "--quickstart", "none")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})

	// Up once the banner asks for Ctrl-C (the test's timeout bounds the wait).
	for !strings.Contains(out.String(), "Press Ctrl-C to stop") {
		select {
		case err := <-exited:
			t.Fatalf("localworld exited before it was up (%v):\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	m := regexp.MustCompile(`\[stack\] run folder: (\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no run folder in the output:\n%s", out.String())
	}
	runDir := m[1]
	for _, name := range []string{"kube-apiserver", "etcd", "kube-controller-manager"} {
		pidFile := filepath.Join(runDir, "management", name+".pid")
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Errorf("%s: %v", pidFile, err)
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", strings.TrimSpace(string(b)), "exe"))
		if err != nil || filepath.Base(exe) != name {
			t.Errorf("%s holds %q, whose executable is %q (%v), want %s", pidFile, b, exe, err, name)
		}
	}

	before := len(out.String())
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Errorf("localworld exited with %v after Ctrl-C, want 0", err)
	}
	stopping := out.String()[before:]
	if !strings.Contains(stopping, "[localworld] stopped; logs stay in") {
		t.Errorf("the stop does not say where the logs stay:\n%s", stopping)
	}
	sc := bufio.NewScanner(strings.NewReader(stopping))
	for sc.Scan() {
		if errorLooking.MatchString(sc.Text()) {
			t.Errorf("a clean stop printed an error-looking line: %q\nwhole stop:\n%s", sc.Text(), stopping)
		}
	}
	left, err := filepath.Glob(filepath.Join(runDir, "*", "*.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("pid files left after a clean stop: %v", left)
	}
	if _, err := os.Stat(filepath.Join(root, ".run", "localworld.lock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lock is left after a clean stop: %v", err)
	}
}

// TestMakeRunDoesNotGoRun: an interrupted `go run` exits 1 whatever the program does (the go
// command's builder sets that status on SIGINT), and make then prints "Error 1" for a clean Ctrl-C.
// `make run` therefore builds the local world and runs the binary.
func TestMakeRunDoesNotGoRun(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join("..", "..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"run", "run-chart"} {
		var recipe []string
		in := false
		for _, line := range strings.Split(string(mk), "\n") {
			switch {
			case strings.HasPrefix(line, target+":"):
				in = true
			case in && strings.HasPrefix(line, "\t"):
				recipe = append(recipe, line)
			case in:
				in = false
			}
		}
		if len(recipe) == 0 {
			t.Fatalf("no recipe of the %s target in the Makefile", target)
		}
		for _, line := range recipe {
			if strings.Contains(line, "go run") {
				t.Errorf("make %s goes through `go run`, so Ctrl-C ends in make's \"Error 1\": %s", target, strings.TrimSpace(line))
			}
		}
	}
}
