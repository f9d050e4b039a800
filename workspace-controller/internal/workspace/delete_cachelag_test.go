package workspace

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// TestDeletionAsksTheAPIServerWhenTheCacheLags: a workspace deleted while the cache does not show its
// ServiceSet yet (made a moment before, or while the watches re-list after an API server restart)
// must not take the ServiceSet for gone: the deletion reads the API server, deletes the ServiceSet and
// waits, instead of dropping the finalizer and leaving the ServiceSet and its release behind. The
// lagging cache is a real cache of the real API server whose ServiceSet informer selects nothing, so
// it holds that ServiceSet at no moment.
func TestDeletionAsksTheAPIServerWhenTheCacheLags(t *testing.T) {
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	ns := newNamespace(t)
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name("lag")}}
	ws.Status.ServiceSetName = "demo-" + ws.Name
	ss := &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ws.Status.ServiceSetName, Labels: map[string]string{
			workspacesv1.WorkspaceLabel: ws.Name, workspacesv1.WorkspaceNamespaceLabel: ns}},
		Spec: k0rdentv1beta1.ServiceSetSpec{
			Cluster:  "demo",
			Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: []k0rdentv1beta1.ServiceWithValues{{Name: ws.Name, Namespace: "ws-" + ws.Name, Template: "t-1-0-0"}},
		},
	}
	must(t, k8s.Create(ctx, ss))

	lagging, err := cache.New(mgmt.Config, cache.Options{Scheme: mgmt.Scheme, ByObject: map[client.Object]cache.ByObject{
		&k0rdentv1beta1.ServiceSet{}: {Label: labels.SelectorFromSet(labels.Set{"test.exalsius.ai/never": "matches"})},
	}})
	must(t, err)
	go func() { _ = lagging.Start(ctx) }()
	if !lagging.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not start")
	}
	behind, err := client.New(mgmt.Config, client.Options{Scheme: mgmt.Scheme, Cache: &client.CacheOptions{Reader: lagging}})
	must(t, err)
	if err := behind.Get(ctx, client.ObjectKeyFromObject(ss), &k0rdentv1beta1.ServiceSet{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the lagging cache must not show the ServiceSet, got %v", err)
	}

	s := &scope{ws: ws, cdKey: types.NamespacedName{Namespace: ns, Name: "demo"}}
	r := &Reconciler{Client: behind, APIReader: k8s}
	gone, err := r.deleteServiceSet(ctx, s, false)
	must(t, err)
	if gone {
		t.Fatal("the deletion took the ServiceSet for gone because the cache did not show it")
	}
	var left k0rdentv1beta1.ServiceSet
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(ss), &left); err == nil && left.DeletionTimestamp.IsZero() {
		t.Fatal("the ServiceSet was not deleted")
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	// Once the API server says it is gone, it is.
	gone, err = r.deleteServiceSet(ctx, s, false)
	must(t, err)
	if !gone {
		t.Fatal("a ServiceSet the API server no longer has is still waited for")
	}
}
