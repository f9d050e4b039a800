package valuepath

import (
	"fmt"
)

// PathError says which key of a path could not be walked.
type PathError struct {
	// Keys is the path.
	Keys []string
	// Index is the position in Keys of the key that failed.
	Index int
	// Msg describes the problem.
	Msg string
}

// Error implements error.
func (e *PathError) Error() string {
	return fmt.Sprintf("value path %s: at %s: %s", String(e.Keys), String(e.Keys[:e.Index+1]), e.Msg)
}

// Get returns the value at keys in values, and whether it is there. A non-map value in the way means
// the path is absent.
func Get(values map[string]any, keys []string) (any, bool) {
	if len(keys) == 0 || values == nil {
		return nil, false
	}
	cur := values
	for i, k := range keys {
		v, ok := cur[k]
		if !ok {
			return nil, false
		}
		if i == len(keys)-1 {
			return v, true
		}
		next, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return nil, false
}

// Set writes value at keys in values, creating missing (or null) intermediate maps. It fails, changing
// nothing, when a value that is not a map is in the way.
func Set(values map[string]any, keys []string, value any) error {
	if len(keys) == 0 {
		return &PathError{Keys: []string{""}, Index: 0, Msg: "empty path"}
	}
	if values == nil {
		return &PathError{Keys: keys, Index: 0, Msg: "values are nil"}
	}
	// Check first, so a failed Set leaves values untouched.
	cur := values
	for i, k := range keys[:len(keys)-1] {
		v, ok := cur[k]
		if !ok || v == nil {
			break
		}
		next, ok := v.(map[string]any)
		if !ok {
			return &PathError{Keys: keys, Index: i, Msg: fmt.Sprintf("a %s is in the way, not a map", kind(v))}
		}
		cur = next
	}
	cur = values
	for _, k := range keys[:len(keys)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	cur[keys[len(keys)-1]] = value
	return nil
}

// GetPath is Get with a path string.
func GetPath(values map[string]any, path string) (any, bool, error) {
	keys, err := Parse(path)
	if err != nil {
		return nil, false, err
	}
	v, ok := Get(values, keys)
	return v, ok, nil
}

// SetPath is Set with a path string.
func SetPath(values map[string]any, path string, value any) error {
	keys, err := Parse(path)
	if err != nil {
		return err
	}
	return Set(values, keys, value)
}

func kind(v any) string {
	switch v.(type) {
	case []any:
		return "list"
	case string:
		return "string"
	case bool:
		return "bool"
	case float64, float32, int, int32, int64:
		return "number"
	default:
		return fmt.Sprintf("%T", v)
	}
}
