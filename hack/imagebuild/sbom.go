package main

// One CycloneDX 1.5 SBOM per component image, made from the image itself: for every platform, the
// Go build info embedded in its /manager binary (debug/buildinfo: the main module, every module
// compiled in with its version and go.sum hash, replacements, the Go version and build settings).
// That is what cyclonedx-gomod's `bin` mode reads too; reading it here instead of building that tool
// keeps the release to the standard library and the go-containerregistry this module already has, and
// lets `imagebuild verify` regenerate the list from the binary and compare. The images have no base
// image and no other layer (one static binary on an empty base), so the binaries are all there is.

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
)

// CycloneDX 1.5 JSON, the fields used here.
type (
	BOM struct {
		BOMFormat    string       `json:"bomFormat"`
		SpecVersion  string       `json:"specVersion"`
		SerialNumber string       `json:"serialNumber"`
		Version      int          `json:"version"`
		Metadata     BOMMetadata  `json:"metadata"`
		Components   []Component  `json:"components"`
		Dependencies []Dependency `json:"dependencies"`
	}
	BOMMetadata struct {
		Timestamp string    `json:"timestamp,omitempty"`
		Tools     BOMTools  `json:"tools"`
		Component Component `json:"component"`
	}
	BOMTools struct {
		Components []Component `json:"components"`
	}
	Component struct {
		BOMRef     string     `json:"bom-ref,omitempty"`
		Type       string     `json:"type"`
		Name       string     `json:"name"`
		Version    string     `json:"version,omitempty"`
		PURL       string     `json:"purl,omitempty"`
		Hashes     []Hash     `json:"hashes,omitempty"`
		Properties []Property `json:"properties,omitempty"`
	}
	Hash struct {
		Alg     string `json:"alg"`
		Content string `json:"content"`
	}
	Property struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	Dependency struct {
		Ref       string   `json:"ref"`
		DependsOn []string `json:"dependsOn"`
	}
)

// ImageSBOM is the SBOM of one component's image layout.
func ImageSBOM(component, version string, l *Layout) (*BOM, error) {
	repo, _, _ := strings.Cut(l.Names["io.containerd.image.name"], ":"+l.Names["org.opencontainers.image.ref.name"])
	created := ""
	if im, err := l.Index.IndexManifest(); err == nil {
		created = im.Annotations["org.opencontainers.image.created"]
	}
	imageRef := "image:" + component
	bom := &BOM{
		BOMFormat: "CycloneDX", SpecVersion: "1.5", Version: 1,
		SerialNumber: serial(l.Digest.Hex),
		Metadata: BOMMetadata{
			Timestamp: created,
			Tools:     BOMTools{Components: []Component{{Type: "application", Name: "imagebuild", Version: version}}},
			Component: Component{
				BOMRef: imageRef, Type: "container", Name: repo, Version: version,
				PURL:   fmt.Sprintf("pkg:oci/%s@%s?repository_url=%s&tag=%s", component, l.Digest, repo, version),
				Hashes: []Hash{{Alg: "SHA-256", Content: l.Digest.Hex}},
			},
		},
	}
	seen := map[string]bool{}
	var binRefs []string
	for _, img := range l.Images {
		bin, deps, err := binaryComponents(component, version, img)
		if err != nil {
			return nil, err
		}
		bom.Components = append(bom.Components, bin)
		binRefs = append(binRefs, bin.BOMRef)
		var refs []string
		for _, d := range deps {
			refs = append(refs, d.BOMRef)
			if !seen[d.BOMRef] {
				seen[d.BOMRef] = true
				bom.Components = append(bom.Components, d)
			}
		}
		bom.Dependencies = append(bom.Dependencies, Dependency{Ref: bin.BOMRef, DependsOn: refs})
	}
	bom.Dependencies = append([]Dependency{{Ref: imageRef, DependsOn: binRefs}}, bom.Dependencies...)
	return bom, nil
}

