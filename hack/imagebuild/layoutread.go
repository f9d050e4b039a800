package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// A Layout is an unpacked OCI layout tarball as imagebuild writes it: index.json names one image
// index (with the io.containerd.image.name and ref.name annotations) holding one image per platform.
type Layout struct {
	Names  map[string]string // index.json's annotations of the image index
	Index  v1.ImageIndex
	Digest v1.Hash // the image index's digest (what digests.txt lists and a registry serves)
	Images []PlatformBinary
	dir    string
}

// PlatformBinary is one platform's image and the /manager binary from its layer.
type PlatformBinary struct {
	Platform v1.Platform
	Image    v1.Image
	Binary   []byte
}

// Close removes the unpacked layout.
func (l *Layout) Close() { _ = os.RemoveAll(l.dir) }

// OpenLayout unpacks an OCI layout tarball and checks it is well-formed: every blob's digest and size
// (go-containerregistry's validate), one tagged image index, a platform on every manifest, a config
// naming the same platform, and one layer holding exactly the binary /manager.
func OpenLayout(path string) (*Layout, error) {
	dir, err := os.MkdirTemp("", "imagebuild-verify-")
	if err != nil {
		return nil, err
	}
	l := &Layout{dir: dir}
	if err := l.open(path); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Layout) open(path string) error {
	if err := untar(path, l.dir); err != nil {
		return err
	}
	root, err := layout.ImageIndexFromPath(l.dir)
	if err != nil {
		return fmt.Errorf("not an OCI image layout: %w", err)
	}
	m, err := root.IndexManifest()
	if err != nil {
		return fmt.Errorf("index.json: %w", err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] == "" {
		return fmt.Errorf("index.json should name one tagged image index, has %d entries", len(m.Manifests))
	}
	l.Names, l.Digest = m.Manifests[0].Annotations, m.Manifests[0].Digest
	if l.Index, err = root.ImageIndex(l.Digest); err != nil {
		return fmt.Errorf("image index %s: %w", l.Digest, err)
	}
	if err := validate.Index(l.Index); err != nil {
		return fmt.Errorf("image index %s: %w", l.Digest, err)
	}
	im, err := l.Index.IndexManifest()
	if err != nil {
		return err
	}
	if len(im.Manifests) == 0 {
		return errors.New("the image index lists no platform")
	}
	for _, d := range im.Manifests {
		if d.Platform == nil {
			return fmt.Errorf("manifest %s has no platform", d.Digest)
		}
		img, err := l.Index.Image(d.Digest)
		if err != nil {
			return fmt.Errorf("manifest %s: %w", d.Digest, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return fmt.Errorf("%s config: %w", d.Platform, err)
		}
		if cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture {
			return fmt.Errorf("%s: the config says %s/%s", d.Platform, cf.OS, cf.Architecture)
		}
		if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != Entrypoint || cf.Config.User != User {
			return fmt.Errorf("%s config: entrypoint %v user %q, want [%s] and %s", d.Platform, cf.Config.Entrypoint, cf.Config.User, Entrypoint, User)
		}
		bin, err := managerBinary(img)
		if err != nil {
			return fmt.Errorf("%s: %w", d.Platform, err)
		}
		l.Images = append(l.Images, PlatformBinary{Platform: *d.Platform, Image: img, Binary: bin})
	}
	return nil
}

// managerBinary returns /manager from the image's only layer, which must hold only it, executable.
func managerBinary(img v1.Image) ([]byte, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) != 1 {
		return nil, fmt.Errorf("%d layers, want one on an empty base", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return nil, err
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
			return nil, fmt.Errorf("layer: %w", err)
		}
		names = append(names, h.Name)
		if h.Name == strings.TrimPrefix(Entrypoint, "/") {
			if h.Mode&0o111 == 0 {
				return nil, fmt.Errorf("%s is not executable: mode %o", Entrypoint, h.Mode)
			}
			var buf bytes.Buffer
			if _, err := io.Copy(&buf, tr); err != nil {
				return nil, err
			}
			bin = buf.Bytes()
		}
	}
	if bin == nil || len(names) != 1 {
		return nil, fmt.Errorf("the layer should hold exactly %s, has %v", Entrypoint, names)
	}
	return bin, nil
}

func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not a tar archive: %w", err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, dir+string(filepath.Separator)) {
			return fmt.Errorf("tar entry %q escapes the layout", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.Create(target)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("tar entry %q: type %c is not a file or folder", h.Name, h.Typeflag)
		}
	}
}
