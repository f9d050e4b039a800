package node

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTar(t *testing.T, files map[string]string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "img.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLayoutNames reads the names both image builders write: a full reference (hack/nodeimage) and a
// short <component>:<tag> (the release tooling), and refuses what is not an OCI layout.
func TestLayoutNames(t *testing.T) {
	full := writeTar(t, map[string]string{"oci-layout": `{}`, "index.json": `{"manifests":[{"annotations":{"io.containerd.image.name":"ghcr.io/exalsius/exalsius-operator/webhook:0.1.0","org.opencontainers.image.ref.name":"ghcr.io/exalsius/exalsius-operator/webhook:0.1.0"}}]}`})
	if got, err := layoutNames(full); err != nil || len(got) != 1 || got[0] != "ghcr.io/exalsius/exalsius-operator/webhook:0.1.0" {
		t.Errorf("full: %v %v", got, err)
	}
	short := writeTar(t, map[string]string{"index.json": `{"manifests":[{"annotations":{"io.containerd.image.name":"webhook:0.1.0","org.opencontainers.image.ref.name":"0.1.0"}}]}`})
	if got, err := layoutNames(short); err != nil || len(got) != 1 || got[0] != "webhook:0.1.0" {
		t.Errorf("short: %v %v", got, err)
	}
	for name, files := range map[string]map[string]string{
		"no index":     {"oci-layout": `{}`},
		"no name":      {"index.json": `{"manifests":[{"annotations":{"org.opencontainers.image.ref.name":"0.1.0"}}]}`},
		"broken index": {"index.json": `{"manifests":`},
	} {
		if _, err := layoutNames(writeTar(t, files)); err == nil || !strings.Contains(err.Error(), "img.tar") {
			t.Errorf("%s: err %v, want an error naming the file", name, err)
		}
	}
}