// binaryComponents is the binary of one platform and the modules (and Go standard library) in it.
func binaryComponents(component, version string, img PlatformBinary) (Component, []Component, error) {
	info, err := buildinfo.Read(bytes.NewReader(img.Binary))
	if err != nil {
		return Component{}, nil, fmt.Errorf("%s %s: no Go build info: %w", component, img.Platform.String(), err)
	}
	sum := sha256.Sum256(img.Binary)
	bin := Component{
		BOMRef: "binary:" + img.Platform.String(), Type: "application", Name: info.Main.Path, Version: version,
		PURL:   fmt.Sprintf("pkg:golang/%s@v%s?type=module&goos=%s&goarch=%s", info.Main.Path, version, img.Platform.OS, img.Platform.Architecture),
		Hashes: []Hash{{Alg: "SHA-256", Content: hex.EncodeToString(sum[:])}},
		Properties: []Property{
			{Name: "exalsius:image:path", Value: Entrypoint},
			{Name: "exalsius:image:platform", Value: img.Platform.String()},
			{Name: "exalsius:go:version", Value: info.GoVersion},
		},
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "CGO_ENABLED", "GOOS", "GOARCH", "GOARM", "GOAMD64", "-trimpath", "-ldflags":
			bin.Properties = append(bin.Properties, Property{Name: "exalsius:go:build:" + s.Key, Value: s.Value})
		}
	}
	deps := []Component{{BOMRef: "pkg:golang/std@" + info.GoVersion, Type: "library", Name: "std", Version: info.GoVersion,
		PURL: "pkg:golang/std@" + info.GoVersion}}
	for _, m := range info.Deps {
		deps = append(deps, moduleComponent(m))
	}
	sort.Slice(deps, func(i, j int) bool { return deps[i].BOMRef < deps[j].BOMRef })
	return bin, deps, nil
}

// moduleComponent is a module as compiled in: a replaced module is listed as its replacement (what
// was built), with the path it replaced as a property.
func moduleComponent(m *debug.Module) Component {
	used := m
	var props []Property
	if m.Replace != nil {
		used = m.Replace
		props = append(props, Property{Name: "exalsius:go:replaces", Value: m.Path + "@" + m.Version})
	}
	purl := "pkg:golang/" + used.Path + "@" + used.Version + "?type=module"
	c := Component{BOMRef: purl, Type: "library", Name: used.Path, Version: used.Version, PURL: purl, Properties: props}
	// The go.sum hash h1:<base64> is a SHA-256 (of the module's file list); CycloneDX wants hex.
	if raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(used.Sum, "h1:")); err == nil && len(raw) == sha256.Size && strings.HasPrefix(used.Sum, "h1:") {
		c.Hashes = []Hash{{Alg: "SHA-256", Content: hex.EncodeToString(raw)}}
	}
	return c
}

