package gitops

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	repoRoot = "../.."
	// chartRegistry is where the release publishes the chart (docs/RELEASE.md).
	chartRegistry = "ghcr.io/exalsius/charts"
	chartName     = "exalsius-operator"
)

// manifests reads every object of every YAML file in examples/gitops/<dir>, strictly.
func manifests(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "examples", "gitops", dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("examples/gitops/%s holds no manifest", dir)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			js, err := yaml.YAMLToJSONStrict(doc)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if string(bytes.TrimSpace(js)) == "null" {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(js); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if u.GetName() == "" {
				t.Fatalf("%s: a %s has no metadata.name", f, u.GetKind())
			}
			out = append(out, u)
		}
	}
	return out
}

// find returns the one object of kind in objs.
func find(t *testing.T, objs []*unstructured.Unstructured, apiVersion, kind string) *unstructured.Unstructured {
	t.Helper()
	var got []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetAPIVersion() == apiVersion && o.GetKind() == kind {
			got = append(got, o)
		}
	}
	if len(got) != 1 {
		t.Fatalf("want one %s %s, found %d", apiVersion, kind, len(got))
	}
	return got[0]
}

func str(t *testing.T, o *unstructured.Unstructured, path ...string) string {
	t.Helper()
	s, ok, err := unstructured.NestedString(o.Object, path...)
	if err != nil || !ok {
		t.Fatalf("%s %s: %s is not a string (%v)", o.GetKind(), o.GetName(), strings.Join(path, "."), err)
	}
	return s
}

// TestFluxInstall: the OCIRepository points at the chart where the release publishes it, the
// HelmRelease installs from it, and the chart renders with the HelmRelease's values.
func TestFluxInstall(t *testing.T) {
	objs := manifests(t, "flux")
	repo := find(t, objs, "source.toolkit.fluxcd.io/v1", "OCIRepository")
	if got, want := str(t, repo, "spec", "url"), "oci://"+chartRegistry+"/"+chartName; got != want {
		t.Errorf("OCIRepository url %s, want %s", got, want)
	}
	if got := str(t, repo, "spec", "layerSelector", "mediaType"); got != "application/vnd.cncf.helm.chart.content.v1.tar+gzip" {
		t.Errorf("OCIRepository layerSelector.mediaType %s: a HelmRelease needs the chart layer", got)
	}
	hr := find(t, objs, "helm.toolkit.fluxcd.io/v2", "HelmRelease")
	if k, n := str(t, hr, "spec", "chartRef", "kind"), str(t, hr, "spec", "chartRef", "name"); k != "OCIRepository" || n != repo.GetName() {
		t.Errorf("HelmRelease chartRef %s/%s, want OCIRepository/%s", k, n, repo.GetName())
	}
	if hr.GetNamespace() != repo.GetNamespace() {
		t.Errorf("HelmRelease in %s, its OCIRepository in %s", hr.GetNamespace(), repo.GetNamespace())
	}
	values, _, _ := unstructured.NestedMap(hr.Object, "spec", "values")
	render(t, str(t, hr, "spec", "targetNamespace"), values)
}

// TestArgoCDInstall: the Application installs the chart from where the release publishes it, through
// an OCI repository entry, and the chart renders with the Application's values.
func TestArgoCDInstall(t *testing.T) {
	objs := manifests(t, "argocd")
	app := find(t, objs, "argoproj.io/v1alpha1", "Application")
	if got := str(t, app, "spec", "source", "repoURL"); got != chartRegistry {
		t.Errorf("Application repoURL %s, want %s", got, chartRegistry)
	}
	if got := str(t, app, "spec", "source", "chart"); got != chartName {
		t.Errorf("Application chart %s, want %s", got, chartName)
	}
	repo := find(t, objs, "v1", "Secret")
	if repo.GetLabels()["argocd.argoproj.io/secret-type"] != "repository" || str(t, repo, "stringData", "url") != chartRegistry ||
		str(t, repo, "stringData", "enableOCI") != "true" {
		t.Errorf("the repository Secret does not declare %s as an OCI Helm repository", chartRegistry)
	}
	values, _, _ := unstructured.NestedMap(app.Object, "spec", "source", "helm", "valuesObject")
	render(t, str(t, app, "spec", "destination", "namespace"), values)
}

// render runs helm template on the chart with values and checks that every component's Deployment
// and the CRDs are there.
func render(t *testing.T, namespace string, values map[string]any) {
	t.Helper()
	if len(values) == 0 {
		t.Fatal("no values")
	}
	helm, err := exec.LookPath("helm")
	if err != nil {
		t.Fatalf("helm is not on PATH (make tools builds it; make test puts it on PATH): %v", err)
	}
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helm, "template", chartName, filepath.Join(repoRoot, "charts", chartName),
		"--namespace", namespace, "--kube-version", "v1.37.2", "--values", file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template with the example's values: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{
		"kind: Deployment\nmetadata:\n  name: exalsius-operator-workspace-controller",
		"kind: Deployment\nmetadata:\n  name: exalsius-operator-webhook",
		"name: workspacedeployments.workspaces.exalsius.ai",
	} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the rendered chart lacks %q", want)
		}
	}
}
