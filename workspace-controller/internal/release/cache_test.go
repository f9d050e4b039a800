package release

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

func TestCachedServiceSetsKeepADigestOfTheirValues(t *testing.T) {
	values := strings.Repeat("key: value\n", 10000)
	ss := &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Spec:       k0rdentv1beta1.ServiceSetSpec{Services: []k0rdentv1beta1.ServiceWithValues{{Name: "a", Values: values}, {Name: "b"}}},
	}
	out, err := StripServiceSetValues(ss)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*k0rdentv1beta1.ServiceSet)
	if v := got.Spec.Services[0].Values; v == values || len(v) > 100 || !strings.HasPrefix(v, cachedValuesPrefix) {
		t.Fatalf("the cache keeps %d bytes of values, want a digest", len(v))
	}
	if got.Spec.Services[1].Values != "" || len(got.ManagedFields) != 0 {
		t.Fatalf("empty values must stay empty and managedFields go: %q %v", got.Spec.Services[1].Values, got.ManagedFields)
	}
	if ValuesDigest(values) != got.Spec.Services[0].Values || ValuesDigest(got.Spec.Services[0].Values) != got.Spec.Services[0].Values {
		t.Fatal("desired values and the cached digest do not compare equal")
	}
	if ValuesDigest("other: 1\n") == got.Spec.Services[0].Values {
		t.Fatal("different values compare equal")
	}
	// Transforming twice changes nothing (an informer may transform an object it already holds).
	again, _ := StripServiceSetValues(got.DeepCopy())
	if again.(*k0rdentv1beta1.ServiceSet).Spec.Services[0].Values != got.Spec.Services[0].Values {
		t.Fatal("the transform is not idempotent")
	}
}