// serial is a stable urn:uuid derived from the image digest, so the same image gives the same SBOM.
func serial(digestHex string) string {
	s := sha256.Sum256([]byte("exalsius-operator sbom " + digestHex))
	s[6] = s[6]&0x0f | 0x50
	s[8] = s[8]&0x3f | 0x80
	h := hex.EncodeToString(s[:16])
	return fmt.Sprintf("urn:uuid:%s-%s-%s-%s-%s", h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
}

// WriteSBOMs writes dist/sbom/<component>.cdx.json for every component image in dist/images.
func WriteSBOMs(r Release, log io.Writer) error {
	if err := os.MkdirAll(r.path("sbom"), 0o755); err != nil {
		return err
	}
	var errs []error
	for _, c := range r.Components {
		if err := writeSBOM(r, c, log); err != nil {
			errs = append(errs, fmt.Errorf("images/%s.tar: %w", c, err))
		}
	}
	return errors.Join(errs...)
}

func writeSBOM(r Release, c string, log io.Writer) error {
	l, err := OpenLayout(r.path("images/" + c + ".tar"))
	if err != nil {
		return err
	}
	defer l.Close()
	version := r.Version
	if version == "" {
		version = l.Names["org.opencontainers.image.ref.name"]
	}
	bom, err := ImageSBOM(c, version, l)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(bom, "", "  ")
	if err != nil {
		return err
	}
	out := r.path(sbomPath(c))
	if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(log, "[release] %s: %d components (%d platforms)\n", filepath.ToSlash(out), len(bom.Components), len(l.Images))
	return nil
}

// checkSBOM compares an SBOM file with the one the layout's binaries give: the same binaries (by
// platform and SHA-256) and, for each, the same modules at the same versions.
func checkSBOM(path, component, version string, l *Layout) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var got BOM
	if err := json.Unmarshal(data, &got); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if got.BOMFormat != "CycloneDX" || got.SpecVersion != "1.5" {
		return fmt.Errorf("bomFormat %q specVersion %q, want CycloneDX 1.5", got.BOMFormat, got.SpecVersion)
	}
	want, err := ImageSBOM(component, version, l)
	if err != nil {
		return err
	}
	if got.Metadata.Component.PURL != want.Metadata.Component.PURL {
		return fmt.Errorf("describes %s, the image is %s", got.Metadata.Component.PURL, want.Metadata.Component.PURL)
	}
	index := func(b *BOM) (map[string]string, map[string][]string) {
		hashes := map[string]string{}
		for _, c := range b.Components {
			if strings.HasPrefix(c.BOMRef, "binary:") && len(c.Hashes) > 0 {
				hashes[c.BOMRef] = c.Hashes[0].Content
			}
		}
		deps := map[string][]string{}
		for _, d := range b.Dependencies {
			deps[d.Ref] = d.DependsOn
		}
		return hashes, deps
	}
	gotHash, gotDeps := index(&got)
	wantHash, wantDeps := index(want)
	var errs []error
	for ref, h := range wantHash {
		if gotHash[ref] != h {
			errs = append(errs, fmt.Errorf("%s: SHA-256 %q, the image's binary has %s", ref, gotHash[ref], h))
		}
		if missing, extra := diff(wantDeps[ref], gotDeps[ref]); len(missing)+len(extra) > 0 {
			errs = append(errs, fmt.Errorf("%s: modules missing from the SBOM %v, listed but not in the binary %v", ref, missing, extra))
		}
	}
	for ref := range gotHash {
		if _, ok := wantHash[ref]; !ok {
			errs = append(errs, fmt.Errorf("%s: not in the image", ref))
		}
	}
	// The dependencies name modules by bom-ref; the component a ref points at must say the same
	// module and version, or a reader of the components list would see something else.
	gotComp := map[string]Component{}
	for _, c := range got.Components {
		gotComp[c.BOMRef] = c
	}
	for _, w := range want.Components {
		if g, ok := gotComp[w.BOMRef]; !ok {
			errs = append(errs, fmt.Errorf("component %s missing", w.BOMRef))
		} else if g.Name != w.Name || g.Version != w.Version || g.PURL != w.PURL {
			errs = append(errs, fmt.Errorf("component %s says %s %s (%s), the binary has %s %s", w.BOMRef, g.Name, g.Version, g.PURL, w.Name, w.Version))
		}
	}
	return errors.Join(errs...)
}

// diff returns what want has and got lacks, and what got has and want lacks.
func diff(want, got []string) (missing, extra []string) {
	in := func(list []string) map[string]bool {
		m := map[string]bool{}
		for _, s := range list {
			m[s] = true
		}
		return m
	}
	w, g := in(want), in(got)
	for _, s := range want {
		if !g[s] {
			missing = append(missing, s)
		}
	}
	for _, s := range got {
		if !w[s] {
			extra = append(extra, s)
		}
	}
	return missing, extra
}
