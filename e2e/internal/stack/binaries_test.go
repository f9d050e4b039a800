package stack

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A binary missing or older than its sources (or common's) is rebuilt; an up-to-date one is kept.
func TestEnsureBinariesRebuildsStaleOnes(t *testing.T) {
	root := t.TempDir()
	write := func(p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "common", "go.mod"), "module example.com/common\n\ngo 1.22\n")
	write(filepath.Join(root, "common", "c.go"), "package common\n")
	write(filepath.Join(root, "comp", "go.mod"), "module example.com/comp\n\ngo 1.22\n")
	write(filepath.Join(root, "comp", "main.go"), "package main\n\nfunc main() {}\n")
	t.Setenv("GOWORK", "off")
	bin := filepath.Join(root, "bin")
	ctx := context.Background()

	if _, err := EnsureBinaries(ctx, root, bin, []string{"comp"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "comp")); err != nil {
		t.Fatalf("a missing binary was not built: %v", err)
	}
	// Mark the binary old, but newer than the sources: it must be kept.
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{"common/go.mod", "common/c.go", "comp/go.mod", "comp/main.go"} {
		if err := os.Chtimes(filepath.Join(root, p), old.Add(-time.Hour), old.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(filepath.Join(bin, "comp"), old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureBinaries(ctx, root, bin, []string{"comp"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(bin, "comp")); err != nil || !st.ModTime().Equal(old) {
		t.Fatal("an up-to-date binary was rebuilt")
	}
	// A change in common makes it stale.
	if err := os.Chtimes(filepath.Join(root, "common", "c.go"), time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureBinaries(ctx, root, bin, []string{"comp"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(bin, "comp")); err != nil || st.ModTime().Equal(old) {
		t.Fatal("a binary older than common's sources was not rebuilt")
	}
}
