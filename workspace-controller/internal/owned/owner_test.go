package owned

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

func TestAdmissionAnnotationRoundTrip(t *testing.T) {
	ss := &k0rdentv1beta1.ServiceSet{}
	if AnnotatedAdmission(ss) != nil || AnnotatedAdmission(nil) != nil {
		t.Fatal("an admission read from a ServiceSet without one")
	}
	now := metav1.Now().Rfc3339Copy()
	ad := &workspacesv1.Admission{Cluster: "team/cd", GPUResourceName: "nvidia.com/gpu", GPUVendor: workspacesv1.GPUVendorNVIDIA,
		GPUsPerReplica: 2, Replicas: 2, GPUs: 4, Selector: map[string]string{"a": "b"},
		Nodes: []workspacesv1.AdmittedNode{{Name: "n1", Replicas: 2, Hostname: "h1"}}, AdmittedAt: &now}
	SetAdmissionAnnotation(ss, ad)
	got := AnnotatedAdmission(ss)
	if got == nil || got.GPUs != 4 || got.Nodes[0].Hostname != "h1" || !got.AdmittedAt.Equal(&now) {
		t.Fatalf("round trip: %+v", got)
	}
	SetAdmissionAnnotation(ss, &workspacesv1.Admission{Cluster: "team/cd", Replicas: 1})
	if _, ok := ss.Annotations[AnnotationAdmission]; ok {
		t.Fatal("a CPU-only admission is carried")
	}
	for _, bad := range []string{"{", `{"gpus":0}`, `{"gpus":-1}`, "null"} {
		ss.Annotations = map[string]string{AnnotationAdmission: bad}
		if AnnotatedAdmission(ss) != nil {
			t.Errorf("%q read as an admission", bad)
		}
	}
}

// A ServiceSet scaled to zero holds nothing, so it carries no admission: starting its workspace again
// gates it anew instead of taking the old admission back.
func TestStoppedServiceSetCarriesNoAdmission(t *testing.T) {
	ad := &workspacesv1.Admission{Cluster: "team/cd", GPUsPerReplica: 1, Replicas: 1, GPUs: 1}
	ss := &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelStopped: "true"}}}
	SetAdmissionAnnotation(ss, ad)
	if _, ok := ss.Annotations[AnnotationAdmission]; ok {
		t.Fatal("a stopped ServiceSet carries an admission")
	}
	ss.Labels = nil
	SetAdmissionAnnotation(ss, ad)
	ss.Labels = map[string]string{LabelStopped: "true"}
	if AnnotatedAdmission(ss) != nil {
		t.Fatal("an admission read from a stopped ServiceSet")
	}
}
