package server_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// exampleDirs lists the folders of examples/ that hold manifests, the quick start first (every other
// example builds on it), then by name. examples/charts holds Helm charts, not manifests, and
// examples/gitops Flux's and Argo CD's objects (e2e/gitops checks those).
func exampleDirs(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..", "..", "examples")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "charts" && e.Name() != "gitops" && e.Name() != "quickstart" {
			dirs = append(dirs, e.Name())
		}
	}
	slices.Sort(dirs)
	out := []string{filepath.Join(root, "quickstart")}
	for _, d := range dirs {
		out = append(out, filepath.Join(root, d))
	}
	return out
}

// exampleObjects reads every YAML document of a file; an empty document (only comments) is skipped.
func exampleObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		obj := map[string]any{}
		if err := yaml.UnmarshalStrict(doc, &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			t.Fatalf("%s: a document lacks apiVersion, kind or metadata.name", path)
		}
		out = append(out, u)
	}
}

// TestExamplesAreAccepted creates every manifest of examples/ through the API server, with the CRDs'
// schemas and rules and the webhook's validation and defaulting, in the order a user applies them.
// A manifest the API refuses, or one that draws a warning, fails the test.
func TestExamplesAreAccepted(t *testing.T) {
	ctx := context.Background()
	created := 0
	for _, dir := range exampleDirs(t) {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Errorf("%s holds no manifest", dir)
		}
		slices.Sort(files)
		for _, file := range files {
			rel := strings.TrimPrefix(filepath.ToSlash(file), "../../../")
			objs := exampleObjects(t, file)
			if len(objs) == 0 {
				t.Errorf("%s holds no object", rel)
			}
			for _, obj := range objs {
				what := rel + ": " + obj.GetKind() + " " + obj.GetName()
				warnings.take()
				err := wclient.Create(ctx, obj.DeepCopy())
				if apierrors.IsAlreadyExists(err) && obj.GetKind() == "Namespace" {
					err = nil
				}
				if err != nil {
					t.Errorf("%s was refused: %v", what, err)
					continue
				}
				created++
				if w := warnings.take(); len(w) > 0 {
					t.Errorf("%s drew warnings: %v", what, w)
				}
				// A deployment placed by Colony or selector has no clusterDeploymentRef to default.
				if _, named, _ := unstructured.NestedMap(obj.Object, "spec", "clusterDeploymentRef"); obj.GetKind() == "WorkspaceDeployment" && named {
					checkDefaulted(t, what, client.ObjectKeyFromObject(obj))
				}
			}
		}
	}
	if created < 15 {
		t.Errorf("only %d example objects were created", created)
	}
}

// checkDefaulted asserts that the mutating webhook filled clusterDeploymentRef.namespace, which also
// shows that the example went through the webhook.
func checkDefaulted(t *testing.T, what string, key client.ObjectKey) {
	t.Helper()
	var wsd workspacesv1.WorkspaceDeployment
	if err := mgmt.Client.Get(context.Background(), key, &wsd); err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if wsd.Spec.ClusterDeploymentRef.Namespace == "" {
		t.Errorf("%s: spec.clusterDeploymentRef.namespace was not defaulted: the webhook did not see it", what)
	}
}
