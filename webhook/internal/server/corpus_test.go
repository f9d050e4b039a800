package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

var fixturesOnce sync.Once

// fixtures creates testdata/fixtures/fixtures.yaml once: namespaces with and without tenancy grants,
// and the class the corpus deployments use.
func fixtures(t *testing.T) {
	t.Helper()
	var err error
	fixturesOnce.Do(func() {
		for _, obj := range readObjects(t, filepath.Join("..", "..", "testdata", "fixtures", "fixtures.yaml")) {
			if err = mgmt.Client.Create(context.Background(), obj); err != nil {
				return
			}
		}
	})
	if err != nil {
		t.Fatalf("creating fixtures: %v", err)
	}
}

func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
	return out
}

// expectations reads the `# expect: <field path>` lines of a corpus file.
func expectations(data []byte) []string {
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "# expect:"); ok {
			out = append(out, strings.TrimSpace(rest))
		}
	}
	return out
}

// TestInvalidCorpus creates every manifest of testdata/invalid through the API server and asserts that
// the webhook denies it with the expected field path.
func TestInvalidCorpus(t *testing.T) {
	fixtures(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "invalid", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("the corpus holds %d manifests; at least 50 expected", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			expect := expectations(data)
			if len(expect) == 0 {
				t.Fatalf("%s has no `# expect:` line", file)
			}
			objs := readObjects(t, file)
			if len(objs) != 1 {
				t.Fatalf("%s holds %d objects, want 1", file, len(objs))
			}
			err = mgmt.Client.Create(context.Background(), objs[0])
			if err == nil {
				t.Fatalf("the API server accepted %s", file)
			}
			msg := err.Error()
			if !apierrors.IsInvalid(err) || !strings.Contains(msg, "admission webhook") || !strings.Contains(msg, "denied the request") {
				t.Fatalf("want a denial by the webhook, got: %v", err)
			}
			for _, path := range expect {
				if !strings.Contains(msg, path+":") {
					t.Errorf("the denial does not name %s: %s", path, msg)
				}
			}
			if strings.Contains(msg, "424242") || strings.Contains(msg, "hunter2") {
				t.Errorf("the denial shows a secret value: %s", msg)
			}
		})
	}
}
