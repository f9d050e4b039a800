package validation

import (
	"encoding/json"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func raw(v any) *apiextensionsv1.JSON {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return &apiextensionsv1.JSON{Raw: b}
}

func ptr[T any](v T) *T { return &v }

// expectPaths fails unless errs name exactly the given field paths (in sorted order).
func expectPaths(t *testing.T, errs field.ErrorList, paths ...string) {
	t.Helper()
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	if strings.Join(got, "|") != strings.Join(paths, "|") {
		t.Fatalf("want errors at %v, got %v", paths, errs)
	}
}
