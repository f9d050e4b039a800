package valuepath

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// nested returns a chain of depth maps (or lists) around a scalar.
func nested(depth int, list bool) any {
	var v any = "x"
	for range depth {
		if list {
			v = []any{v}
		} else {
			v = map[string]any{"a": v}
		}
	}
	return v
}

func wide(leaves int) map[string]any {
	m := make(map[string]any, leaves)
	for i := range leaves {
		m[fmt.Sprintf("k%d", i)] = i
	}
	return m
}

func wantLimit(t *testing.T, err error, limit string, max int) {
	t.Helper()
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != limit || le.Max != max || le.Field != "spec.values" {
		t.Fatalf("got %v, want the %s limit of spec.values", err, limit)
	}
	if !strings.HasPrefix(err.Error(), "spec.values ") || !strings.Contains(err.Error(), limit) {
		t.Errorf("error %q does not name the field and the limit", err)
	}
}

func TestCheckShapeDepth(t *testing.T) {
	for _, list := range []bool{false, true} {
		if err := CheckShape("spec.values", nested(MaxValuesDepth, list)); err != nil {
			t.Errorf("depth %d (list %v): %v", MaxValuesDepth, list, err)
		}
		wantLimit(t, CheckShape("spec.values", nested(MaxValuesDepth+1, list)), "depth", MaxValuesDepth)
	}
}

func TestCheckShapeLeaves(t *testing.T) {
	if err := CheckShape("spec.values", wide(MaxValuesLeaves)); err != nil {
		t.Errorf("%d leaves: %v", MaxValuesLeaves, err)
	}
	wantLimit(t, CheckShape("spec.values", wide(MaxValuesLeaves+1)), "leaves", MaxValuesLeaves)
	// Empty maps and lists are leaves too.
	m := wide(MaxValuesLeaves - 1)
	m["empty"] = map[string]any{}
	m["none"] = []any{}
	wantLimit(t, CheckShape("spec.values", m), "leaves", MaxValuesLeaves)
}

func TestCheckSize(t *testing.T) {
	if err := CheckSize("spec.values", MaxValuesBytes); err != nil {
		t.Error(err)
	}
	wantLimit(t, CheckSize("spec.values", MaxValuesBytes+1), "size", MaxValuesBytes)
}
