package valuepath

import "fmt"

// Limits of one document of Helm values: a WorkspaceDeployment's spec.values and each document of
// its spec.valuesFrom sources. The webhook refuses spec.values over them at admission, and the
// workspace-controller refuses any document over them before it merges it, so that no tenant's input
// costs the shared controller more than a bounded amount of memory and time. Real charts' values
// stay far below them.
const (
	// MaxValuesBytes bounds the size of one document, in bytes of its text (the YAML or JSON a
	// tenant wrote) and of its JSON form once YAML aliases are expanded.
	MaxValuesBytes = 256 << 10
	// MaxValuesDepth bounds how deeply maps and lists nest in one document: the document's own
	// top-level map is level 1.
	MaxValuesDepth = 64
	// MaxValuesLeaves bounds how many leaves one document holds: scalars (null included) and empty
	// maps or lists.
	MaxValuesLeaves = 10000
)

// LimitError says that a document of values passed one of the limits above. Its text names the
// field and the limit, never the content.
type LimitError struct {
	// Field names the document, for example spec.values.
	Field string
	// Limit is what was passed: "size", "depth" or "leaves".
	Limit string
	// Max is the limit's value.
	Max int
}

// Error implements error.
func (e *LimitError) Error() string {
	return e.Field + " " + e.Reason()
}

// Reason is the error without the field: what was passed and the limit.
func (e *LimitError) Reason() string {
	var what string
	switch e.Limit {
	case "size":
		what = fmt.Sprintf("is larger than %d bytes", e.Max)
	case "depth":
		what = fmt.Sprintf("nests maps and lists deeper than %d levels", e.Max)
	default:
		what = fmt.Sprintf("holds more than %d leaf values", e.Max)
	}
	return fmt.Sprintf("%s (the %s limit of Helm values)", what, e.Limit)
}

// CheckSize returns a *LimitError for field when n bytes are more than MaxValuesBytes.
func CheckSize(field string, n int) error {
	if n > MaxValuesBytes {
		return &LimitError{Field: field, Limit: "size", Max: MaxValuesBytes}
	}
	return nil
}

// CheckShape returns a *LimitError for field when the decoded value v (maps, lists and scalars, as
// encoding/json decodes them) nests deeper than MaxValuesDepth or holds more than MaxValuesLeaves
// leaves. It walks v once and stops at the first limit passed, without recursion: its cost is
// bounded by the limits, whatever v is.
func CheckShape(field string, v any) error {
	type frame struct {
		v     any
		depth int
	}
	stack := []frame{{v, 0}}
	leaves := 0
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		var children []any
		switch t := f.v.(type) {
		case map[string]any:
			for _, c := range t {
				children = append(children, c)
			}
		case []any:
			children = t
		}
		if len(children) == 0 { // a scalar, or an empty map or list
			leaves++
			if leaves > MaxValuesLeaves {
				return &LimitError{Field: field, Limit: "leaves", Max: MaxValuesLeaves}
			}
		}
		if !isContainer(f.v) {
			continue
		}
		if f.depth+1 > MaxValuesDepth {
			return &LimitError{Field: field, Limit: "depth", Max: MaxValuesDepth}
		}
		for _, c := range children {
			stack = append(stack, frame{c, f.depth + 1})
		}
	}
	return nil
}

func isContainer(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}
