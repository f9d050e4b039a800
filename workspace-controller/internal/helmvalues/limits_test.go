package helmvalues

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/valuepath"
)

// deepJSON is a JSON object nested depth levels deep.
func deepJSON(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + `{"a":"s3cr3t"}` + strings.Repeat("}", depth-1)
}

// deepMap is the same document, decoded.
func deepMap(depth int) map[string]any {
	m := map[string]any{"a": "s3cr3t"}
	for range depth - 1 {
		m = map[string]any{"a": m}
	}
	return m
}

// wideJSON is a JSON object of n leaves.
func wideJSON(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":1`, i)
	}
	b.WriteString("}")
	return b.String()
}

// wantLimit checks that err is the limit error of field for limit, and that it quotes no content.
func wantLimit(t *testing.T, err error, field, limit string) {
	t.Helper()
	var le *valuepath.LimitError
	if !errors.As(err, &le) || le.Field != field || le.Limit != limit {
		t.Fatalf("got %v, want the %s limit of %s", err, limit, field)
	}
	if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "k1") {
		t.Errorf("error quotes the content: %v", err)
	}
}

func limitBuild(values string, from ...Source) error {
	class := &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	ws := &workspacesv1.WorkspaceDeployment{Spec: workspacesv1.WorkspaceDeploymentSpec{Values: rawJSON(values)}}
	_, err := Build(Input{Class: class, Workspace: ws, Resources: &workspacesv1.ResolvedResources{Replicas: 1}, From: from})
	return err
}

func TestDecodeLimits(t *testing.T) {
	const field = "a spec.valuesFrom document"
	for name, doc := range map[string]string{
		"depth": deepJSON(valuepath.MaxValuesDepth), "leaves": wideJSON(valuepath.MaxValuesLeaves),
		"size": `{"a":"` + strings.Repeat("x", valuepath.MaxValuesBytes-10) + `"}`,
	} {
		if _, err := Decode([]byte(doc)); err != nil {
			t.Errorf("%s at the limit: %v", name, err)
		}
	}
	_, err := Decode([]byte(deepJSON(valuepath.MaxValuesDepth + 1)))
	wantLimit(t, err, field, "depth")
	_, err = Decode([]byte(wideJSON(valuepath.MaxValuesLeaves + 1)))
	wantLimit(t, err, field, "leaves")
	_, err = Decode([]byte(`{"a":"` + strings.Repeat("x", valuepath.MaxValuesBytes) + `"}`))
	wantLimit(t, err, field, "size")
	// YAML aliases expand: the JSON form of a small document may pass the size limit.
	alias := "a: &x \"" + strings.Repeat("s3cr3t", 4000) + "\"\n"
	for i := range 20 {
		alias += fmt.Sprintf("b%d: *x\n", i)
	}
	_, err = Decode([]byte(alias))
	wantLimit(t, err, field, "size")
}

