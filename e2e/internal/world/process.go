package world

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process supervises one external program of the local world (kube-controller-manager,
// kube-scheduler, kwok, or a component binary). Its standard output and error go to one log file in
// the run folder, which is appended to across restarts so that a test failure shows the whole story;
// while it runs, its pid is in the pid file beside the log (PidPath).
type Process struct {
	// Name identifies the process in logs and failure dumps, e.g. "child/demo-gpu/kwok".
	Name string
	// Path is the executable.
	Path string
	// Args are the command-line arguments, without the program name.
	Args []string
	// Env is added to the parent's environment.
	Env []string
	// LogPath is the file the process writes to.
	LogPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	exitErr error
	logFile *os.File
}

// Start launches the process. It is an error to start a process that is running.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !p.exitedLocked() {
		return fmt.Errorf("%s is already running (pid %d)", p.Name, p.cmd.Process.Pid)
	}
	if err := os.MkdirAll(filepath.Dir(p.LogPath), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "==== %s: starting %s %q\n", time.Now().Format(time.RFC3339), p.Path, p.Args); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing the log of %s: %w", p.Name, err)
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout = f
	cmd.Stderr = f
	// Own process group, so that a stop reaches the whole tree, and a kill of the parent (the test
	// binary or `make run`) takes the process with it. The death signal is tied to the OS thread that
	// started the process, so that thread stays locked to the goroutine waiting for the process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	done, started := make(chan struct{}), make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		// The process is gone and its exit recorded above: a log line that cannot be written has no
		// one left to tell.
		_, _ = fmt.Fprintf(f, "==== %s: exited: %v\n", time.Now().Format(time.RFC3339), err)
		_ = f.Close()
		_ = os.Remove(p.PidPath()) // a missing file is what we want
		close(done)
	}()
	if err := <-started; err != nil {
		_ = f.Close()
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	p.cmd, p.logFile, p.done, p.exitErr = cmd, f, done, nil
	// Written after the start, removed after the exit (before done closes, so before a restart
	// writes the next pid): a pid file names a running process of this run. One that cannot be
	// written costs a convenience, not the run.
	_ = os.WriteFile(p.PidPath(), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	return nil
}

// PidPath is the file holding the process id while the process runs: the log's path with .pid for
// its extension (components/webhook.pid beside components/webhook.log), so that
// `kill $(cat <file>)` reaches it.
func (p *Process) PidPath() string {
	return strings.TrimSuffix(p.LogPath, filepath.Ext(p.LogPath)) + ".pid"
}

func (p *Process) exitedLocked() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Running reports whether the process has been started and has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.exitedLocked()
}

// Pid returns the process id, or 0 when it is not running.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exitedLocked() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Exited returns a channel closed when the current run of the process ends, and nil when it never
// started.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// ExitError returns how the last run ended (nil while running or after a clean exit).
func (p *Process) ExitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// Stop sends SIGTERM to the process group, waits up to grace, then sends SIGKILL. Stopping a process
// that is not running is a no-op.
func (p *Process) Stop(grace time.Duration) error {
	return p.signal(syscall.SIGTERM, grace)
}

// Kill sends SIGKILL at once, as a crash would.
func (p *Process) Kill() error {
	return p.signal(syscall.SIGKILL, 0)
}

func (p *Process) signal(sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	if sig != syscall.SIGKILL {
		select {
		case <-done:
			return nil
		case <-time.After(grace):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit", p.Name, cmd.Process.Pid)
	}
}

// Restart stops the process (gracefully) and starts it again with the same arguments.
func (p *Process) Restart(grace time.Duration) error {
	if err := p.Stop(grace); err != nil {
		return err
	}
	return p.Start()
}

// Tail returns the last n lines of the process log.
func (p *Process) Tail(n int) string {
	return TailFile(p.LogPath, n)
}

// TailFile returns the last n lines of a file, or a note saying why it cannot be read.
func TailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	const maxRead = 256 << 10
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	off := int64(0)
	if st.Size() > maxRead {
		off = st.Size() - maxRead
	}
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(buf, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
