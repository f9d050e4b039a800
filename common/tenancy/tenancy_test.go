package tenancy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

func ns(name string, annotation *string) *corev1.Namespace {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if annotation != nil {
		n.Annotations = map[string]string{workspacesv1.AllowWorkspacesFromAnnotation: *annotation}
	}
	return n
}

func ptr(s string) *string { return &s }

func TestAllowed(t *testing.T) {
	cases := []struct {
		name    string
		wsNS    string
		target  *corev1.Namespace
		allowed bool
		reason  string
	}{
		{"same namespace", "team-a", ns("team-a", nil), true, ""},
		{"same namespace ignores a restrictive annotation", "team-a", ns("team-a", ptr("team-b")), true, ""},
		{"other namespace without annotation", "team-a", ns("clusters", nil), false, "has no"},
		{"other namespace listed", "team-a", ns("clusters", ptr("team-b, team-a")), true, ""},
		{"other namespace not listed", "team-a", ns("clusters", ptr("team-b,team-c")), false, "does not list"},
		{"wildcard", "team-a", ns("clusters", ptr("*")), true, ""},
		{"wildcard among others", "team-a", ns("clusters", ptr("team-b, *")), true, ""},
		{"empty annotation", "team-a", ns("clusters", ptr("")), false, "does not list"},
		{"prefix is not a match", "team", ns("clusters", ptr("team-a")), false, "does not list"},
		{"missing namespace", "team-a", nil, false, "does not exist"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := Allowed(tc.wsNS, tc.target)
			if ok != tc.allowed {
				t.Fatalf("Allowed = %v (%s), want %v", ok, reason, tc.allowed)
			}
			if tc.allowed && reason != "" {
				t.Fatalf("allowed with a reason: %q", reason)
			}
			if !tc.allowed && !strings.Contains(reason, tc.reason) {
				t.Fatalf("reason %q does not contain %q", reason, tc.reason)
			}
		})
	}
}

func TestSameNamespace(t *testing.T) {
	if !SameNamespace("a", "") || !SameNamespace("a", "a") || SameNamespace("a", "b") {
		t.Fatal("SameNamespace is wrong")
	}
}

func FuzzAllowsNamespace(f *testing.F) {
	f.Add("a,b", "a")
	f.Add("*", "x")
	f.Add(" , ,", "")
	f.Fuzz(func(t *testing.T, annotation, namespace string) {
		got := AllowsNamespace(annotation, namespace)
		if namespace != "" && !strings.Contains(annotation, namespace) && !strings.Contains(annotation, "*") && got {
			t.Fatalf("AllowsNamespace(%q, %q) admitted a namespace the annotation does not name", annotation, namespace)
		}
	})
}
