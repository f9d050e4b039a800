// Command imagebuild builds the exalsius-operator component images without a container engine: a
// static Go binary (CGO off, -trimpath, no VCS stamp) in a single layer on an empty base, run as the
// numeric non-root user 65532, with the OCI labels source, version, revision, licenses, title and
// created. The result is written as one OCI image layout tarball per component, its image named by
// --name (the full reference under which `ctr images import`, `docker load` and `podman load` store
// it), and, with --push, to a registry as a multi-platform image index.
//
// The same program builds the local world node's pause image (docs/NODE.md) from ./pause, with
// --dir hack/imagebuild/pause: one image builder for every image the project runs.
//
// Its subcommands sbom, sums, sign and verify (release.go) make and check the release artefacts.
//
// Builds are reproducible: every timestamp (layer entries, image config, the layout tarball) is the
// commit time given by --created, and the Go build embeds no path, VCS data or time, so the same
// commit gives the same digests on any machine.
//
//	imagebuild --component webhook --repo-root . --platforms linux/amd64,linux/arm64 \
//	  --version 0.1.0 --revision $(git rev-parse HEAD) --created $(git log -1 --format=%cI) \
//	  --name ghcr.io/exalsius/exalsius-operator/webhook:0.1.0 --out dist/images/webhook.tar \
//	  [--push ghcr.io/exalsius/exalsius-operator/webhook:0.1.0]
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// User is the numeric user and group the images run as (the chart's pod security context).
const User = "65532:65532"

// Entrypoint is where the binary sits in the image.
const Entrypoint = "/manager"

// Options describe one component image.
type Options struct {
	Component string   // folder and binary name: colony-controller, workspace-controller, ...
	RepoRoot  string   // the repository root (holding the component folder)
	Dir       string   // the Go main package to build, relative to RepoRoot; empty is the Component folder
	Name      string   // full reference registry/repository:tag the layout names its image (io.containerd.image.name)
	Platforms []string // os/arch[/variant]
	Version   string   // release version, e.g. 0.1.0
	Revision  string   // git commit
	Created   time.Time
	Source    string // repository URL
	Licenses  string // SPDX expression
	Out       string // OCI layout tarball to write; empty writes none
	Push      []string
	Log       io.Writer // progress lines; one that cannot be written fails no build
}

