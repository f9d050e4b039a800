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
