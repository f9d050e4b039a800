package main

// imagebuild verify checks a release folder as a user receiving it would, and more: every checksum,
// every signature, each image layout, each SBOM against its image's binaries, and the one version in
// the chart package, install.yaml and the images. Every error names the artefact it is about.

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// VerifyRelease returns every problem found, joined. keyPath is the trusted public key; empty means
// <dist>/cosign.pub, which proves only that the artefacts belong together: whoever could replace them
// could replace that key too, so a user passes the key they got from the project.
func VerifyRelease(r Release, keyPath string, allowUnsigned bool, log io.Writer) error {
	if err := needVersion(r); err != nil {
		return err
	}
	var errs []error
	fail := func(artefact string, err error) { errs = append(errs, fmt.Errorf("%s: %w", artefact, err)) }

	sums, err := readSums(r.path(SumsFile))
	if err != nil {
		return fmt.Errorf("%s: %w", SumsFile, err)
	}
	want := map[string]bool{}
	for _, a := range r.Artefacts() {
		want[a] = true
		if _, ok := sums[a]; !ok {
			fail(a, fmt.Errorf("not listed in %s", SumsFile))
		}
	}
	for _, a := range sortedKeys(sums) {
		if !want[a] {
			fail(a, fmt.Errorf("listed in %s but not an artefact of release %s", SumsFile, r.Version))
			continue
		}
		got, err := fileSHA256(r.path(a))
		if err != nil {
			fail(a, err)
		} else if got != sums[a] {
			fail(a, fmt.Errorf("SHA-256 %s, %s says %s", got, SumsFile, sums[a]))
		}
	}

	if err := verifySignatures(r, keyPath, allowUnsigned, sums, log); err != nil {
		errs = append(errs, err)
	}

	digests, err := readDigests(r.path("images/digests.txt"))
	if err != nil {
		fail("images/digests.txt", err)
	}
	for _, c := range r.Components {
		if err := verifyImage(r, c, digests); err != nil {
			errs = append(errs, err)
		}
	}
	chart := "exalsius-operator-" + r.Version + ".tgz"
	if err := checkChartVersion(r.path(chart), r.Version); err != nil {
		fail(chart, err)
	}
	if err := checkBundleVersion(r.path("install.yaml"), r.Version, r.Components); err != nil {
		fail("install.yaml", err)
	}
	for _, p := range r.PluginPlatforms {
		if err := checkPluginArchive(r.path(pluginArchive(r.Version, p)), p); err != nil {
			fail(pluginArchive(r.Version, p), err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(log, "[release] %s: %d artefacts of %s verified (checksums, layouts, SBOMs, versions)\n", r.Dist, len(sums), r.Version)
	return nil
}

func verifySignatures(r Release, keyPath string, allowUnsigned bool, sums map[string]string, log io.Writer) error {
	if keyPath == "" {
		keyPath = r.path(PublicKeyFile)
		if _, err := os.Stat(keyPath); errors.Is(err, os.ErrNotExist) && allowUnsigned {
			_, _ = fmt.Fprintf(log, "[release] !!! %s is NOT SIGNED: no %s (set SIGNING_KEY to sign) !!!\n", r.Dist, PublicKeyFile)
			return nil
		}
	}
	pub, err := LoadPublicKey(keyPath)
	if err != nil {
		return fmt.Errorf("public key: %w", err)
	}
	var errs []error
	for _, a := range append([]string{SumsFile}, sortedKeys(sums)...) {
		if err := VerifyFile(pub, r.path(a)); err != nil {
			errs = append(errs, fmt.Errorf("%s.sig: %w", a, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(log, "[release] %s and %d artefacts: signatures verify with %s\n", SumsFile, len(sums), keyPath)
	return nil
}

func verifyImage(r Release, c string, digests map[string]string) error {
	artefact := "images/" + c + ".tar"
	l, err := OpenLayout(r.path(artefact))
	if err != nil {
		return fmt.Errorf("%s: %w", artefact, err)
	}
	defer l.Close()
	var errs []error
	if n := l.Names["io.containerd.image.name"]; !strings.HasSuffix(n, "/"+c+":"+r.Version) {
		errs = append(errs, fmt.Errorf("named %q, want <registry>/%s:%s", n, c, r.Version))
	}
	if tag := l.Names["org.opencontainers.image.ref.name"]; tag != r.Version {
		errs = append(errs, fmt.Errorf("ref.name %q, want %s", tag, r.Version))
	}
	for _, img := range l.Images {
		cf, err := img.Image.ConfigFile()
		if err == nil && cf.Config.Labels["org.opencontainers.image.version"] != r.Version {
			errs = append(errs, fmt.Errorf("%s: version label %q, want %s", img.Platform.String(), cf.Config.Labels["org.opencontainers.image.version"], r.Version))
		}
	}
	if digests != nil && digests[c] != l.Digest.String() {
		errs = append(errs, fmt.Errorf("index digest %s, images/digests.txt says %q", l.Digest, digests[c]))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w", artefact, err)
	}
	if err := checkSBOM(r.path(sbomPath(c)), c, r.Version, l); err != nil {
		return fmt.Errorf("%s (of %s): %w", sbomPath(c), artefact, err)
	}
	return nil
}

// readDigests parses images/digests.txt: "<component> <index digest>" per line (hack/images.sh).
func readDigests(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for n, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: not \"<component> <digest>\"", n+1)
		}
		out[f[0]] = f[1]
	}
	return out, nil
}

// checkChartVersion reads Chart.yaml from the chart package: version and appVersion must be version.
func checkChartVersion(path, version string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("not gzip: %w", err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return errors.New("no exalsius-operator/Chart.yaml in the package")
		}
		if err != nil {
			return err
		}
		if h.Name != "exalsius-operator/Chart.yaml" {
			continue
		}
		fields := map[string]string{}
		sc := bufio.NewScanner(tr)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && (k == "version" || k == "appVersion") {
				fields[k] = strings.Trim(strings.TrimSpace(v), `"'`)
			}
		}
		var errs []error
		for _, k := range []string{"version", "appVersion"} {
			if fields[k] != version {
				errs = append(errs, fmt.Errorf("Chart.yaml %s %q, want %s", k, fields[k], version))
			}
		}
		return errors.Join(errs...)
	}
}

var (
	imageLine = regexp.MustCompile(`^\s*image:\s*"?([^"\s]+)"?\s*$`)
	chartLine = regexp.MustCompile(`^\s*helm\.sh/chart:\s*"?exalsius-operator-([^"\s]+)"?\s*$`)
	appLine   = regexp.MustCompile(`^\s*app\.kubernetes\.io/version:\s*"?([^"\s]+)"?\s*$`)
)

// checkBundleVersion wants every component's image at version in install.yaml, no image of the
// project at another tag, and the chart and app version labels at version.
func checkBundleVersion(path, version string, components []string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	found := map[string]bool{}
	var errs []error
	for n, line := range strings.Split(string(data), "\n") {
		if m := imageLine.FindStringSubmatch(line); m != nil {
			ref := m[1]
			for _, c := range components {
				if i := strings.LastIndex(ref, "/"+c+":"); i >= 0 {
					found[c] = true
					if tag := ref[i+len(c)+2:]; tag != version {
						errs = append(errs, fmt.Errorf("line %d: image %s, want tag %s", n+1, ref, version))
					}
				}
			}
		}
		for _, re := range []*regexp.Regexp{chartLine, appLine} {
			if m := re.FindStringSubmatch(line); m != nil && m[1] != version {
				errs = append(errs, fmt.Errorf("line %d: %s, want %s", n+1, strings.TrimSpace(line), version))
			}
		}
	}
	for _, c := range components {
		if !found[c] {
			errs = append(errs, fmt.Errorf("no image of %s", c))
		}
	}
	return errors.Join(errs...)
}
