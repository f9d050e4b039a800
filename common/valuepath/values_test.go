package valuepath

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	values := map[string]any{
		"a": map[string]any{
			"nvidia.com/gpu": 2,
			"list":           []any{1},
			"nil":            nil,
		},
		"s": "str",
	}
	cases := []struct {
		path  string
		want  any
		found bool
	}{
		{`a["nvidia.com/gpu"]`, 2, true},
		{"a.list", []any{1}, true},
		{"a.nil", nil, true},
		{"s", "str", true},
		{"a.missing", nil, false},
		{"s.below", nil, false},
		{"a.list.x", nil, false},
		{"missing.x", nil, false},
	}
	for _, tc := range cases {
		got, found, err := GetPath(values, tc.path)
		if err != nil {
			t.Fatalf("GetPath(%q): %v", tc.path, err)
		}
		if found != tc.found || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("GetPath(%q) = %v, %v; want %v, %v", tc.path, got, found, tc.want, tc.found)
		}
	}
	if _, found := Get(nil, []string{"a"}); found {
		t.Error("Get on nil values found something")
	}
	if _, found := Get(values, nil); found {
		t.Error("Get with no keys found something")
	}
	if _, _, err := GetPath(values, "a..b"); err == nil {
		t.Error("GetPath with a bad path returned no error")
	}
}

func TestSetCreatesIntermediateMaps(t *testing.T) {
	values := map[string]any{"keep": 1, "n": nil}
	if err := SetPath(values, `resources.limits["nvidia.com/gpu"]`, int64(4)); err != nil {
		t.Fatal(err)
	}
	if err := SetPath(values, "resources.requests.cpu", "2"); err != nil {
		t.Fatal(err)
	}
	if err := SetPath(values, "n.x", true); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"keep": 1,
		"n":    map[string]any{"x": true},
		"resources": map[string]any{
			"limits":   map[string]any{"nvidia.com/gpu": int64(4)},
			"requests": map[string]any{"cpu": "2"},
		},
	}
	if !reflect.DeepEqual(values, want) {
		t.Fatalf("got %#v\nwant %#v", values, want)
	}
	// Overwriting a leaf, even a map, is allowed.
	if err := SetPath(values, "resources", "flat"); err != nil {
		t.Fatal(err)
	}
	if values["resources"] != "flat" {
		t.Fatalf("leaf not overwritten: %v", values["resources"])
	}
}

func TestSetFailsOnNonMapInTheWay(t *testing.T) {
	values := map[string]any{"a": map[string]any{"b": "scalar"}, "l": []any{}}
	err := SetPath(values, "a.b.c.d", 1)
	var pe *PathError
	if !errors.As(err, &pe) {
		t.Fatalf("got %v, want a *PathError", err)
	}
	if pe.Index != 1 || !strings.Contains(err.Error(), "string") || !strings.Contains(err.Error(), "at a.b") {
		t.Fatalf("error %q (index %d) does not name a.b and the string in the way", err, pe.Index)
	}
	if !reflect.DeepEqual(values["a"], map[string]any{"b": "scalar"}) {
		t.Fatalf("failed Set changed the values: %v", values)
	}
	if err := SetPath(values, "l.x", 1); err == nil || !strings.Contains(err.Error(), "list") {
		t.Fatalf("Set through a list: %v", err)
	}
	if err := Set(nil, []string{"a"}, 1); err == nil {
		t.Fatal("Set on nil values returned no error")
	}
	if err := Set(values, nil, 1); err == nil {
		t.Fatal("Set with no keys returned no error")
	}
	if err := SetPath(values, "a[", 1); err == nil {
		t.Fatal("SetPath with a bad path returned no error")
	}
}
