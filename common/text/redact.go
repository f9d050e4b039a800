package text

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// Redacted replaces a secret value that Redact found.
const Redacted = "[redacted]"

// MinRedactLen is the shortest secret Redact looks for: shorter values ("1", "on", "yes") would
// blank out ordinary words of a message, and are no credential worth the name.
const MinRedactLen = 4

// Redact replaces in s every occurrence of each secret of at least MinRedactLen bytes, as it is and
// as it appears quoted in JSON or Go syntax (a Helm or Kubernetes error message, a JSON document),
// with Redacted. Longer secrets are replaced first, so one that contains another goes whole.
func Redact(s string, secrets []string) string {
	if s == "" || len(secrets) == 0 {
		return s
	}
	forms := redactForms(secrets)
	for _, f := range forms {
		if strings.Contains(s, f) {
			s = strings.ReplaceAll(s, f, Redacted)
		}
	}
	return s
}

// redactForms are the secrets and their escaped forms, longest first, without duplicates.
func redactForms(secrets []string) []string {
	seen := map[string]bool{}
	var forms []string
	add := func(f string) {
		if len(f) >= MinRedactLen && !seen[f] {
			seen[f] = true
			forms = append(forms, f)
		}
	}
	for _, sec := range secrets {
		if len(sec) < MinRedactLen {
			continue
		}
		add(sec)
		if b, err := json.Marshal(sec); err == nil {
			add(string(b[1 : len(b)-1])) // JSON-escaped, without the quotes
		}
		q := strconv.Quote(sec)
		add(q[1 : len(q)-1]) // Go-escaped, without the quotes
	}
	sort.SliceStable(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	return forms
}
