package server_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rawDeployment is a WorkspaceDeployment as a client that does not know its Go types sends it.
func rawDeployment(name string, perReplica map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "workspaces.exalsius.ai/v1",
		"kind":       "WorkspaceDeployment",
		"metadata":   map[string]any{"name": name, "namespace": "corpus"},
		"spec": map[string]any{
			"workspaceClassRef":    corpusClass,
			"clusterDeploymentRef": map[string]any{"name": "gpu-cluster"},
			"resources":            map[string]any{"perReplica": perReplica},
		},
	}}
	return u
}

// causes returns the field paths of an Invalid error's causes.
func causes(t *testing.T, err error) []string {
	t.Helper()
	st, ok := err.(apierrors.APIStatus)
	if !ok || st.Status().Details == nil {
		t.Fatalf("want an Invalid error with causes, got %v", err)
	}
	var out []string
	for _, c := range st.Status().Details.Causes {
		out = append(out, c.Field)
	}
	return out
}

// TestEveryFieldErrorInOneResponse: a cpu of "-1" and a memory of "lots" are both named, with their
// field paths, in one denial.
func TestEveryFieldErrorInOneResponse(t *testing.T) {
	fixtures(t)
	err := mgmt.Client.Create(context.Background(), rawDeployment("two-errors", map[string]any{"cpu": "-1", "memory": "lots"}))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want Invalid, got %v", err)
	}
	got := strings.Join(causes(t, err), ",")
	for _, want := range []string{"spec.resources.perReplica.cpu", "spec.resources.perReplica.memory"} {
		if !strings.Contains(got, want) {
			t.Errorf("causes %s: %s missing (error: %v)", got, want, err)
		}
	}
}

// TestLongNameNamesMetadataName: a 61-character name is denied naming metadata.name, never `<nil>`.
func TestLongNameNamesMetadataName(t *testing.T) {
	fixtures(t)
	err := mgmt.Client.Create(context.Background(), rawDeployment(strings.Repeat("a", 61), map[string]any{"cpu": "1"}))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want Invalid, got %v", err)
	}
	got := causes(t, err)
	if strings.Join(got, ",") != "metadata.name" || strings.Contains(err.Error(), "<nil>") {
		t.Errorf("causes %v, error %v: want exactly metadata.name", got, err)
	}
}

// TestWrongTypeNamesTheField: a value of the wrong type is named with its field path (by the API
// server's schema validation), not hidden behind a decode error of the defaulting webhook.
func TestWrongTypeNamesTheField(t *testing.T) {
	fixtures(t)
	err := mgmt.Client.Create(context.Background(), rawDeployment("wrong-type", map[string]any{"gpuCount": "two"}))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want Invalid, got %v", err)
	}
	if got := strings.Join(causes(t, err), ","); !strings.Contains(got, "spec.resources.perReplica.gpuCount") {
		t.Errorf("causes %s, error %v: want spec.resources.perReplica.gpuCount", got, err)
	}
}
