package valuepath

import "sort"

// MaxUndeclared bounds the paths Undeclared reports.
const MaxUndeclared = 10

// Undeclared lists the paths of values that no declared path covers, sorted, at most MaxUndeclared:
// a value is covered when its path is a declared path or lies under one (a declared `auth` covers
// `auth.password`). Maps are walked into only where a declared path lies below them; anything else
// (a leaf, a list, a map no declared path reaches into, an empty map) is reported whole, at its path.
// The second result tells whether there were more than those reported.
func Undeclared(values map[string]any, declared [][]string) ([]string, bool) {
	var out []string
	var walk func(m map[string]any, at []string)
	walk = func(m map[string]any, at []string) {
		for k, v := range m {
			p := append(append(make([]string, 0, len(at)+1), at...), k)
			if covered(p, declared) {
				continue
			}
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 && below(p, declared) {
				walk(sub, p)
				continue
			}
			out = append(out, String(p))
		}
	}
	walk(values, nil)
	sort.Strings(out)
	if len(out) > MaxUndeclared {
		return out[:MaxUndeclared], true
	}
	return out, false
}

// covered reports whether p is a declared path or lies under one.
func covered(p []string, declared [][]string) bool {
	for _, d := range declared {
		if HasPrefix(p, d) {
			return true
		}
	}
	return false
}

// below reports whether a declared path lies strictly under p.
func below(p []string, declared [][]string) bool {
	for _, d := range declared {
		if len(d) > len(p) && HasPrefix(d, p) {
			return true
		}
	}
	return false
}

// Leaves lists the paths of a values document's leaves: every value that is not a non-empty map (a
// scalar, a list, null, an empty map), sorted by their String form.
func Leaves(values map[string]any) [][]string {
	var out [][]string
	var walk func(m map[string]any, at []string)
	walk = func(m map[string]any, at []string) {
		for k, v := range m {
			p := append(append(make([]string, 0, len(at)+1), at...), k)
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(sub, p)
				continue
			}
			out = append(out, p)
		}
	}
	walk(values, nil)
	sort.Slice(out, func(i, j int) bool { return String(out[i]) < String(out[j]) })
	return out
}

// Overlapping lists the leaf paths of values that one of paths holds or lies under (either is a prefix
// of the other): the values a document sets where paths are set too. Sorted, at most MaxUndeclared;
// the second result tells whether there were more.
func Overlapping(values map[string]any, paths [][]string) ([]string, bool) {
	var out []string
	for _, l := range Leaves(values) {
		for _, p := range paths {
			if HasPrefix(l, p) || HasPrefix(p, l) {
				out = append(out, String(l))
				break
			}
		}
	}
	if len(out) > MaxUndeclared {
		return out[:MaxUndeclared], true
	}
	return out, false
}
