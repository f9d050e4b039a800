package owned

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

func TestOlder(t *testing.T) {
	at := func(ns, name string, sec int) *workspacesv1.WorkspaceDeployment {
		ws := workspace(ns, name, "", nil)
		ws.CreationTimestamp = metav1.NewTime(time.Unix(int64(sec), 0))
		return ws
	}
	for _, tc := range []struct {
		name string
		a, b *workspacesv1.WorkspaceDeployment
		want bool
	}{
		{"created first", at("z", "z", 1), at("a", "a", 2), true},
		{"created later", at("a", "a", 2), at("z", "z", 1), false},
		{"tie: namespace", at("a", "nb", 1), at("b", "nb", 1), true},
		{"tie: namespace, reversed", at("b", "nb", 1), at("a", "nb", 1), false},
		{"tie: name", at("a", "x", 1), at("a", "y", 1), true},
		{"itself", at("a", "x", 1), at("a", "x", 1), false},
	} {
		if got := Older(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: Older = %v, want %v", tc.name, got, tc.want)
		}
	}
}
