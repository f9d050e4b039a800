package valuepath

import (
	"slices"
	"testing"
)

func TestUndeclared(t *testing.T) {
	declared := [][]string{MustParse("auth.password"), MustParse("server"), MustParse(`labels["app.kubernetes.io/debug"]`)}
	values := map[string]any{
		"auth":         map[string]any{"password": "x", "user": "root"},
		"server":       map[string]any{"port": 1, "tls": map[string]any{"on": true}},
		"labels":       map[string]any{"app.kubernetes.io/debug": "true", "team": "a"},
		"extraObjects": []any{map[string]any{"kind": "ClusterRoleBinding"}},
		"nodeSelector": map[string]any{"gpu": "h100"},
		"empty":        map[string]any{},
	}
	got, more := Undeclared(values, declared)
	want := []string{"auth.user", "empty", "extraObjects", "labels.team", "nodeSelector"}
	if !slices.Equal(got, want) || more {
		t.Errorf("Undeclared = %v (more %v), want %v", got, more, want)
	}
	if got, _ := Undeclared(map[string]any{"auth": map[string]any{"password": "x"}, "server": 3}, declared); len(got) != 0 {
		t.Errorf("declared values reported: %v", got)
	}
	if got, _ := Undeclared(map[string]any{"a": 1}, nil); !slices.Equal(got, []string{"a"}) {
		t.Errorf("nothing declared: %v", got)
	}
	many := map[string]any{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		many[k] = 1
	}
	if got, more := Undeclared(many, declared); len(got) != MaxUndeclared || !more {
		t.Errorf("more than the bound: %d reported, more %v", len(got), more)
	}
}

func TestLeavesAndOverlapping(t *testing.T) {
	enforced := map[string]any{"securityContext": map[string]any{"runAsNonRoot": true}, "serviceAccount": map[string]any{"create": false}}
	leaves := Leaves(enforced)
	if len(leaves) != 2 || String(leaves[0]) != "securityContext.runAsNonRoot" || String(leaves[1]) != "serviceAccount.create" {
		t.Fatalf("Leaves = %v", leaves)
	}
	user := map[string]any{
		"securityContext": map[string]any{"runAsNonRoot": false, "runAsUser": 1000},
		"serviceAccount":  nil,
		"ui":              "lab",
	}
	got, more := Overlapping(user, leaves)
	if !slices.Equal(got, []string{"securityContext.runAsNonRoot", "serviceAccount"}) || more {
		t.Errorf("Overlapping = %v (more %v)", got, more)
	}
	if got, _ := Overlapping(map[string]any{"ui": "lab"}, leaves); len(got) != 0 {
		t.Errorf("unrelated values overlap: %v", got)
	}
}