func main() {
	// A first argument that is not a flag is a release subcommand (release.go).
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		os.Exit(releaseMain(os.Args[1:]))
	}
	var o Options
	var platforms, created, push string
	flag.StringVar(&o.Component, "component", "", "Component folder to build (colony-controller, workspace-controller, inventory-collector, webhook).")
	flag.StringVar(&o.RepoRoot, "repo-root", ".", "Repository root.")
	flag.StringVar(&o.Dir, "dir", "", "Go main package to build, relative to --repo-root (default: the --component folder).")
	flag.StringVar(&o.Name, "name", "", "Full image reference (registry/repository:tag) the OCI layout names its image with; required with --out.")
	flag.StringVar(&platforms, "platforms", "linux/"+runtime.GOARCH, "Comma-separated platforms (os/arch[/variant]).")
	flag.StringVar(&o.Version, "version", "", "Version label (org.opencontainers.image.version).")
	flag.StringVar(&o.Revision, "revision", "", "Git commit (org.opencontainers.image.revision).")
	flag.StringVar(&created, "created", "", "RFC 3339 creation time, normally the commit time; every timestamp in the image is this one.")
	flag.StringVar(&o.Source, "source", "https://github.com/exalsius/exalsius-operator", "Source repository (org.opencontainers.image.source).")
	flag.StringVar(&o.Licenses, "licenses", "Apache-2.0", "SPDX license expression (org.opencontainers.image.licenses).")
	flag.StringVar(&o.Out, "out", "", "OCI image layout tarball to write.")
	flag.StringVar(&push, "push", "", "Comma-separated image references to push the image index to (credentials from the Docker config).")
	flag.Parse()
	o.Platforms = splitList(platforms)
	o.Push = splitList(push)
	o.Log = os.Stderr
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		fmt.Fprintf(os.Stderr, "imagebuild: --created: %v\n", err)
		os.Exit(2)
	}
	o.Created = t
	digest, err := Build(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "imagebuild: %s: %v\n", o.Component, err)
		os.Exit(1)
	}
	fmt.Printf("%s %s\n", o.Component, digest)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (o Options) validate() error {
	var errs []error
	if o.Component == "" || strings.ContainsAny(o.Component, "/\\. ") {
		errs = append(errs, fmt.Errorf("--component: %q is not a component folder name", o.Component))
	}
	if len(o.Platforms) == 0 {
		errs = append(errs, errors.New("--platforms: at least one platform is required"))
	}
	for _, p := range o.Platforms {
		if _, err := v1.ParsePlatform(p); err != nil || !strings.HasPrefix(p, "linux/") {
			errs = append(errs, fmt.Errorf("--platforms: %q is not linux/<arch>[/<variant>]", p))
		}
	}
	if o.Version == "" {
		errs = append(errs, errors.New("--version is required"))
	}
	if o.Revision == "" {
		errs = append(errs, errors.New("--revision is required"))
	}
	if o.Created.IsZero() {
		errs = append(errs, errors.New("--created is required"))
	}
	if o.Out == "" && len(o.Push) == 0 {
		errs = append(errs, errors.New("nothing to do: set --out or --push"))
	}
	if o.Out != "" {
		if err := checkName(o.Name); err != nil {
			errs = append(errs, fmt.Errorf("--name: %w", err))
		}
	}
	if o.Dir != "" && (filepath.IsAbs(o.Dir) || strings.HasPrefix(filepath.Clean(o.Dir), "..")) {
		errs = append(errs, fmt.Errorf("--dir: %q is not a folder inside the repository", o.Dir))
	}
	return errors.Join(errs...)
}

// checkName accepts a full image reference with a registry host and a tag. A short name such as
// webhook:0.1.0 is refused: containerd stores it as given, but its CRI (the kubelet's view) looks it
// up as docker.io/library/webhook:0.1.0 and finds nothing, so a pod of that image never starts.
func checkName(ref string) error {
	if ref == "" {
		return errors.New("required with --out: the full reference (registry/repository:tag) the layout names its image")
	}
	host, _, ok := strings.Cut(ref, "/")
	if !ok || (!strings.ContainsAny(host, ".:") && host != "localhost") {
		return fmt.Errorf("%q names no registry host (e.g. ghcr.io/org/component:tag): a container runtime would read it as docker.io/library/%s", ref, ref)
	}
	if strings.Contains(ref, "@") {
		return fmt.Errorf("%q: a digest cannot be a layout's name; give a tag", ref)
	}
	if _, err := name.NewTag(ref, name.StrictValidation); err != nil {
		return fmt.Errorf("%q: %w", ref, err)
	}
	return nil
}

// Labels are the OCI annotations every image config (and the index) carries.
func (o Options) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.url":         o.Source,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.licenses":    o.Licenses,
		"org.opencontainers.image.title":       "exalsius-operator " + o.Component,
		"org.opencontainers.image.created":     o.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.vendor":      "exalsius",
		"org.opencontainers.image.description": "exalsius-operator " + o.Component + " (static binary on an empty base)",
	}
}

