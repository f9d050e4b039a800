package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/webhook/internal/admission"
)

// listRecorder reads the API server and records the type of every list it is asked for.
type listRecorder struct {
	client.Reader
	mu    sync.Mutex
	lists []string
}

func (r *listRecorder) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.mu.Lock()
	r.lists = append(r.lists, fmt.Sprintf("%T", list))
	r.mu.Unlock()
	return r.Reader.List(ctx, list, opts...)
}

// TestClassDeleteReadsMetadataOnly: the delete check of a class still refuses the deletion of a class
// in use, counting its deployments only, and reads the metadata of WorkspaceDeployments, never the
// full objects (a deletion anyone who reaches the webhook can have it check).
func TestClassDeleteReadsMetadataOnly(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	wc := simpleClass("metadata-only-1-0-0")
	must(t, mgmt.Client.Create(ctx, wc))
	other := simpleClass("metadata-only-other-1-0-0")
	must(t, mgmt.Client.Create(ctx, other))
	for i := range 3 {
		must(t, mgmt.Client.Create(ctx, deployment("corpus", fmt.Sprintf("meta-%d", i), wc.Name, nil)))
	}
	must(t, mgmt.Client.Create(ctx, deployment("corpus", "meta-other", other.Name, nil)))
	rec := &listRecorder{Reader: mgmt.Client}
	v := &admission.ClassValidator{Reader: rec}
	_, err := v.ValidateDelete(ctx, wc)
	if err == nil || !strings.Contains(err.Error(), "3 WorkspaceDeployments use it") || strings.Contains(err.Error(), "meta-other") {
		t.Fatalf("want the deletion refused for the class's 3 deployments only, got %v", err)
	}
	want := fmt.Sprintf("%T", &metav1.PartialObjectMetadataList{})
	for _, got := range rec.lists {
		if got != want {
			t.Errorf("the delete check listed %s, want only %s", got, want)
		}
	}
	if len(rec.lists) == 0 {
		t.Error("the delete check listed nothing")
	}
}
