// Command nodeimage packages one static binary as a single-layer OCI image and writes it as an OCI
// image-layout tarball (oci-layout, index.json, blobs/), which `ctr images import` and
// `docker load`/`podman load` read. It needs no container engine, so that the local world's node can
// run the project's own images on machines without Docker.
//
//	go run . -binary /tmp/bin/webhook -ref ghcr.io/exalsius/exalsius-operator/webhook:0.1.0 \
//	    -out dist/images/webhook.tar
//
// The image holds the binary at /manager (or -path), owned by root and executable by anyone, an
// /etc/passwd and /etc/group naming the numeric non-root user 65532 (nonroot), and runs as 65532:65532
// (-user), like the distroless static:nonroot base the Dockerfiles use.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is the timestamp of every file and of the image, so that the same binary gives the same
// image digest.
var epoch = time.Unix(0, 0).UTC()

func main() {
	binary := flag.String("binary", "", "the static binary to package (required)")
	ref := flag.String("ref", "", "image reference recorded in the layout, e.g. ghcr.io/org/name:tag (required)")
	out := flag.String("out", "", "OCI image-layout tarball to write (required)")
	path := flag.String("path", "/manager", "path of the binary inside the image (the entrypoint)")
	user := flag.String("user", "65532:65532", "user the image runs as")
	title := flag.String("title", "", "org.opencontainers.image.title label")
	flag.Parse()
	if err := build(*binary, *ref, *out, *path, *user, *title); err != nil {
		fmt.Fprintln(os.Stderr, "nodeimage:", err)
		os.Exit(1)
	}
}

func build(binary, ref, out, path, user, title string) error {
	switch {
	case binary == "":
		return errors.New("-binary is required")
	case ref == "":
		return errors.New("-ref is required")
	case out == "":
		return errors.New("-out is required")
	case !filepath.IsAbs(path):
		return fmt.Errorf("-path %q must be absolute", path)
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	layerTar, err := rootfs(path, bin)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return err
	}
	labels := map[string]string{"org.opencontainers.image.source": "https://github.com/exalsius/exalsius-operator"}
	if title != "" {
		labels["org.opencontainers.image.title"] = title
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS, cfg.Created = runtime.GOARCH, "linux", v1.Time{Time: epoch}
	cfg.Config = v1.Config{Entrypoint: []string{path}, User: user, WorkingDir: "/",
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, Labels: labels}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "nodeimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	// io.containerd.image.name is what `ctr images import` names the image after;
	// org.opencontainers.image.ref.name is the OCI layout's own name for it.
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": ref,
	}), layout.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH})); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return tarDir(dir, out)
}

// rootfs is the image's only layer: /etc/passwd and /etc/group with root and nonroot (65532), /tmp,
// and the binary.
func rootfs(path string, bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{"etc/": true, "tmp/": true}
	for d := filepath.Dir(path[1:]); d != "." && d != "/"; d = filepath.Dir(d) {
		dirs[d+"/"] = true
	}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	files := []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")},
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{path[1:], 0o755, bin},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes the files under dir into the tarball out, paths relative to dir.
func tarDir(dir, out string) error {
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), epoch, 0, 0, "", ""
		if info.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}