func TestBuildLimitsOfSpecValues(t *testing.T) {
	if err := limitBuild(deepJSON(valuepath.MaxValuesDepth)); err != nil {
		t.Errorf("depth at the limit: %v", err)
	}
	wantLimit(t, limitBuild(deepJSON(valuepath.MaxValuesDepth+1)), "spec.values", "depth")
	wantLimit(t, limitBuild(wideJSON(valuepath.MaxValuesLeaves+1)), "spec.values", "leaves")
	wantLimit(t, limitBuild(`{"a":"`+strings.Repeat("x", valuepath.MaxValuesBytes)+`"}`), "spec.values", "size")
	// A source that did not come through Decode is checked too.
	wantLimit(t, limitBuild(`{}`, Source{Values: deepMap(valuepath.MaxValuesDepth + 1), Secret: true}), "a spec.valuesFrom document", "depth")
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDeepSecretIsRefusedWithBoundedMemory: a valuesFrom Secret nested 5,000 levels deep is refused,
// by Decode and by Build, allocating a few megabytes. The paths of its leaves cost memory quadratic
// in the depth: Build alone allocated about 550 MB for this document, and OOM-killed the controller
// under its 256Mi limit.
func TestDeepSecretIsRefusedWithBoundedMemory(t *testing.T) {
	const depth = 5000
	const bound = 64 << 20
	doc := []byte(deepJSON(depth))
	src := Source{Values: deepMap(depth), Secret: true}
	var decodeErr, buildErr error
	if n := allocated(func() { _, decodeErr = Decode(doc) }); n > bound {
		t.Errorf("Decode allocated %d MiB, want at most %d", n>>20, bound>>20)
	}
	if n := allocated(func() { buildErr = limitBuild(`{}`, src) }); n > bound {
		t.Errorf("Build allocated %d MiB, want at most %d", n>>20, bound>>20)
	}
	wantLimit(t, decodeErr, "a spec.valuesFrom document", "depth")
	wantLimit(t, buildErr, "a spec.valuesFrom document", "depth")
}

// TestSecretMaskIsLinearInDepth: the secret parts of values are found and moved with memory linear in
// the documents' size, whatever their depth (the root of the quadratic memory, below the limits).
func TestSecretMaskIsLinearInDepth(t *testing.T) {
	const depth = 5000
	var moved map[string]any
	n := allocated(func() {
		k := &mask{}
		k.addLeaves(deepMap(depth))
		moved = k.extract(deepMap(depth))
	})
	if n > 16<<20 {
		t.Errorf("the mask of a %d-level document allocated %d MiB, want at most 16", depth, n>>20)
	}
	if v, _ := valuepath.Get(moved, strings.Split(strings.Repeat("a.", depth-1)+"a", ".")); v != "s3cr3t" {
		t.Errorf("the secret leaf was not moved: %v", v)
	}
}

// TestSecretMaskNestedPaths: a secret userFacingConfig path that holds a leaf of a Secret moves whole,
// the leaf included, whatever order the two were marked in.
func TestSecretMaskNestedPaths(t *testing.T) {
	for _, leafFirst := range []bool{true, false} {
		k := &mask{}
		leaves := map[string]any{"db": map[string]any{"password": "pw"}}
		if leafFirst {
			k.addLeaves(leaves)
			k.add([]string{"db"})
		} else {
			k.add([]string{"db"})
			k.addLeaves(leaves)
		}
		values := map[string]any{"db": map[string]any{"password": "pw", "user": "u"}, "x": 1}
		got := k.extract(values)
		want := map[string]any{"db": map[string]any{"password": "pw", "user": "u"}}
		if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(values) != fmt.Sprint(map[string]any{"x": 1}) {
			t.Errorf("leaf first %v: moved %v, left %v", leafFirst, got, values)
		}
	}
}

// FuzzDecodeBuild: any valuesFrom document, from a Secret or a ConfigMap, is decoded and merged or
// refused with an error, never a panic; a document over the limits is always refused, and a Secret's
// values never reach the inline values.
func FuzzDecodeBuild(f *testing.F) {
	f.Add([]byte("a: {b: 1}"), `{"a":{"c":2}}`, true)
	f.Add([]byte(deepJSON(70)), `{}`, true)
	f.Add([]byte("x: &a [1]\ny: [*a, *a]"), `{"x":"y"}`, false)
	f.Add([]byte("- 1"), `null`, true)
	f.Fuzz(func(t *testing.T, doc []byte, values string, secret bool) {
		vals, err := Decode(doc)
		if err != nil {
			return
		}
		if valuepath.CheckShape("doc", vals) != nil {
			t.Fatalf("Decode accepted a document over the limits")
		}
		// Build takes the sources apart: the top-level leaves are listed first.
		var leaves []string
		for k, v := range vals {
			if sub, ok := v.(map[string]any); (!ok || len(sub) == 0) && k != workspacesv1.ExalsiusValuesKey {
				leaves = append(leaves, k)
			}
		}
		class := &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
		ws := &workspacesv1.WorkspaceDeployment{Spec: workspacesv1.WorkspaceDeploymentSpec{Values: rawJSON(values)}}
		built, err := Build(Input{Class: class, Workspace: ws, Resources: &workspacesv1.ResolvedResources{Replicas: 1},
			From: []Source{{Values: vals, Secret: secret}}})
		if err != nil || !secret {
			return
		}
		inline := decode(t, built.Inline)
		for _, k := range leaves {
			if _, ok := inline[k]; ok {
				t.Fatalf("secret leaf %q is in the inline values", k)
			}
		}
	})
}
