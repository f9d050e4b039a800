package prerequisites

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// These tests run the installer and the collector against controller-runtime's fake client (no API
// server); the workspace reconciler's integration tests (internal/workspace, prerequisites_test.go)
// run them against a real one.

func fakeClient(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := k0rdentv1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := workspacesv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&workspacesv1.WorkspaceDeployment{}, owned.IndexCluster, func(o client.Object) []string {
			return []string{owned.ClusterKey(o.(*workspacesv1.WorkspaceDeployment)).String()}
		}).Build()
}

func testWorkspace(name, class string) *workspacesv1.WorkspaceDeployment {
	return &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name},
		Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: class,
			ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "cd", Namespace: "kcm"}}}
}

func testClass(name string, prereqs ...workspacesv1.Prerequisite) *workspacesv1.WorkspaceClass {
	return &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: workspacesv1.WorkspaceClassSpec{Prerequisites: prereqs}}
}

func gpuOperator(namespace, values string) workspacesv1.Prerequisite {
	p := workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: "gpu-operator-v1"}, Namespace: namespace}
	if values != "" {
		p.Values = &apiextensionsv1.JSON{Raw: []byte(values)}
	}
	return p
}

func request(ws *workspacesv1.WorkspaceDeployment, class *workspacesv1.WorkspaceClass) Request {
	cd := &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kcm", Name: "cd", UID: "cd-uid"}}
	return Request{Workspace: ws, Class: class, Cluster: cd, ClusterKey: client.ObjectKeyFromObject(cd),
		ClusterOwner: metav1.OwnerReference{APIVersion: k0rdentv1beta1.GroupVersion.String(), Kind: "ClusterDeployment", Name: "cd", UID: "cd-uid"}}
}

// The first workspace makes the shared ServiceSet and waits for it; once k0rdent reports it
// deployed, the class's prerequisites are ready. A class without prerequisites needs nothing.
func TestEnsureMakesTheSharedServiceSet(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	in := &Installer{Client: c}
	class := testClass("a", gpuOperator("gpu-operator", `{"driver":{"enabled":false}}`))
	res, err := in.Ensure(ctx, request(testWorkspace("nb", "a"), class))
	if err != nil {
		t.Fatal(err)
	}
	if res.Ready() || len(res.Pending) != 1 || res.Pending[0] != "gpu-operator-v1 (Pending)" || len(res.Statuses) != 1 {
		t.Fatalf("result %+v, want one pending prerequisite", res)
	}
	name := owned.PrerequisiteServiceSetName("cd", "gpu-operator-v1")
	if st := res.Statuses[0]; st.ServiceSetName != name || st.Namespace != "gpu-operator" || st.State != string(k0rdentv1beta1.ServiceStatePending) {
		t.Errorf("status %+v", st)
	}
	ss := &k0rdentv1beta1.ServiceSet{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "kcm", Name: name}, ss); err != nil {
		t.Fatal(err)
	}
	if ss.Spec.Cluster != "cd" || ss.Labels[workspacesv1.ClusterDeploymentLabel] != "cd" || ss.Labels[workspacesv1.PrerequisiteLabel] == "" ||
		ss.Annotations[owned.AnnotationPrerequisiteTemplate] != "gpu-operator-v1" || len(ss.OwnerReferences) != 1 || ss.OwnerReferences[0].UID != "cd-uid" ||
		len(ss.Spec.Services) != 1 || ss.Spec.Services[0].Values != "driver:\n  enabled: false\n" {
		t.Errorf("shared ServiceSet %+v", ss)
	}
	ss.Status.Services = []k0rdentv1beta1.ServiceState{{Name: ss.Spec.Services[0].Name, Namespace: "gpu-operator", State: k0rdentv1beta1.ServiceStateDeployed}}
	if err := c.Update(ctx, ss); err != nil {
		t.Fatal(err)
	}
	if res, err := in.Ensure(ctx, request(testWorkspace("nb", "a"), class)); err != nil || !res.Ready() {
		t.Errorf("deployed: %+v, %v; want ready", res, err)
	}
	if res, err := in.Ensure(ctx, request(testWorkspace("nb", "b"), testClass("b"))); err != nil || !res.Ready() || res.Statuses != nil {
		t.Errorf("no prerequisites: %+v, %v", res, err)
	}
}

