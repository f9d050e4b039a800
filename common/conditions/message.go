package conditions

import (
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/exalsius/exalsius-operator/common/text"
)

// MaxMessageBytes bounds every condition message the components write. The CRDs accept 32768 bytes
// (metav1.Condition's schema) and refuse the whole status write above it; a message built from many
// inputs (a placement summary over many clusters, a list of missing values) is cut well below that,
// at a character boundary, with text.Ellipsis.
const MaxMessageBytes = 4096

// Set is meta.SetStatusCondition with the message cut to MaxMessageBytes.
func Set(conds *[]metav1.Condition, c metav1.Condition) bool {
	c.Message = text.Truncate(c.Message, MaxMessageBytes)
	return meta.SetStatusCondition(conds, c)
}

// Cut cuts every message of conds to MaxMessageBytes, in place.
func Cut(conds []metav1.Condition) {
	for i := range conds {
		conds[i].Message = text.Truncate(conds[i].Message, MaxMessageBytes)
	}
}

// CutObject cuts the condition messages of obj's status, in place: status.conditions of a typed
// object (a pointer to a struct whose Status struct holds Conditions []metav1.Condition) or of an
// unstructured one. Other objects are left alone. common/status and the managers' clients
// (common/bootstrap) call it on every status they write, so that no write fails on a long message.
func CutObject(obj any) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		CutUnstructured(u.Object)
		return
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return
	}
	st := v.Elem().FieldByName("Status")
	if !st.IsValid() || st.Kind() != reflect.Struct {
		return
	}
	f := st.FieldByName("Conditions")
	if !f.IsValid() || !f.CanInterface() {
		return
	}
	if conds, ok := f.Interface().([]metav1.Condition); ok {
		Cut(conds)
	}
}

// CutUnstructured cuts the messages of status.conditions in an unstructured object, in place.
func CutUnstructured(obj map[string]any) {
	st, _ := obj["status"].(map[string]any)
	list, _ := st["conditions"].([]any)
	for _, c := range list {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if msg, ok := m["message"].(string); ok {
			m["message"] = text.Truncate(msg, MaxMessageBytes)
		}
	}
}
