package main

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestBuild packages a file, unpacks the tarball as an OCI layout and checks what `ctr images import`
// and the kubelet rely on: the name annotations, the platform, the user, the entrypoint and the files.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	const ref = "ghcr.io/exalsius/exalsius-operator/webhook:0.1.0"
	if err := build(bin, ref, out, "/manager", "65532:65532", "t"); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// Same input, same bytes: timestamps are fixed.
	if err := build(bin, ref, out, "/manager", "65532:65532", "t"); err != nil {
		t.Fatal(err)
	}
	if second, _ := os.ReadFile(out); string(second) != string(first) {
		t.Error("two builds of the same binary differ")
	}
	unpacked := filepath.Join(dir, "layout")
	if err := os.Mkdir(unpacked, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("tar", "-xf", out, "-C", unpacked).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, b)
	}
	lp, err := layout.FromPath(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	man, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Manifests) != 1 {
		t.Fatalf("%d manifests, want 1", len(man.Manifests))
	}
	d := man.Manifests[0]
	if d.Annotations["io.containerd.image.name"] != ref || d.Annotations["org.opencontainers.image.ref.name"] != ref {
		t.Errorf("annotations %v, want both names %s", d.Annotations, ref)
	}
	if d.Platform == nil || d.Platform.OS != "linux" {
		t.Errorf("platform %+v", d.Platform)
	}
	img, err := idx.Image(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/manager" {
		t.Errorf("config user %q entrypoint %v", cfg.Config.User, cfg.Config.Entrypoint)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
		if h.Name == "etc/passwd" {
			b, _ := io.ReadAll(tr)
			if !strings.Contains(string(b), "nonroot:x:65532:65532") {
				t.Errorf("/etc/passwd lacks nonroot 65532:\n%s", b)
			}
		}
	}
	if h := files["manager"]; h == nil || h.Mode&0o111 == 0 || h.Uid != 0 {
		t.Errorf("manager entry %+v: want an executable owned by root", h)
	}
	if h := files["tmp/"]; h == nil || h.Mode&0o1777 != 0o1777 {
		t.Errorf("tmp/ entry %+v: want mode 1777", h)
	}
}

func TestBuildRejectsBadInput(t *testing.T) {
	for name, args := range map[string][4]string{
		"no binary":     {"", "r:1", "/tmp/x.tar", "/manager"},
		"no ref":        {"/bin/sh", "", "/tmp/x.tar", "/manager"},
		"no out":        {"/bin/sh", "r:1", "", "/manager"},
		"relative path": {"/bin/sh", "r:1", "/tmp/x.tar", "manager"},
		"missing file":  {"/nonexistent", "r:1", "/tmp/x.tar", "/manager"},
	} {
		if err := build(args[0], args[1], args[2], args[3], "65532:65532", ""); err == nil {
			t.Errorf("%s: build accepted it", name)
		}
	}
}