// A prerequisite that names another namespace than the copy on the cluster conflicts
// (PrerequisiteNamespaceConflict); other values than the class in use on the cluster asks conflict
// as values (PrerequisiteValuesConflict), and the values are taken over once that class is unused.
func TestEnsureConflicts(t *testing.T) {
	ctx := context.Background()
	owner := testWorkspace("first", "a")
	c := fakeClient(t, owner)
	in := &Installer{Client: c}
	if _, err := in.Ensure(ctx, request(owner, testClass("a", gpuOperator("", `{"x":1}`)))); err != nil {
		t.Fatal(err)
	}

	res, err := in.Ensure(ctx, request(testWorkspace("nb", "c"), testClass("c", gpuOperator("elsewhere", `{"x":1}`))))
	if err != nil {
		t.Fatal(err)
	}
	if res.ConflictReason != workspacesv1.ReasonPrerequisiteNamespaceConflict || len(res.Conflicts) != 1 || !strings.Contains(res.Conflicts[0], "elsewhere") ||
		res.Statuses[0].State != StateConflict {
		t.Errorf("namespace conflict: %+v", res)
	}

	other := request(testWorkspace("nb", "b"), testClass("b", gpuOperator("", `{"x":2}`)))
	res, err = in.Ensure(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if res.ConflictReason != workspacesv1.ReasonPrerequisiteValuesConflict || len(res.Conflicts) != 1 || !strings.Contains(res.Conflicts[0], "team/first") {
		t.Errorf("values conflict: %+v", res)
	}

	if err := c.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	res, err = in.Ensure(ctx, other)
	if err != nil || len(res.Conflicts) != 0 {
		t.Fatalf("class a unused: %+v, %v; want no conflict", res, err)
	}
	ss := &k0rdentv1beta1.ServiceSet{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "kcm", Name: owned.PrerequisiteServiceSetName("cd", "gpu-operator-v1")}, ss); err != nil {
		t.Fatal(err)
	}
	if ss.Annotations[owned.AnnotationPrerequisiteValuesFrom] != "b" || ss.Spec.Services[0].Values != "x: 2\n" {
		t.Errorf("values not taken over: %v %q", ss.Annotations, ss.Spec.Services[0].Values)
	}
}

// The collector marks a prerequisite no live workspace needs, clears the mark when one needs it
// again, and deletes it once the grace period has passed.
func TestCollector(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	ss := &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kcm", Name: "cd-prereq-gpu-operator-v1",
		Labels:      map[string]string{workspacesv1.ClusterDeploymentLabel: "cd", workspacesv1.PrerequisiteLabel: "gpu-operator-v1"},
		Annotations: map[string]string{owned.AnnotationPrerequisiteTemplate: "gpu-operator-v1"}}}
	ws := testWorkspace("nb", "a")
	c := fakeClient(t, ss, ws, testClass("a", gpuOperator("", "")))
	col := &Collector{Client: c, GracePeriod: time.Minute, Now: func() time.Time { return now }}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ss)}
	get := func() *k0rdentv1beta1.ServiceSet {
		got := &k0rdentv1beta1.ServiceSet{}
		if err := c.Get(ctx, req.NamespacedName, got); err != nil {
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
	if err := c.Delete(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if res, err := col.Reconcile(ctx, req); err != nil || res.RequeueAfter != time.Minute || get().Annotations[owned.AnnotationUnusedSince] != now.Format(time.RFC3339) {
		t.Fatalf("unused: %+v, %v, %v", res, err, get().Annotations)
	}
	now = now.Add(40 * time.Second)
	if res, err := col.Reconcile(ctx, req); err != nil || res.RequeueAfter != 20*time.Second {
		t.Fatalf("within the grace period: %+v, %v", res, err)
	}

	back := testWorkspace("again", "a")
	if err := c.Create(ctx, back); err != nil {
		t.Fatal(err)
	}
	if _, err := col.Reconcile(ctx, req); err != nil || get().Annotations[owned.AnnotationUnusedSince] != "" {
		t.Fatalf("needed again: %v, %v", err, get().Annotations)
	}
	if err := c.Delete(ctx, back); err != nil {
		t.Fatal(err)
	}
	if _, err := col.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if _, err := col.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, req.NamespacedName, &k0rdentv1beta1.ServiceSet{}); err == nil {
		t.Error("an unused prerequisite outlived the grace period")
	}
}
