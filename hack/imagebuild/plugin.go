package main

// imagebuild plugin builds the kubectl plugin's release archives: for each platform of
// Release.PluginPlatforms, dist/plugin/kubectl-exalsius_<version>_<os>_<arch>.tar.gz holding the
// binary kubectl-exalsius (built with CGO off, -trimpath and without VCS stamps, from the module alone)
// and LICENSE. The archives are reproducible: fixed owners, modes and times, no gzip name or time.
// sums lists them and sign signs them like every other artefact; verify opens each one.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// PluginName is the plugin's module folder and binary: kubectl runs it as `kubectl exalsius`.
const PluginName = "kubectl-exalsius"

// DefaultPluginPlatforms are the platforms a release ships the plugin for.
const DefaultPluginPlatforms = "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64"

// pluginArchive is the archive of one platform (os/arch), relative to Dist.
func pluginArchive(version, platform string) string {
	return "plugin/" + PluginName + "_" + version + "_" + strings.ReplaceAll(platform, "/", "_") + ".tar.gz"
}

// BuildPluginArchives writes the archive of every platform of r.PluginPlatforms.
func BuildPluginArchives(r Release, repoRoot string, log io.Writer) error {
	if err := needVersion(r); err != nil {
		return err
	}
	license, err := os.ReadFile(filepath.Join(repoRoot, "LICENSE"))
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "plugin-build-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	for _, p := range r.PluginPlatforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok || goos == "" || goarch == "" {
			return fmt.Errorf("plugin platform %q: want os/arch", p)
		}
		bin := filepath.Join(tmp, goos+"_"+goarch, PluginName)
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", bin, ".")
		cmd.Dir = filepath.Join(repoRoot, PluginName)
		cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s for %s: %w\n%s", PluginName, p, err, out)
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		archive, err := tarGz([]tarFile{{PluginName, 0o755, data}, {"LICENSE", 0o644, license}})
		if err != nil {
			return err
		}
		out := r.path(pluginArchive(r.Version, p))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(out, archive, 0o644); err != nil {
			return err
		}
		_, _ = fmt.Fprintf(log, "[release] %s\n", pluginArchive(r.Version, p))
	}
	return nil
}

type tarFile struct {
	name string
	mode int64
	data []byte
}

// tarGz packs files with fixed owners and times, so that equal inputs give equal bytes.
func tarGz(files []tarFile) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// executableMagic are the first bytes of an executable of each OS the plugin ships for.
var executableMagic = map[string][][]byte{
	"linux":  {[]byte("\x7fELF")},
	"darwin": {{0xcf, 0xfa, 0xed, 0xfe}, {0xfe, 0xed, 0xfa, 0xcf}},
}

// checkPluginArchive wants the archive of platform to hold an executable kubectl-exalsius for its OS
// and LICENSE.
func checkPluginArchive(path, platform string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	found := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		found[h.Name] = true
		if h.Name != PluginName {
			continue
		}
		if h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 {
			return fmt.Errorf("%s is not an executable file (mode %o)", PluginName, h.Mode)
		}
		head := make([]byte, 4)
		if _, err := io.ReadFull(tr, head); err != nil {
			return fmt.Errorf("%s: %w", PluginName, err)
		}
		goos, _, _ := strings.Cut(platform, "/")
		ok := false
		for _, m := range executableMagic[goos] {
			ok = ok || bytes.Equal(head, m)
		}
		if !ok {
			return fmt.Errorf("%s is not a %s executable", PluginName, goos)
		}
	}
	for _, want := range []string{PluginName, "LICENSE"} {
		if !found[want] {
			return fmt.Errorf("no %s in the archive", want)
		}
	}
	return nil
}
