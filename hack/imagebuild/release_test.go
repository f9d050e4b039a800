package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

const testVersion = "1.2.3"

// The release tests build one real image once (this module's own main package, so the binary carries
// real modules: go-containerregistry and its dependencies) and copy the resulting dist/ per test.
var (
	templateOnce sync.Once
	templateDir  string
	templateErr  error
)

func testRelease(t *testing.T) Release {
	t.Helper()
	templateOnce.Do(func() { templateDir, templateErr = buildTemplate(repoRoot(t)) })
	if templateErr != nil {
		t.Fatal(templateErr)
	}
	dist := filepath.Join(t.TempDir(), "dist")
	if err := copyTree(templateDir, dist); err != nil {
		t.Fatal(err)
	}
	return Release{Dist: dist, Version: testVersion, Components: []string{"alpha"}}
}

func buildTemplate(root string) (string, error) {
	dist, err := os.MkdirTemp("", "release-test-")
	if err != nil {
		return "", err
	}
	ref := "example.com/exalsius/alpha:" + testVersion
	digest, err := Build(Options{Component: "alpha", Dir: "hack/imagebuild", RepoRoot: root, Platforms: []string{"linux/" + runtime.GOARCH},
		Version: testVersion, Revision: "r", Created: time.Unix(1, 0), Source: "https://example.com/src", Licenses: "Apache-2.0",
		Name: ref, Out: filepath.Join(dist, "images", "alpha.tar")})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dist, "images", "digests.txt"), []byte("alpha "+digest.String()+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dist, "install.yaml"), []byte(bundle(ref)), 0o644); err != nil {
		return "", err
	}
	if err := writeChart(filepath.Join(dist, "exalsius-operator-"+testVersion+".tgz"), testVersion); err != nil {
		return "", err
	}
	return dist, nil
}

func bundle(image string) string {
	return "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  labels:\n    helm.sh/chart: exalsius-operator-" + testVersion +
		"\n    app.kubernetes.io/version: \"" + testVersion + "\"\nspec:\n  template:\n    spec:\n      containers:\n        - name: manager\n          image: \"" + image + "\"\n"
}

