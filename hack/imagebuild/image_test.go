package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// components reads the component list (common/components/names, one a line): this module builds
// alone, without common.
func components(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "common", "components", "names"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

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

// TestImages inspects the images `make images` wrote to $EXALSIUS_IMAGES_DIR (`make test-images`, part
// of `make test`, sets it): the layout's index and the name it gives the image (with
// $EXALSIUS_IMAGES_REGISTRY and $EXALSIUS_IMAGES_TAG: exactly the chart's default reference), each
// platform's config (user, entrypoint, labels) and, for the host platform, the binary from the
// image's layer, which must be static and answer --help.
func TestImages(t *testing.T) {
	dir := os.Getenv("EXALSIUS_IMAGES_DIR")
	if dir == "" {
		// Not a skip: a test that skips proves nothing, and `make test-images` always sets it.
		t.Fatal("EXALSIUS_IMAGES_DIR is not set: run `make test-images` (it builds the images first)")
	}
	wantVersion := os.Getenv("EXALSIUS_IMAGES_VERSION")
	registry, tag := os.Getenv("EXALSIUS_IMAGES_REGISTRY"), os.Getenv("EXALSIUS_IMAGES_TAG")
	for _, c := range components(t) {
		t.Run(c, func(t *testing.T) {
			idx, names := openLayout(t, filepath.Join(dir, c+".tar"))
			if err := checkName(names["io.containerd.image.name"]); err != nil {
				t.Errorf("io.containerd.image.name: %v", err)
			}
			if registry != "" && tag != "" {
				if want := registry + "/" + c + ":" + tag; names["io.containerd.image.name"] != want {
					t.Errorf("the layout names its image %q, want the chart's reference %q", names["io.containerd.image.name"], want)
				}
				if names["org.opencontainers.image.ref.name"] != tag {
					t.Errorf("the layout's ref.name is %q, want the tag %q", names["org.opencontainers.image.ref.name"], tag)
				}
			}
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
			Licenses: "Apache-2.0", Name: "example.com/test/webhook:0.0.0-test", Out: out})
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
	good := Options{Component: "webhook", Platforms: []string{"linux/amd64"}, Version: "1", Revision: "r",
		Created: time.Unix(1, 0), Name: "ghcr.io/exalsius/exalsius-operator/webhook:1", Out: "x"}
	if err := good.validate(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for _, n := range []string{"localhost/pause:1.0", "localhost:5000/webhook:1", "exalsius.local/pause:1.0"} {
		o := good
		o.Name = n
		if err := o.validate(); err != nil {
			t.Errorf("name %q refused: %v", n, err)
		}
	}
	for name, tc := range map[string]struct {
		change func(*Options)
		field  string
	}{
		"no component":   {func(o *Options) { o.Component = "" }, "--component"},
		"path component": {func(o *Options) { o.Component = "../x" }, "--component"},
		"windows":        {func(o *Options) { o.Platforms = []string{"windows/amd64"} }, "--platforms"},
		"no version":     {func(o *Options) { o.Version = "" }, "--version"},
		"no output":      {func(o *Options) { o.Out = "" }, "nothing to do"},
		"no name":        {func(o *Options) { o.Name = "" }, "--name"},
		// containerd stores a short name as given, but its CRI looks it up as docker.io/library/...
		"short name":       {func(o *Options) { o.Name = "webhook:0.1.0" }, "docker.io/library/webhook:0.1.0"},
		"no registry host": {func(o *Options) { o.Name = "exalsius/webhook:0.1.0" }, "--name"},
		"no tag":           {func(o *Options) { o.Name = "ghcr.io/exalsius/webhook" }, "--name"},
		"digest":           {func(o *Options) { o.Name = "ghcr.io/exalsius/webhook@sha256:" + strings.Repeat("a", 64) }, "--name"},
		"dir outside":      {func(o *Options) { o.Dir = "../elsewhere" }, "--dir"},
		"absolute dir":     {func(o *Options) { o.Dir = "/tmp" }, "--dir"},
	} {
		o := good
		tc.change(&o)
		err := o.validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: err %v, want one naming %s", name, err, tc.field)
		}
	}
}

// TestPause builds the node's pause image with the same builder and runs its binary: it must keep
// running (holding a pod's namespaces) and exit 0 on SIGTERM.
func TestPause(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the pause image")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the pause program is for Linux")
	}
	out := filepath.Join(t.TempDir(), "pause.tar")
	if _, err := Build(Options{Component: "pause", Dir: "hack/imagebuild/pause", RepoRoot: repoRoot(t),
		Platforms: []string{"linux/" + runtime.GOARCH}, Version: "1.0", Revision: "r", Created: time.Unix(1, 0),
		Source: "https://example.com/src", Licenses: "Apache-2.0", Name: "exalsius.local/pause:1.0", Out: out}); err != nil {
		t.Fatal(err)
	}
	idx, names := openLayout(t, out)
	if names["io.containerd.image.name"] != "exalsius.local/pause:1.0" || names["org.opencontainers.image.ref.name"] != "1.0" {
		t.Errorf("layout names %v", names)
	}
	imgs := platformImages(t, idx)
	if len(imgs) != 1 {
		t.Fatalf("%d platforms, want 1", len(imgs))
	}
	inspect(t, "pause", imgs[0].image, "1.0")
	path := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(path, layerFile(t, imgs[0].image), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path)
	if err := cmd.Start(); err != nil {
		t.Fatalf("running the pause binary: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// It exits 0 on SIGTERM once its handler is installed; a SIGTERM that wins the race with the
	// program's start ends it by the signal. Anything else (another status, another signal) is wrong.
	err := cmd.Wait()
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM) {
		t.Errorf("pause on SIGTERM: %v, want exit status 0", err)
	}
}

type platformImage struct {
	platform v1.Platform
	image    v1.Image
}

// openLayout unpacks an OCI layout tarball and returns the image index its index.json names, with the
// annotations index.json gives it (its names).
func openLayout(t *testing.T, path string) (v1.ImageIndex, map[string]string) {
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
	return idx, m.Manifests[0].Annotations
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
	path := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(path, layerFile(t, img), 0o755); err != nil {
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

// layerFile returns /manager from the image's only layer, checking it is the layer's only file, an
// executable and a static ELF binary.
func layerFile(t *testing.T, img v1.Image) []byte {
	t.Helper()
	bin, err := managerBinary(img)
	if err != nil {
		t.Fatal(err)
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
	return bin
}
