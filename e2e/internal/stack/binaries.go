package stack

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// EnsureBinaries makes sure binDir holds a component binary built from the current sources for each
// component: a binary older than any Go source, go.mod or go.sum of its module, of common, or than
// go.work is rebuilt (go build), so that a `go test` run directly in e2e never tests stale binaries.
// An empty binDir means a folder under the system's temporary directory; the folder used is returned.
func EnsureBinaries(ctx context.Context, repoRoot, binDir string, components []string, out io.Writer) (string, error) {
	if binDir == "" {
		binDir = filepath.Join(os.TempDir(), "exalsius-operator-e2e-bin")
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	common, err := newestSource(filepath.Join(repoRoot, "common"))
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(filepath.Join(repoRoot, "go.work")); err == nil && st.ModTime().After(common) {
		common = st.ModTime()
	}
	for _, name := range components {
		src, err := newestSource(filepath.Join(repoRoot, name))
		if err != nil {
			return "", err
		}
		if common.After(src) {
			src = common
		}
		bin := filepath.Join(binDir, name)
		if st, err := os.Stat(bin); err == nil && !st.ModTime().Before(src) {
			continue
		}
		_, _ = fmt.Fprintf(out, "[stack] building %s into %s (missing or older than its sources)\n", name, binDir)
		start := time.Now()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
		cmd.Dir = filepath.Join(repoRoot, name)
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("building %s: %w\n%s", name, err, b)
		}
		_, _ = fmt.Fprintf(out, "[stack] built %s in %s\n", name, time.Since(start).Round(time.Second))
	}
	return binDir, nil
}

// newestSource returns the newest modification time of the module's non-test Go files, go.mod and
// go.sum (charts and docs do not change a binary).
func newestSource(dir string) (time.Time, error) {
	var newest time.Time
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != dir && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		n := d.Name()
		if (strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go")) || n == "go.mod" || n == "go.sum" {
			info, err := d.Info()
			if err != nil {
				return err
			}
			if info.ModTime().After(newest) {
				newest = info.ModTime()
			}
		}
		return nil
	})
	return newest, err
}
