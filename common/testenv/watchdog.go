package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// envtest starts kube-apiserver and etcd in their own process groups and has no way to stop them
// when the test binary dies without running its deferred calls (a `go test -timeout` panic, an
// os.Exit in a test, a SIGKILL). On a shared machine such orphans pile up. So every server runs
// under a small shell wrapper that also watches the test process and kills the server once the test
// process is gone. The wrapper forwards envtest's SIGTERM, so graceful stops behave as before.
const watchdogScript = `#!/bin/sh
# Written by common/testenv: runs %[1]s and kills it when the test process %[2]d exits.
bin=%[3]s
parent=%[2]d
case "$1" in --help|--version) exec "$bin" "$@" ;; esac
"$bin" "$@" &
child=$!
(
  while kill -0 "$parent" 2>/dev/null && kill -0 "$child" 2>/dev/null; do sleep 1; done
  kill -KILL "$child" 2>/dev/null
) </dev/null >/dev/null 2>&1 &
watcher=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
wait "$child"
rc=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; rc=$?; done
kill "$watcher" 2>/dev/null
exit "$rc"
`

// writeWatchdog writes into dir a wrapper named after bin that runs bin and kills it once the
// process parent is gone, and returns its path.
func writeWatchdog(dir, bin string, parent int) (string, error) {
	real, err := filepath.Abs(bin)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, filepath.Base(bin))
	if filepath.Clean(path) == real {
		// The wrapper would overwrite the binary and then run itself.
		return "", fmt.Errorf("the %s wrapper would replace %s itself", filepath.Base(bin), real)
	}
	script := fmt.Sprintf(watchdogScript, filepath.Base(bin), parent, shellQuote(real))
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		return "", fmt.Errorf("writing the %s wrapper: %w", filepath.Base(bin), err)
	}
	return path, nil
}

// wrapBinaries writes watchdog wrappers for kube-apiserver and etcd of the assets directory into
// root/bin and returns their paths.
func wrapBinaries(root, assets string) (apiserver, etcd string, err error) {
	dir := filepath.Join(root, "bin")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	apiserver, err = writeWatchdog(dir, filepath.Join(assets, "kube-apiserver"), os.Getpid())
	if err != nil {
		return "", "", err
	}
	etcd, err = writeWatchdog(dir, filepath.Join(assets, "etcd"), os.Getpid())
	if err != nil {
		return "", "", err
	}
	return apiserver, etcd, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
