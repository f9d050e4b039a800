package v1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestControllingColony(t *testing.T) {
	yes, no := true, false
	colony := func(apiVersion, name string, controller *bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: "Colony", Name: name, Controller: controller}
	}
	cases := []struct {
		name string
		refs []metav1.OwnerReference
		want string
	}{
		{"none", nil, ""},
		{"controller", []metav1.OwnerReference{colony("infra.exalsius.ai/v1", "a", &yes)}, "a"},
		{"another version of the group", []metav1.OwnerReference{colony("infra.exalsius.ai/v2", "a", &yes)}, "a"},
		{"owner but not controller", []metav1.OwnerReference{colony("infra.exalsius.ai/v1", "a", &no)}, ""},
		{"controller unset", []metav1.OwnerReference{colony("infra.exalsius.ai/v1", "a", nil)}, ""},
		{"a Colony of another group", []metav1.OwnerReference{colony("infra.example.com/v1", "a", &yes)}, ""},
		{"a group that only starts alike", []metav1.OwnerReference{colony("infra.exalsius.ai.example.com/v1", "a", &yes)}, ""},
		{"another kind controls", []metav1.OwnerReference{
			{APIVersion: "infra.exalsius.ai/v1", Kind: "Region", Name: "r", Controller: &yes},
			colony("infra.exalsius.ai/v1", "a", &no),
		}, ""},
		{"the controller among owners", []metav1.OwnerReference{
			colony("infra.exalsius.ai/v1", "a", &no),
			colony("infra.exalsius.ai/v1", "b", &yes),
		}, "b"},
	}
	for _, tc := range cases {
		obj := &metav1.ObjectMeta{OwnerReferences: tc.refs}
		if got := ControllingColony(obj); got != tc.want {
			t.Errorf("%s: ControllingColony = %q, want %q", tc.name, got, tc.want)
		}
	}
}
