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

// TestLayoutNames reads the names the image builder writes (hack/imagebuild: io.containerd.image.name
// is the full reference, ref.name the tag), and refuses what is not an OCI layout.
func TestLayoutNames(t *testing.T) {
	full := writeTar(t, map[string]string{"oci-layout": `{}`, "index.json": `{"manifests":[{"annotations":{"io.containerd.image.name":"ghcr.io/exalsius/exalsius-operator/webhook:0.1.0","org.opencontainers.image.ref.name":"0.1.0"}}]}`})
	if got, err := layoutNames(full); err != nil || len(got) != 1 || got[0] != "ghcr.io/exalsius/exalsius-operator/webhook:0.1.0" {
		t.Errorf("full: %v %v", got, err)
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

// TestFullReference: the node imports only names the kubelet finds the image by; a short name (which
// containerd's CRI reads as docker.io/library/<name>) is refused before anything is imported.
func TestFullReference(t *testing.T) {
	for _, ok := range []string{"ghcr.io/exalsius/exalsius-operator/webhook:0.1.0", "exalsius.local/pause:1.0",
		"localhost/x:1", "registry:5000/a/b:v1"} {
		if err := fullReference(ok); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"webhook:0.1.0":                        "docker.io/library/webhook:0.1.0",
		"exalsius/webhook:0.1.0":               "no registry host",
		"ghcr.io/exalsius/webhook":             "no tag",
		"ghcr.io/exalsius/webhook:":            "no tag",
		"ghcr.io/exalsius/webhook@sha256:abcd": "no tag",
	} {
		if err := fullReference(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want one saying %q", bad, err, want)
		}
	}
}

// TestRenderedImages finds the images of containers and init containers at any depth (Deployment,
// Pod, CronJob) and nothing else named image.
func TestRenderedImages(t *testing.T) {
	got, err := renderedImages(`# Source: a
apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      initContainers:
        - name: init
          image: "ghcr.io/x/init:1"
      containers:
        - name: manager
          image: ghcr.io/x/webhook:0.1.0
---
apiVersion: v1
kind: Pod
metadata:
  annotations:
    image: not-a-container
spec:
  containers:
    - name: test
      image: ghcr.io/x/webhook:0.1.0
---
---
apiVersion: batch/v1
kind: CronJob
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers:
            - name: job
              image: ghcr.io/x/job:2
`)
	want := []string{"ghcr.io/x/init:1", "ghcr.io/x/job:2", "ghcr.io/x/webhook:0.1.0"}
	if err != nil || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	if _, err := renderedImages("a: [\n"); err == nil {
		t.Error("broken YAML accepted")
	}
}
