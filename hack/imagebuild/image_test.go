package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

var components = []string{"colony-controller", "workspace-controller", "inventory-collector", "webhook"}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("repository root not found at %s: %v", root, err)
	}
	return root
}

// TestImages inspects the images `make images` wrote to $EXALSIUS_IMAGES_DIR (make test-images sets
// it): the layout's index, each platform's config (user, entrypoint, labels) and, for the host
// platform, the binary from the image's layer, which must be static and answer --help.
func TestImages(t *testing.T) {
	dir := os.Getenv("EXALSIUS_IMAGES_DIR")
	if dir == "" {
		t.Skip("EXALSIUS_IMAGES_DIR is not set: run `make test-images` (it builds the images first)")
	}
	wantVersion := os.Getenv("EXALSIUS_IMAGES_VERSION")
	for _, c := range components {
		t.Run(c, func(t *testing.T) {
			idx := openLayout(t, filepath.Join(dir, c+".tar"))
			ran := false
			for _, img := range platformImages(t, idx) {
				inspect(t, c, img.image, wantVersion)
				if img.platform.OS == "linux" && img.platform.Architecture == runtime.GOARCH {
					runHelp(t, img.image)
					ran = true
				}
			}
			if !ran && runtime.GOOS == "linux" {
				t.Errorf("no linux/%s image to run", runtime.GOARCH)
			}
		})
	}
}

// TestReproducible builds the same component twice and wants identical digests and tarballs, and a
// different created time to change them (so the comparison can fail).
func TestReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a component three times")
	}
	root := repoRoot(t)
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	build := func(out string, when time.Time) (v1.Hash, string) {
		d, err := Build(Options{Component: "webhook", RepoRoot: root, Platforms: []string{"linux/" + runtime.GOARCH},
			Version: "0.0.0-test", Revision: "0123456789abcdef", Created: when, Source: "https://example.com/src",
			Licenses: "Apache-2.0", Out: out})
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		return d, hex.EncodeToString(sum[:])
	}
	tmp := t.TempDir()
	d1, s1 := build(filepath.Join(tmp, "a.tar"), created)
	d2, s2 := build(filepath.Join(tmp, "b.tar"), created)
	if d1 != d2 || s1 != s2 {
		t.Errorf("two builds of one commit differ: index %s vs %s, tarball %s vs %s", d1, d2, s1, s2)
	}
	d3, _ := build(filepath.Join(tmp, "c.tar"), created.Add(time.Hour))
	if d3 == d1 {
		t.Errorf("a different created time gave the same digest %s", d1)
	}
}

func TestOptionsRejectBadInput(t *testing.T) {
	for name, o := range map[string]Options{
		"no component":   {Platforms: []string{"linux/amd64"}, Version: "1", Revision: "r", Created: time.Unix(1, 0), Out: "x"},
		"path component": {Component: "../x", Platforms: []string{"linux/amd64"}, Version: "1", Revision: "r", Created: time.Unix(1, 0), Out: "x"},
		"windows":        {Component: "webhook", Platforms: []string{"windows/amd64"}, Version: "1", Revision: "r", Created: time.Unix(1, 0), Out: "x"},
		"no version":     {Component: "webhook", Platforms: []string{"linux/amd64"}, Revision: "r", Created: time.Unix(1, 0), Out: "x"},
		"no output":      {Component: "webhook", Platforms: []string{"linux/amd64"}, Version: "1", Revision: "r", Created: time.Unix(1, 0)},
	} {
		if _, err := Build(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

type platformImage struct {
	platform v1.Platform
	image    v1.Image
}

// openLayout unpacks an OCI layout tarball and returns the image index its index.json names.
func openLayout(t *testing.T, path string) v1.ImageIndex {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("image tarball: %v", err)
	}
	defer func() { _ = f.Close() }()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, dir+string(filepath.Separator)) {
			t.Fatalf("tar entry %q escapes the layout", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(target, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("%s is not an OCI image layout: %v", path, err)
	}
	m, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] == "" {
		t.Fatalf("index.json should name one tagged image index: %+v", m.Manifests)
	}
	idx, err := root.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func platformImages(t *testing.T, idx v1.ImageIndex) []platformImage {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) == 0 {
		t.Fatal("the image index lists no platform")
	}
	var out []platformImage
	for _, d := range m.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, platformImage{platform: *d.Platform, image: img})
	}
	return out
}

func inspect(t *testing.T, component string, img v1.Image, wantVersion string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want the numeric non-root 65532:65532", cf.Config.User)
	}
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/manager" || len(cf.Config.Cmd) != 0 {
		t.Errorf("entrypoint %v cmd %v, want [/manager] and no cmd", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	for _, l := range []string{"source", "version", "revision", "licenses", "created", "title"} {
		if cf.Config.Labels["org.opencontainers.image."+l] == "" {
			t.Errorf("label org.opencontainers.image.%s missing: %v", l, cf.Config.Labels)
		}
	}
	if wantVersion != "" && cf.Config.Labels["org.opencontainers.image.version"] != wantVersion {
		t.Errorf("version label %q, want %q", cf.Config.Labels["org.opencontainers.image.version"], wantVersion)
	}
	if !strings.HasSuffix(cf.Config.Labels["org.opencontainers.image.title"], component) {
		t.Errorf("title label %q does not name %s", cf.Config.Labels["org.opencontainers.image.title"], component)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Errorf("want one layer on an empty base, got %d", len(layers))
	}
}

// runHelp extracts /manager from the image's layer, checks it is a static executable and runs it
// with --help.
func runHelp(t *testing.T, img v1.Image) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) == 0 {
		t.Fatalf("layers: %v", err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	var bin []byte
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == "manager" {
			if h.Mode&0o111 == 0 {
				t.Errorf("/manager is not executable: mode %o", h.Mode)
			}
			if bin, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if bin == nil || len(names) != 1 {
		t.Fatalf("the layer should hold exactly /manager, has %v", names)
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("/manager is not an ELF binary: %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("/manager is dynamically linked (has an interpreter)")
		}
	}
	path := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("/manager --help: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "-metrics-bind-address") || !strings.Contains(string(out), "-health-probe-bind-address") {
		t.Errorf("/manager --help does not list the common flags:\n%s", out)
	}
}
