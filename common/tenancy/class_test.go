package tenancy

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

func TestClassAllowed(t *testing.T) {
	class := func(sel *metav1.LabelSelector) *workspacesv1.WorkspaceClass {
		return &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu-privileged"},
			Spec: workspacesv1.WorkspaceClassSpec{AllowedNamespaces: sel}}
	}
	gold := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	for _, tc := range []struct {
		name   string
		class  *workspacesv1.WorkspaceClass
		labels map[string]string
		want   bool
	}{
		{"unset allows all", class(nil), nil, true},
		{"empty selector selects all", class(&metav1.LabelSelector{}), nil, true},
		{"selected", class(gold), map[string]string{"tier": "gold", "team": "a"}, true},
		{"not selected", class(gold), map[string]string{"tier": "silver"}, false},
		{"no labels", class(gold), nil, false},
		{"expression", class(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}), map[string]string{"team": "b"}, true},
		{"invalid selector allows none", class(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: "Near"}}}), map[string]string{"team": "b"}, false},
	} {
		ok, why := ClassAllowed(tc.class, "team-a", tc.labels)
		if ok != tc.want {
			t.Errorf("%s: allowed %v (%s), want %v", tc.name, ok, why, tc.want)
		}
		if !ok && (!strings.Contains(why, "spec.allowedNamespaces") || !strings.Contains(why, "gpu-privileged")) {
			t.Errorf("%s: the reason does not name the class and its field: %q", tc.name, why)
		}
	}
}
