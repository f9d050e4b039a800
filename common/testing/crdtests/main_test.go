package crdtests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// mgmt is the management API server every test of the package shares.
var mgmt *testenv.Management

func TestMain(m *testing.M) {
	testenv.Main(m, func(mg *testenv.Management) error {
		mgmt = mg
		return nil
	})
}

// API versions of the objects under test.
const (
	infraAPI      = "infra.exalsius.ai/v1"
	workspacesAPI = "workspaces.exalsius.ai/v1"
	k0rdentAPI    = "k0rdent.mirantis.com/v1beta1"
)

// validationCase is one object the API server must accept (want empty) or reject with an error that
// contains every string of want (the field path, and where useful the rule's message).
type validationCase struct {
	name string
	// objName overrides the generated object name.
	objName string
	// spec is the object's spec as JSON.
	spec string
	want []string
}

// newObject builds an unstructured object from its kind, name, namespace (empty for cluster-scoped
// kinds) and spec given as JSON. Building from JSON lets a test send values the typed Go structs
// cannot hold (wrong types, unknown enum values, unknown keys).
func newObject(t *testing.T, apiVersion, kind, namespace, name, spec string) *unstructured.Unstructured {
	t.Helper()
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		t.Fatalf("encoding metadata: %v", err)
	}
	doc := fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":%s`, apiVersion, kind, metaJSON)
	if spec != "" {
		doc += `,"spec":` + spec
	}
	doc += "}"
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(doc)); err != nil {
		t.Fatalf("test object is not valid JSON: %v\n%s", err, doc)
	}
	return u
}

// runCases creates one object per case and checks the API server's verdict.
func runCases(t *testing.T, apiVersion, kind, namespace string, cases []validationCase) {
	t.Helper()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.objName
			if name == "" {
				name = fmt.Sprintf("%s-%d", strings.ToLower(kind), i)
			}
			obj := newObject(t, apiVersion, kind, namespace, name, tc.spec)
			err := mgmt.Client.Create(context.Background(), obj)
			checkVerdict(t, err, tc.want)
		})
	}
}

// checkVerdict fails the test unless err matches want: nil for an empty want, else an Invalid error
// whose text contains every string of want.
func checkVerdict(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("the API server rejected a valid object: %v", err)
		}
		return
	}
	requireInvalid(t, err, want...)
}

// requireInvalid fails the test unless err is an Invalid (422) error naming every string of want.
func requireInvalid(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the API server accepted an invalid object; want an error naming %q", want)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error naming %q, got %v", want, err)
	}
	t.Logf("rejected: %v", err)
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not name %q:\n%v", w, err)
		}
	}
}

// createNamespace creates a namespace for one test.
func createNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := mgmt.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}

// mustCreate creates obj and fails the test on any error.
func mustCreate(t *testing.T, obj client.Object) {
	t.Helper()
	if err := mgmt.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
}

// get reads the object back as unstructured.
func get(t *testing.T, apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		t.Fatalf("reading %s %s/%s: %v", kind, namespace, name, err)
	}
	return u
}

// mustJSON decodes a JSON literal of a test into a generic value.
func mustJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("test JSON %q: %v", s, err)
	}
	return v
}

// sameJSON reports whether a and b encode to the same JSON document.
func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	return normalise(t, a) == normalise(t, b)
}

func normalise(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding %v: %v", v, err)
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	out, err := json.Marshal(generic)
	if err != nil {
		t.Fatalf("encoding %v: %v", generic, err)
	}
	return string(out)
}

// nested returns the value at path in u, failing the test when it is absent.
func nested(t *testing.T, u *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if err != nil || !found {
		t.Fatalf("%s %s has no %s (err %v)", u.GetKind(), u.GetName(), strings.Join(path, "."), err)
	}
	return v
}

// updateField reads the object, replaces the value at path (under the object root) with value and
// updates it, returning the API server's verdict.
func updateField(t *testing.T, apiVersion, kind, namespace, name string, value any, path ...string) error {
	t.Helper()
	u := get(t, apiVersion, kind, namespace, name)
	if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
		t.Fatalf("setting %s: %v", strings.Join(path, "."), err)
	}
	return mgmt.Client.Update(context.Background(), u)
}

// updateStatus reads the object, sets its status from JSON and writes it through the status
// subresource, returning the API server's verdict.
func updateStatus(t *testing.T, apiVersion, kind, namespace, name, status string) error {
	t.Helper()
	u := get(t, apiVersion, kind, namespace, name)
	u.Object["status"] = mustJSON(t, status)
	return mgmt.Client.Status().Update(context.Background(), u)
}

// withFields returns the JSON object base with the top-level members of extra (written as
// `,"k":v,...`) set or replaced. It panics on malformed JSON, which is a bug in a test literal.
func withFields(base, extra string) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(base), &obj); err != nil {
		panic(fmt.Sprintf("test literal %s: %v", base, err))
	}
	if extra != "" {
		var add map[string]json.RawMessage
		doc := "{" + strings.TrimPrefix(extra, ",") + "}"
		if err := json.Unmarshal([]byte(doc), &add); err != nil {
			panic(fmt.Sprintf("test literal %s: %v", doc, err))
		}
		for k, v := range add {
			obj[k] = v
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return string(out)
}

// requireTypedList lists every object of a kind through the typed client. The objects a validation
// test got accepted must all decode into the Go types: one undecodable object (a duration that is not
// a Go duration, say) would break every List and watch of the controllers.
func requireTypedList(t *testing.T, list client.ObjectList) {
	t.Helper()
	if err := mgmt.Client.List(context.Background(), list); err != nil {
		t.Fatalf("listing %T typed: %v", list, err)
	}
}

// repeat returns s repeated n times.
func repeat(s string, n int) string { return strings.Repeat(s, n) }
