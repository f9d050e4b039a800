package gpu

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestModelOf(t *testing.T) {
	node := func(labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	}
	for _, tc := range []struct {
		name     string
		labels   map[string]string
		resource corev1.ResourceName
		want     string
	}{
		{"canonical label wins", map[string]string{LabelGPUModel: "L4", LabelNVIDIAProduct: "NVIDIA-L4"}, ResourceNVIDIA, "L4"},
		{"NVIDIA product label", map[string]string{LabelNVIDIAProduct: "NVIDIA-L4"}, ResourceNVIDIA, "NVIDIA-L4"},
		{"AMD product label", map[string]string{LabelAMDProductName: "MI300X"}, ResourceAMD, "MI300X"},
		{"another vendor's label does not say", map[string]string{LabelAMDProductName: "MI300X"}, ResourceNVIDIA, ""},
		{"no label", nil, ResourceNVIDIA, ""},
		{"unknown resource", map[string]string{LabelGPUModel: "L4"}, "example.com/gpu", ""},
	} {
		if got := ModelOf(node(tc.labels), tc.resource); got != tc.want {
			t.Errorf("%s: ModelOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}