// Build builds the image index of every platform, writes and pushes it, and returns its digest.
func Build(o Options) (v1.Hash, error) {
	if err := o.validate(); err != nil {
		return v1.Hash{}, err
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	created := o.Created.UTC().Truncate(time.Second)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.Platforms {
		plat, _ := v1.ParsePlatform(p)
		bin, err := goBuild(o, plat)
		if err != nil {
			return v1.Hash{}, err
		}
		img, err := image(o, plat, bin, created)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
	}
	annotated, ok := mutate.Annotations(idx, o.Labels()).(v1.ImageIndex)
	if !ok {
		return v1.Hash{}, errors.New("annotating the image index")
	}
	idx = annotated
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	if o.Out != "" {
		if err := writeLayoutTar(o, idx, created); err != nil {
			return v1.Hash{}, err
		}
		_, _ = fmt.Fprintf(o.Log, "[images] %s: wrote %s (index %s)\n", o.Component, o.Out, digest)
	}
	for _, ref := range o.Push {
		r, err := name.ParseReference(ref)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("--push: %w", err)
		}
		if err := remote.WriteIndex(r, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
		}
		_, _ = fmt.Fprintf(o.Log, "[images] %s: pushed %s@%s\n", o.Component, ref, digest)
	}
	return digest, nil
}

// goBuild builds the component for one platform from its module alone (GOWORK=off), reproducibly.
func goBuild(o Options, plat *v1.Platform) ([]byte, error) {
	dir := filepath.Join(o.RepoRoot, o.Component)
	if o.Dir != "" {
		dir = filepath.Join(o.RepoRoot, o.Dir)
	}
	tmp, err := os.MkdirTemp("", "imagebuild-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	out := filepath.Join(tmp, "manager")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-mod=readonly", "-ldflags=-s -w -buildid=", "-o", out, ".")
	cmd.Dir = dir
	env := []string{"CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=", "GOOS=" + plat.OS, "GOARCH=" + plat.Architecture}
	if plat.Variant != "" {
		switch plat.Architecture {
		case "arm":
			env = append(env, "GOARM="+strings.TrimPrefix(plat.Variant, "v"))
		case "amd64":
			env = append(env, "GOAMD64="+plat.Variant)
		}
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = o.Log, o.Log
	_, _ = fmt.Fprintf(o.Log, "[images] %s: go build for %s\n", o.Component, plat)
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build in %s for %s: %w", dir, plat, err)
	}
	return os.ReadFile(out)
}

// image is the one-layer image of a binary.
func image(o Options, plat *v1.Platform, bin []byte, created time.Time) (v1.Image, error) {
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(Entrypoint, "/"), Mode: 0o555,
		Size: int64(len(bin)), ModTime: created, Format: tar.FormatUSTAR}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: created}, CreatedBy: "imagebuild: go build -trimpath ./" + o.Component, Comment: "static binary at " + Entrypoint,
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Created = v1.Time{Time: created}
	cf.Author = "exalsius"
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{Entrypoint},
		WorkingDir: "/",
		Env:        []string{"PATH=/"},
		Labels:     o.Labels(),
	}
	return mutate.ConfigFile(img, cf)
}

// writeLayoutTar writes the index as an OCI image layout and packs it into a tarball whose entries
// are sorted and all carry the creation time, so the tarball itself is reproducible.
func writeLayoutTar(o Options, idx v1.ImageIndex, created time.Time) error {
	tmp, err := os.MkdirTemp("", "imagebuild-layout-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	// io.containerd.image.name is the name `ctr images import` stores the image under (and the
	// kubelet then finds it by); org.opencontainers.image.ref.name is the layout's tag, which
	// `skopeo copy oci-archive:...` and `podman load` read.
	tag, err := name.NewTag(o.Name, name.StrictValidation)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag.TagStr(),
		"io.containerd.image.name":          o.Name,
	})); err != nil {
		return err
	}
	var files []string
	if err := filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != tmp {
			files = append(files, path)
		}
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(files)
	if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(o.Out), ".image-*.tar")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	tw := tar.NewWriter(f)
	for _, path := range files {
		rel, _ := filepath.Rel(tmp, path)
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: created, Mode: 0o644, Format: tar.FormatPAX}
		if info.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		} else {
			h.Typeflag, h.Size = tar.TypeReg, info.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.IsDir() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if _, err := tw.Write(data); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), o.Out)
}