func writeChart(path, version string) error {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	chart := "apiVersion: v2\nname: exalsius-operator\nversion: " + version + "\nappVersion: \"" + version + "\"\n"
	if err := tw.WriteHeader(&tar.Header{Name: "exalsius-operator/Chart.yaml", Mode: 0o644, Size: int64(len(chart)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write([]byte(chart)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func copyTree(from, to string) error {
	return filepath.Walk(from, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		target := filepath.Join(to, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

// newKey writes a throwaway PKCS#8 PEM key (what openssl genpkey writes) and returns its path.
func newKey(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// publish runs what hack/release.sh runs after the build: sbom, sums and (with a key) sign.
func publish(t *testing.T, r Release, key string) {
	t.Helper()
	if err := WriteSBOMs(r, io.Discard); err != nil {
		t.Fatalf("sbom: %v", err)
	}
	resign(t, r, key)
}

// resign rewrites SHA256SUMS and the signatures, as someone who changed an artefact and holds the key would.
func resign(t *testing.T, r Release, key string) {
	t.Helper()
	if err := WriteSums(r); err != nil {
		t.Fatalf("sums: %v", err)
	}
	if key != "" {
		if err := SignRelease(r, key, io.Discard); err != nil {
			t.Fatalf("sign: %v", err)
		}
	}
}

// wantFail runs verify and wants an error containing every one of the given strings.
func wantFail(t *testing.T, r Release, pub string, allowUnsigned bool, want ...string) {
	t.Helper()
	err := VerifyRelease(r, pub, allowUnsigned, io.Discard)
	if err == nil {
		t.Fatalf("verify passed, want an error naming %v", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("verify error does not contain %q:\n%v", w, err)
		}
	}
}

// TestReleaseSignVerify is the whole flow on a real image: SBOM, checksums, signatures, then verify
// with the key in dist/ and with the key passed explicitly.
func TestReleaseSignVerify(t *testing.T) {
	r := testRelease(t)
	key := newKey(t)
	publish(t, r, key)
	if err := VerifyRelease(r, "", false, io.Discard); err != nil {
		t.Fatalf("verify of a fresh release: %v", err)
	}
	if err := VerifyRelease(r, r.path(PublicKeyFile), false, io.Discard); err != nil {
		t.Fatalf("verify with --key: %v", err)
	}
	for _, a := range append([]string{SumsFile}, r.Artefacts()...) {
		if _, err := os.Stat(r.path(a + ".sig")); err != nil {
			t.Errorf("%s has no signature: %v", a, err)
		}
	}
	sums, err := os.ReadFile(r.path(SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(sums), "\n"); n != len(r.Artefacts()) {
		t.Errorf("SHA256SUMS lists %d files, want %d:\n%s", n, len(r.Artefacts()), sums)
	}
}

// TestReleaseSBOM wants the SBOM to list the modules compiled into the binary, with the versions of
// this module's go.mod, and the binary by its SHA-256.
func TestReleaseSBOM(t *testing.T) {
	r := testRelease(t)
	publish(t, r, "")
	data, err := os.ReadFile(r.path(sbomPath("alpha")))
	if err != nil {
		t.Fatal(err)
	}
	var bom BOM
	if err := json.Unmarshal(data, &bom); err != nil {
		t.Fatal(err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.SpecVersion != "1.5" || !strings.HasPrefix(bom.SerialNumber, "urn:uuid:") {
		t.Errorf("header %q %q %q", bom.BOMFormat, bom.SpecVersion, bom.SerialNumber)
	}
	if bom.Metadata.Component.Type != "container" || bom.Metadata.Component.Name != "example.com/exalsius/alpha" {
		t.Errorf("metadata.component %+v", bom.Metadata.Component)
	}
	byName := map[string]Component{}
	for _, c := range bom.Components {
		byName[c.Name] = c
	}
	ggcr := byName["github.com/google/go-containerregistry"]
	if ggcr.Version != "v0.22.1" || ggcr.PURL != "pkg:golang/github.com/google/go-containerregistry@v0.22.1?type=module" || len(ggcr.Hashes) != 1 {
		t.Errorf("go-containerregistry component %+v, want v0.22.1 (go.mod) with its go.sum hash", ggcr)
	}
	if _, ok := byName["std"]; !ok {
		t.Error("no Go standard library component")
	}
	bin := byName["github.com/exalsius/exalsius-operator/hack/imagebuild"]
	if bin.Type != "application" || len(bin.Hashes) != 1 {
		t.Fatalf("binary component %+v", bin)
	}
	l, err := OpenLayout(r.path("images/alpha.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := fmt.Sprintf("%x", sha256sum(l.Images[0].Binary)); got != bin.Hashes[0].Content {
		t.Errorf("binary hash %s, the image's /manager has %s", bin.Hashes[0].Content, got)
	}
	// Deterministic: the same image gives the same SBOM bytes.
	if err := WriteSBOMs(r, io.Discard); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(r.path(sbomPath("alpha")))
	if !bytes.Equal(data, again) {
		t.Error("two SBOMs of one image differ")
	}
}

// TestReleaseCosignFormat checks the signature format without cosign: standard base64 of an ASN.1
// DER ECDSA signature over SHA-256 of the file, a PEM PKIX public key; openssl (which reads the same
// DER signature) verifies it where it is installed.
func TestReleaseCosignFormat(t *testing.T) {
	dir := t.TempDir()
	blob := filepath.Join(dir, "blob")
	if err := os.WriteFile(blob, []byte("release artefact\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	keyPath := newKey(t)
	key, err := LoadPrivateKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := SignFile(key, blob); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(blob + ".sig")
	der, err := base64.StdEncoding.DecodeString(string(raw))
	if err != nil {
		t.Fatalf("signature is not standard base64: %v", err)
	}
	digest := sha256sum([]byte("release artefact\n"))
	if !ecdsa.VerifyASN1(&key.PublicKey, digest[:], der) {
		t.Fatal("the decoded signature is not an ASN.1 ECDSA signature of the SHA-256 of the blob")
	}
	pubPEM, err := EncodePublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(pubPEM), "-----BEGIN PUBLIC KEY-----\n") {
		t.Errorf("public key is not a PEM PUBLIC KEY:\n%s", pubPEM)
	}
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Log("openssl is not installed: the cross-check with openssl is left out")
		return
	}
	pub, sigDER := filepath.Join(dir, "cosign.pub"), filepath.Join(dir, "sig.der")
	_ = os.WriteFile(pub, pubPEM, 0o644)
	_ = os.WriteFile(sigDER, der, 0o644)
	if out, err := exec.Command(openssl, "dgst", "-sha256", "-verify", pub, "-signature", sigDER, blob).CombinedOutput(); err != nil {
		t.Errorf("openssl does not verify the signature: %v\n%s", err, out)
	}
	// And a key made by openssl, as docs/RELEASE.md says, is read.
	opensslKey := filepath.Join(dir, "openssl.pem")
	if out, err := exec.Command(openssl, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", opensslKey).CombinedOutput(); err != nil {
		t.Fatalf("openssl genpkey: %v\n%s", err, out)
	}
	if _, err := LoadPrivateKey(opensslKey); err != nil {
		t.Errorf("a key from openssl genpkey: %v", err)
	}
}

func sha256sum(b []byte) [32]byte { return sha256.Sum256(b) }

// TestReleaseVerifyFails: each way a release can be wrong fails verify with an error naming the
// artefact.
func TestReleaseVerifyFails(t *testing.T) {
	t.Run("tampered artefact", func(t *testing.T) {
		r := testRelease(t)
		publish(t, r, newKey(t))
		appendTo(t, r.path("install.yaml"), "# changed\n")
		wantFail(t, r, "", false, "install.yaml: SHA-256", "install.yaml.sig: signature does not verify")
	})
	t.Run("tampered SHA256SUMS", func(t *testing.T) {
		r := testRelease(t)
		publish(t, r, newKey(t))
		data, _ := os.ReadFile(r.path(SumsFile))
		_ = os.WriteFile(r.path(SumsFile), bytes.Replace(data, []byte("install.yaml"), []byte("install.yml"), 1), 0o644)
		wantFail(t, r, "", false, "SHA256SUMS.sig: signature does not verify", "install.yaml: not listed")
	})
	t.Run("wrong key", func(t *testing.T) {
		r := testRelease(t)
		publish(t, r, newKey(t))
		other := filepath.Join(t.TempDir(), "other.pub")
		k, _ := LoadPrivateKey(newKey(t))
		pub, _ := EncodePublicKey(&k.PublicKey)
		_ = os.WriteFile(other, pub, 0o644)
		wantFail(t, r, other, false, "SHA256SUMS.sig: signature does not verify", "images/alpha.tar.sig: signature does not verify")
	})
	t.Run("missing signature", func(t *testing.T) {
		r := testRelease(t)
		publish(t, r, newKey(t))
		if err := os.Remove(r.path("images/alpha.tar.sig")); err != nil {
			t.Fatal(err)
		}
		wantFail(t, r, "", false, "images/alpha.tar.sig: signature missing")
	})
	t.Run("unsigned", func(t *testing.T) {
		r := testRelease(t)
		publish(t, r, "")
		wantFail(t, r, "", false, "cosign.pub")
		var log bytes.Buffer
		if err := VerifyRelease(r, "", true, &log); err != nil {
			t.Fatalf("--allow-unsigned: %v", err)
		}
		if !strings.Contains(log.String(), "NOT SIGNED") {
			t.Errorf("an unsigned release is accepted silently:\n%s", log.String())
		}
	})
	t.Run("SBOM that does not match the binary", func(t *testing.T) {
		r := testRelease(t)
		key := newKey(t)
		publish(t, r, key)
		path := r.path(sbomPath("alpha"))
		data, _ := os.ReadFile(path)
		// Drop one module from the binary's dependencies, then checksum and sign again: the
		// signatures hold, the SBOM lies.
		var bom BOM
		_ = json.Unmarshal(data, &bom)
		for i, d := range bom.Dependencies {
			if strings.HasPrefix(d.Ref, "binary:") {
				bom.Dependencies[i].DependsOn = d.DependsOn[1:]
			}
		}
		data, _ = json.Marshal(bom)
		_ = os.WriteFile(path, data, 0o644)
		resign(t, r, key)
		wantFail(t, r, "", false, "sbom/alpha.cdx.json (of images/alpha.tar)", "modules missing from the SBOM")
	})
	t.Run("SBOM component of another version", func(t *testing.T) {
		r := testRelease(t)
		key := newKey(t)
		publish(t, r, key)
		path := r.path(sbomPath("alpha"))
		data, _ := os.ReadFile(path)
		data = bytes.Replace(data, []byte(`"version": "v0.22.1"`), []byte(`"version": "v0.22.2"`), 1)
		_ = os.WriteFile(path, data, 0o644)
		resign(t, r, key)
		wantFail(t, r, "", false, "sbom/alpha.cdx.json", "github.com/google/go-containerregistry v0.22.2")
	})
	t.Run("broken layout", func(t *testing.T) {
		r := testRelease(t)
		key := newKey(t)
		rewriteTar(t, r.path("images/alpha.tar"), func(name string, data []byte) []byte {
			if strings.HasPrefix(name, "blobs/sha256/") && len(data) > 1<<20 { // the layer
				data[len(data)/2] ^= 0xff
			}
			return data
		})
		if err := WriteSBOMs(r, io.Discard); err == nil || !strings.Contains(err.Error(), "images/alpha.tar") {
			t.Errorf("sbom of a corrupt layout: %v, want an error naming images/alpha.tar", err)
		}
		_ = os.MkdirAll(r.path("sbom"), 0o755)
		_ = os.WriteFile(r.path(sbomPath("alpha")), []byte("{}"), 0o644)
		resign(t, r, key)
		wantFail(t, r, "", false, "images/alpha.tar: image index")
	})
	t.Run("another version in the chart", func(t *testing.T) {
		r := testRelease(t)
		key := newKey(t)
		if err := writeChart(r.path("exalsius-operator-"+testVersion+".tgz"), "1.2.4"); err != nil {
			t.Fatal(err)
		}
		publish(t, r, key)
		wantFail(t, r, "", false, "exalsius-operator-1.2.3.tgz: Chart.yaml version \"1.2.4\"", "appVersion \"1.2.4\"")
	})
	t.Run("another version in install.yaml", func(t *testing.T) {
		r := testRelease(t)
		key := newKey(t)
		_ = os.WriteFile(r.path("install.yaml"), []byte(strings.ReplaceAll(bundle("example.com/exalsius/alpha:1.2.3"), "alpha:1.2.3", "alpha:1.2.2")), 0o644)
		publish(t, r, key)
		wantFail(t, r, "", false, "install.yaml: line", "alpha:1.2.2, want tag 1.2.3")
	})
	t.Run("missing artefact", func(t *testing.T) {
		r := testRelease(t)
		publish(t, r, "")
		if err := os.Remove(r.path("install.yaml")); err != nil {
			t.Fatal(err)
		}
		if err := WriteSums(r); err == nil || !strings.Contains(err.Error(), "install.yaml") {
			t.Errorf("sums without install.yaml: %v, want an error naming it", err)
		}
		wantFail(t, r, "", true, "install.yaml: open")
	})
}

// TestReleaseKeys: the keys sign accepts and the ones it refuses, each refusal saying why.
func TestReleaseKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		_ = os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
		return p
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	sec1, _ := x509.MarshalECPrivateKey(ec)
	if _, err := LoadPrivateKey(write("sec1.pem", "EC PRIVATE KEY", sec1)); err != nil {
		t.Errorf("SEC1 key: %v", err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384der, _ := x509.MarshalPKCS8PrivateKey(p384)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaDER, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	for name, tc := range map[string]struct{ path, want string }{
		"cosign encrypted": {write("cosign.key", "ENCRYPTED SIGSTORE PRIVATE KEY", []byte("x")), "is encrypted"},
		"P-384":            {write("p384.pem", "PRIVATE KEY", p384der), "not an ECDSA P-256 key"},
		"RSA":              {write("rsa.pem", "PRIVATE KEY", rsaDER), "not an ECDSA P-256 key"},
		"public key":       {write("pub.pem", "PUBLIC KEY", []byte("x")), "is not a private key"},
	} {
		_, err := LoadPrivateKey(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: %v, want an error naming the file and %q", name, err, tc.want)
		}
	}
}

// TestReleaseRealImages makes and checks the SBOM of each image `make images` wrote (make test-images
// sets EXALSIUS_IMAGES_DIR, as for TestImages): each must list controller-runtime, and verify's SBOM
// check must accept it.
func TestReleaseRealImages(t *testing.T) {
	dir := os.Getenv("EXALSIUS_IMAGES_DIR")
	if dir == "" {
		t.Fatal("EXALSIUS_IMAGES_DIR is not set: run `make test-images` (it builds the images first)")
	}
	dist := t.TempDir()
	if err := os.Symlink(dir, filepath.Join(dist, "images")); err != nil {
		t.Fatal(err)
	}
	r := Release{Dist: dist, Version: os.Getenv("EXALSIUS_IMAGES_TAG"), Components: components(t)}
	if err := WriteSBOMs(r, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, c := range r.Components {
		data, err := os.ReadFile(r.path(sbomPath(c)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(data, []byte(`"name": "sigs.k8s.io/controller-runtime"`)) {
			t.Errorf("%s: the SBOM does not list sigs.k8s.io/controller-runtime", c)
		}
		l, err := OpenLayout(r.path("images/" + c + ".tar"))
		if err != nil {
			t.Fatal(err)
		}
		if err := checkSBOM(r.path(sbomPath(c)), c, r.Version, l); err != nil {
			t.Errorf("%s: %v", c, err)
		}
		l.Close()
	}
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(s)
	_ = f.Close()
}

// rewriteTar rewrites a tarball's regular files through change, keeping names and order.
func rewriteTar(t *testing.T, path string, change func(name string, data []byte) []byte) {
	t.Helper()
	in, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	tr, tw := tar.NewReader(bytes.NewReader(in)), tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if h.Typeflag == tar.TypeReg {
			data = change(h.Name, data)
			h.Size = int64(len(data))
		}
		_ = tw.WriteHeader(h)
		_, _ = tw.Write(data)
	}
	_ = tw.Close()
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReleasePluginArchives builds the kubectl plugin's archive for this machine's Linux arch twice
// (equal bytes), lists it in SHA256SUMS, signs and verifies it, then wants verify to refuse an
// archive without an executable plugin even when it is listed and signed.
func TestReleasePluginArchives(t *testing.T) {
	r := testRelease(t)
	r.PluginPlatforms = []string{"linux/" + runtime.GOARCH}
	archive := r.path(pluginArchive(r.Version, r.PluginPlatforms[0]))
	if err := BuildPluginArchives(r, repoRoot(t), io.Discard); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := BuildPluginArchives(r, repoRoot(t), io.Discard); err != nil {
		t.Fatal(err)
	}
	if second, _ := os.ReadFile(archive); !bytes.Equal(first, second) {
		t.Fatal("two builds of the plugin archive differ")
	}
	key := newKey(t)
	publish(t, r, key)
	sums, err := os.ReadFile(r.path(SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sums), "  plugin/kubectl-exalsius_"+testVersion+"_linux_"+runtime.GOARCH+".tar.gz\n") {
		t.Fatalf("SHA256SUMS does not list the plugin archive:\n%s", sums)
	}
	if _, err := os.Stat(archive + ".sig"); err != nil {
		t.Fatalf("the plugin archive is not signed: %v", err)
	}
	if err := VerifyRelease(r, "", false, io.Discard); err != nil {
		t.Fatalf("verify: %v", err)
	}

	// A release whose archive holds a script instead of the binary: listed and signed, still refused.
	bad, err := tarGz([]tarFile{{PluginName, 0o755, []byte("#!/bin/sh\n")}, {"LICENSE", 0o644, []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(archive, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	resign(t, r, key)
	wantFail(t, r, "", false, pluginArchive(r.Version, r.PluginPlatforms[0]), "is not a linux executable")
}
