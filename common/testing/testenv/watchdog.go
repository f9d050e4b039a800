package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// envtest starts kube-apiserver and etcd in their own process groups and has no way to stop them
// when the test binary dies without running its deferred calls (a `go test -timeout` panic, an
// os.Exit in a test, a SIGKILL). On a shared machine such orphans pile up, each with its etcd data
// (over 100 MB). So every server runs under a small shell wrapper that also watches the test process
// and, once it is gone, kills the server and removes the server's directory. The wrapper forwards
// envtest's SIGTERM, so graceful stops (and Restart, which keeps the data) behave as before.
const watchdogScript = `#!/bin/sh
# Written by common/testing/testenv: runs %[1]s; once the test process %[2]d is gone, kills it and removes
# its data. While it runs, its pid is in the pid file (when one is named).
bin=%[3]s
parent=%[2]d
cleanup=%[4]s
pidfile=%[5]s
case "$1" in --help|--version) exec "$bin" "$@" ;; esac
# The trap is set before the server starts: a SIGTERM that arrives while it starts is forwarded too.
child=
term=
trap 'term=1; if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; fi' TERM INT
"$bin" "$@" &
child=$!
if [ -n "$pidfile" ]; then echo "$child" >"$pidfile"; fi
if [ -n "$term" ]; then kill -TERM "$child" 2>/dev/null; fi
(
  while kill -0 "$child" 2>/dev/null; do
    if ! kill -0 "$parent" 2>/dev/null; then
      kill -KILL "$child" 2>/dev/null
      if [ -n "$cleanup" ]; then rm -rf "$cleanup"; fi
      if [ -n "$pidfile" ]; then rm -f "$pidfile"; fi
      exit 0
    fi
    sleep 1
  done
) </dev/null >/dev/null 2>&1 &
wait "$child"
rc=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; rc=$?; done
if [ -n "$pidfile" ]; then rm -f "$pidfile"; fi
# The watcher is not killed: it may be between killing the server and removing its data (the test
# process died), and it exits on its own within a second of the server's end.
exit "$rc"
`

// writeWatchdog writes into dir a wrapper named after bin that runs bin and, once the process
// parent is gone, kills it and removes cleanup (unless empty). While bin runs, its pid is in pidFile
// (unless empty), so that `kill $(cat <file>)` reaches the server itself. It returns the wrapper's
// path.
func writeWatchdog(dir, bin string, parent int, cleanup, pidFile string) (string, error) {
	real, err := filepath.Abs(bin)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, filepath.Base(bin))
	if filepath.Clean(path) == real {
		// The wrapper would overwrite the binary and then run itself.
		return "", fmt.Errorf("the %s wrapper would replace %s itself", filepath.Base(bin), real)
	}
	script := fmt.Sprintf(watchdogScript, filepath.Base(bin), parent, shellQuote(real), shellQuote(cleanup), shellQuote(pidFile))
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		return "", fmt.Errorf("writing the %s wrapper: %w", filepath.Base(bin), err)
	}
	return path, nil
}

// wrapBinaries writes watchdog wrappers for kube-apiserver and etcd of the assets directory into
// root/bin and returns their paths. Should the test process die, the wrappers remove root. With
// pidDir set, the servers' pids are in pidDir/kube-apiserver.pid and pidDir/etcd.pid while they run.
func wrapBinaries(root, assets, pidDir string) (apiserver, etcd string, err error) {
	dir := filepath.Join(root, "bin")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	apiserver, err = writeWatchdog(dir, filepath.Join(assets, "kube-apiserver"), os.Getpid(), root, pidPath(pidDir, "kube-apiserver"))
	if err != nil {
		return "", "", err
	}
	etcd, err = writeWatchdog(dir, filepath.Join(assets, "etcd"), os.Getpid(), root, pidPath(pidDir, "etcd"))
	if err != nil {
		return "", "", err
	}
	return apiserver, etcd, nil
}

// pidPath is the pid file of a server in pidDir, or "" (no pid file) when pidDir is empty.
func pidPath(pidDir, server string) string {
	if pidDir == "" {
		return ""
	}
	return filepath.Join(pidDir, server+".pid")
}

// makeServerDirs creates root/etcd and root/apiserver (the servers' data) and the watchdog wrappers
// in root/bin (writing the servers' pid files into pidDir, unless empty), and returns the wrappers'
// paths.
func makeServerDirs(root, assets, pidDir string) (apiserver, etcd string, err error) {
	for _, d := range []string{"etcd", "apiserver"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o700); err != nil {
			return "", "", err
		}
	}
	return wrapBinaries(root, assets, pidDir)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
