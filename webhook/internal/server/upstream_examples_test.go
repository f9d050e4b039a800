package server_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// envUpstream names the folder holding the upstream exalsius-operator 0.11's examples/ and
// config/samples/ (as data). Without it, the `shared/exalsius-operator-0.11` folder next to the
// repository (or next to its parent, for a git worktree) is used when it exists.
const envUpstream = "EXALSIUS_UPSTREAM"

func upstreamDir(t *testing.T) string {
	t.Helper()
	if v := os.Getenv(envUpstream); v != "" {
		return v
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for ; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			break
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.work above the working directory")
		}
	}
	for _, p := range []string{filepath.Join(dir, "..", "shared", "exalsius-operator-0.11"), filepath.Join(dir, "..", "..", "shared", "exalsius-operator-0.11")} {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return filepath.Clean(p)
		}
	}
	t.Skipf("the upstream operator's examples are not on this machine (set %s to their folder)", envUpstream)
	return ""
}

// TestUpstreamExamplesAreAccepted creates every example and sample of the upstream exalsius-operator
// 0.11 through the API server, with this project's CRDs and the webhook: an installation switched in
// place must accept the manifests its users have. Upstream's samples carry fields its own CRDs prune
// (the API server warns about them, as it does upstream); nothing may be refused. A class without
// userFacingConfig[].type gets `string`, and a Colony entry without clusterDeploymentSpec is kept.
func TestUpstreamExamplesAreAccepted(t *testing.T) {
	root := upstreamDir(t)
	ctx := context.Background()
	var files []string
	for _, sub := range []string{"examples", filepath.Join("config", "samples")} {
		err := filepath.WalkDir(filepath.Join(root, sub), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "charts" {
				return filepath.SkipDir // Helm charts, not manifests
			}
			if !d.IsDir() && strings.HasSuffix(path, ".yaml") && d.Name() != "kustomization.yaml" {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(files)
	const ns = "upstream-examples"
	if err := mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	created, withoutSpec, untypedClasses := 0, 0, 0
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		for _, obj := range exampleObjects(t, file) {
			what := rel + ": " + obj.GetKind() + " " + obj.GetName()
			if obj.GetKind() != "WorkspaceClass" && obj.GetNamespace() == "" {
				obj.SetNamespace(ns)
			}
			warnings.take()
			if err := wclient.Create(ctx, obj.DeepCopy()); err != nil {
				t.Errorf("%s was refused: %v", what, err)
				continue
			}
			created++
			if w := warnings.take(); len(w) > 0 {
				t.Logf("%s: warnings: %v", what, w)
			}
			switch obj.GetKind() {
			case "WorkspaceClass":
				checkTypesDefaulted(t, what, obj.GetName(), "")
				// The same class with no type given, as upstream's CRD allows: stored as string.
				untyped := obj.DeepCopy()
				untyped.SetName(obj.GetName() + "-untyped")
				cfgs, found, _ := unstructuredList(untyped.Object, "spec", "userFacingConfig")
				if !found || len(cfgs) == 0 {
					continue
				}
				var list []any
				for _, c := range cfgs {
					delete(c, "type")
					list = append(list, c)
				}
				untyped.Object["spec"].(map[string]any)["userFacingConfig"] = list
				if err := wclient.Create(ctx, untyped); err != nil {
					t.Errorf("%s without userFacingConfig types was refused: %v", what, err)
					continue
				}
				untypedClasses++
				checkTypesDefaulted(t, what+" (no types)", untyped.GetName(), workspacesv1.UserFacingConfigString)
			case "Colony":
				entries, _, _ := unstructuredList(obj.Object, "spec", "colonyClusters")
				for _, e := range entries {
					if _, ok := e["clusterDeploymentSpec"]; !ok {
						withoutSpec++
					}
				}
			}
		}
	}
	if created < 8 {
		t.Errorf("only %d upstream objects were created from %d files", created, len(files))
	}
	if untypedClasses == 0 {
		t.Error("no upstream class with userFacingConfig was created without types")
	}
	if withoutSpec == 0 {
		t.Error("no upstream Colony entry without clusterDeploymentSpec was created (upstream's remote-colony example has one)")
	}
}

// checkTypesDefaulted asserts that every userFacingConfig entry of the stored class has a type (want,
// when given).
func checkTypesDefaulted(t *testing.T, what, name string, want workspacesv1.UserFacingConfigType) {
	t.Helper()
	var wc workspacesv1.WorkspaceClass
	if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Name: name}, &wc); err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	for i, c := range wc.Spec.UserFacingConfig {
		if c.Type == "" || (want != "" && c.Type != want) {
			t.Errorf("%s: spec.userFacingConfig[%d].type is %q, want %q", what, i, c.Type, want)
		}
	}
}

// unstructuredList returns the list of objects at path.
func unstructuredList(obj map[string]any, path ...string) ([]map[string]any, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, errors.New("not an object")
		}
		if cur, ok = m[p]; !ok {
			return nil, false, nil
		}
	}
	items, ok := cur.([]any)
	if !ok {
		return nil, false, errors.New("not a list")
	}
	var out []map[string]any
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out, true, nil
}
