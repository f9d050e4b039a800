package main

// The release subcommands of imagebuild turn what `make release` built into a verifiable release:
//
//	imagebuild plugin --dist dist --version x.y.z      the kubectl plugin's archives: dist/plugin/*.tar.gz (plugin.go)
//	imagebuild sbom   --dist dist                      one CycloneDX SBOM per image: dist/sbom/<component>.cdx.json
//	imagebuild sums   --dist dist --version x.y.z      dist/SHA256SUMS over every artefact
//	imagebuild sign   --dist dist --key key.pem        <artefact>.sig for SHA256SUMS and every artefact, dist/cosign.pub
//	imagebuild verify --dist dist --version x.y.z [--key cosign.pub] [--allow-unsigned]
//
// They live in this module, not in a new one, because they read the layouts this module writes with
// the same go-containerregistry, and because `make test-images` already runs this module's tests.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Release describes one dist/ folder.
type Release struct {
	Dist       string   // the folder holding the artefacts
	Version    string   // x.y.z: the chart's version, the images' tag
	Components []string // the component images (common/components/names)
	// PluginPlatforms are the os/arch the kubectl plugin's archives are built for; none, no archives.
	PluginPlatforms []string
}

// SumsFile is the checksum list; its signature is SumsFile+".sig".
const SumsFile = "SHA256SUMS"

// PublicKeyFile is where sign writes the public key, next to the artefacts.
const PublicKeyFile = "cosign.pub"

// Artefacts are the files of a release, relative to Dist, in the order SHA256SUMS lists them.
func (r Release) Artefacts() []string {
	out := []string{"install.yaml", "exalsius-operator-" + r.Version + ".tgz", "images/digests.txt"}
	for _, c := range r.Components {
		out = append(out, "images/"+c+".tar")
	}
	for _, c := range r.Components {
		out = append(out, sbomPath(c))
	}
	for _, p := range r.PluginPlatforms {
		out = append(out, pluginArchive(r.Version, p))
	}
	return out
}

func sbomPath(component string) string { return "sbom/" + component + ".cdx.json" }

func (r Release) path(rel string) string { return filepath.Join(r.Dist, filepath.FromSlash(rel)) }

// releaseMain runs a release subcommand and returns the exit code.
func releaseMain(args []string) int {
	fs := flag.NewFlagSet("imagebuild "+args[0], flag.ContinueOnError)
	var r Release
	var repoRoot, key, components, pluginPlatforms string
	var allowUnsigned bool
	fs.StringVar(&r.Dist, "dist", "dist", "Folder holding the release artefacts.")
	fs.StringVar(&r.Version, "version", "", "Release version x.y.z (sums, verify).")
	fs.StringVar(&repoRoot, "repo-root", ".", "Repository root: the components are read from common/components/names.")
	fs.StringVar(&components, "components", "", "Space- or comma-separated components (default: common/components/names).")
	fs.StringVar(&key, "key", "", "sign: PEM PKCS#8 (or SEC1) ECDSA P-256 private key; verify: PEM public key (default: <dist>/cosign.pub).")
	fs.StringVar(&pluginPlatforms, "plugin-platforms", DefaultPluginPlatforms, "Comma-separated os/arch of the kubectl plugin's archives (plugin, sums, verify); empty for none.")
	fs.BoolVar(&allowUnsigned, "allow-unsigned", false, "verify: accept a release without signatures (says so loudly).")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if components == "" {
		b, err := os.ReadFile(filepath.Join(repoRoot, "common", "components", "names"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "imagebuild %s: %v\n", args[0], err)
			return 2
		}
		components = string(b)
	}
	r.Components = strings.Fields(strings.ReplaceAll(components, ",", " "))
	r.PluginPlatforms = strings.Fields(strings.ReplaceAll(pluginPlatforms, ",", " "))
	var err error
	switch args[0] {
	case "plugin":
		err = BuildPluginArchives(r, repoRoot, os.Stderr)
	case "sbom":
		err = WriteSBOMs(r, os.Stderr)
	case "sums":
		err = WriteSums(r)
	case "sign":
		err = SignRelease(r, key, os.Stderr)
	case "verify":
		err = VerifyRelease(r, key, allowUnsigned, os.Stderr)
	default:
		fmt.Fprintf(os.Stderr, "imagebuild: unknown subcommand %q (plugin, sbom, sums, sign, verify)\n", args[0])
		return 2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "imagebuild %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func needVersion(r Release) error {
	if r.Version == "" {
		return errors.New("--version is required")
	}
	return nil
}

// WriteSums writes SHA256SUMS in the format `sha256sum -c` reads: "<hex>  <path>" per artefact.
// A missing artefact fails: a checksum list with a hole would sign an incomplete release.
func WriteSums(r Release) error {
	if err := needVersion(r); err != nil {
		return err
	}
	var b strings.Builder
	var errs []error
	for _, a := range r.Artefacts() {
		sum, err := fileSHA256(r.path(a))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
			continue
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, a)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.WriteFile(r.path(SumsFile), []byte(b.String()), 0o644)
}

// readSums parses SHA256SUMS into path -> hex digest.
func readSums(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 || name == "" {
			return nil, fmt.Errorf("%s line %d: not \"<sha256>  <path>\"", filepath.Base(path), n)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s line %d: %s listed twice", filepath.Base(path), n, name)
		}
		out[name] = sum
	}
	return out, sc.Err()
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
