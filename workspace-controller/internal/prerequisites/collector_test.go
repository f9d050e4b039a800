package prerequisites

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// The collector marks a prerequisite no live workspace needs, clears the mark when one needs it
// again, and deletes it once the grace period has passed. Its clock is the test's: the grace period
// passes without waiting.
func TestCollector(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	ss := &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Namespace: e.kcm, Name: "cd-prereq-gpu-operator-v1",
		Labels:      map[string]string{workspacesv1.ClusterDeploymentLabel: "cd", workspacesv1.PrerequisiteLabel: "gpu-operator-v1"},
		Annotations: map[string]string{owned.AnnotationPrerequisiteTemplate: "gpu-operator-v1"}},
		Spec: k0rdentv1beta1.ServiceSetSpec{Cluster: "cd", Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider}}}
	class := testClass(unique("a"), gpuOperator("", ""))
	class.Spec.DisplayName, class.Spec.ServiceTemplate.Name = "A", "jupyter-v1" // the CRD requires them
	ws := e.workspace("nb", class.Name)
	for _, o := range []client.Object{ss, class, ws} {
		if err := mgmt.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T: %v", o, err)
		}
	}
	waitCached(t, "the cache holds the class", &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: class.Name}},
		func(_ *workspacesv1.WorkspaceClass, err error) error { return err })
	waitWorkspaceCached(t, ws, true)
	// unused waits until the cache shows the ServiceSet marked unused (since: "" for not marked).
	unused := func(since string) {
		t.Helper()
		waitCached(t, "the cache shows the ServiceSet unused since "+since, &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Namespace: ss.Namespace, Name: ss.Name}},
			func(got *k0rdentv1beta1.ServiceSet, err error) error {
				if err != nil {
					return err
				}
				if got.Annotations[owned.AnnotationUnusedSince] != since {
					return fmt.Errorf("unused since %q", got.Annotations[owned.AnnotationUnusedSince])
				}
				return nil
			})
	}
	unused("")

	col := &Collector{Client: cached, GracePeriod: time.Minute, Now: func() time.Time { return now }}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ss)}
	get := func() *k0rdentv1beta1.ServiceSet {
		got := &k0rdentv1beta1.ServiceSet{}
		if err := mgmt.Client.Get(ctx, req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	if res, err := col.Reconcile(ctx, req); err != nil || res.RequeueAfter != 0 || get().Annotations[owned.AnnotationUnusedSince] != "" {
		t.Fatalf("in use: %+v, %v, %v", res, err, get().Annotations)
	}
	if got := col.forWorkspace(ctx, ws); len(got) != 1 || got[0] != req {
		t.Errorf("forWorkspace = %v", got)
	}
	if err := mgmt.Client.Delete(ctx, ws); err != nil {
		t.Fatal(err)
	}
	waitWorkspaceCached(t, ws, false)
	if res, err := col.Reconcile(ctx, req); err != nil || res.RequeueAfter != time.Minute || get().Annotations[owned.AnnotationUnusedSince] != now.Format(time.RFC3339) {
		t.Fatalf("unused: %+v, %v, %v", res, err, get().Annotations)
	}
	unused(now.Format(time.RFC3339))
	now = now.Add(40 * time.Second)
	if res, err := col.Reconcile(ctx, req); err != nil || res.RequeueAfter != 20*time.Second || get().Annotations[owned.AnnotationUnusedSince] != now.Add(-40*time.Second).Format(time.RFC3339) {
		t.Fatalf("within the grace period: %+v, %v, %v", res, err, get().Annotations)
	}

	back := e.workspace("again", class.Name)
	if err := mgmt.Client.Create(ctx, back); err != nil {
		t.Fatal(err)
	}
	waitWorkspaceCached(t, back, true)
	if _, err := col.Reconcile(ctx, req); err != nil || get().Annotations[owned.AnnotationUnusedSince] != "" {
		t.Fatalf("needed again: %v, %v", err, get().Annotations)
	}
	unused("")
	if err := mgmt.Client.Delete(ctx, back); err != nil {
		t.Fatal(err)
	}
	waitWorkspaceCached(t, back, false)
	if _, err := col.Reconcile(ctx, req); err != nil || get().Annotations[owned.AnnotationUnusedSince] != now.Format(time.RFC3339) {
		t.Fatalf("unused again: %v, %v", err, get().Annotations)
	}
	unused(now.Format(time.RFC3339))
	now = now.Add(time.Minute)
	if _, err := col.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Get(ctx, req.NamespacedName, &k0rdentv1beta1.ServiceSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("an unused prerequisite outlived the grace period: %v", err)
	}
}
