package helmvalues

import (
	"fmt"
	"sort"
)

// SecretLeaves returns the scalar values of a secret values document (Output.Secret), as text, so that
// messages which might quote them (a Helm error k0rdent reports, an event) can be redacted before
// they reach a status or an Event. A document that does not decode gives none.
func SecretLeaves(doc string) []string {
	if doc == "" {
		return nil
	}
	m, err := Decode([]byte(doc))
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for _, c := range t {
				walk(c)
			}
		case []any:
			for _, c := range t {
				walk(c)
			}
		case nil:
		case string:
			seen[t] = true
		default:
			seen[fmt.Sprint(t)] = true
		}
	}
	walk(m)
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
