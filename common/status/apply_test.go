package status

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

var mgmt *testenv.Management

func TestMain(m *testing.M) {
	testenv.Main(m, func(mg *testenv.Management) error { mgmt = mg; return nil })
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newColony(t *testing.T, name string) *infrav1.Colony {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "status-"}}
	if err := mgmt.Client.Create(ctxT(t), ns); err != nil {
		t.Fatal(err)
	}
	colony := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name}}
	if err := mgmt.Client.Create(ctxT(t), colony); err != nil {
		t.Fatal(err)
	}
	return colony
}

// statusManagers returns, per field manager, the operation of its status entry.
func statusManagers(obj client.Object) map[string]metav1.ManagedFieldsOperationType {
	out := map[string]metav1.ManagedFieldsOperationType{}
	for _, mf := range obj.GetManagedFields() {
		if mf.Subresource == "status" {
			out[mf.Manager] = mf.Operation
		}
	}
	return out
}

// TestApplyOwnsOnlyWhatItSends: the status is applied under the given manager; a field another
// manager owns survives, a field this manager stops sending is removed, an explicit zero is stored,
// the spec is never sent, and the object passed in is updated from the response.
func TestApplyOwnsOnlyWhatItSends(t *testing.T) {
	colony := newColony(t, "owned")
	key := client.ObjectKeyFromObject(colony)

	mine := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	mine.Status = infrav1.ColonyStatus{Phase: infrav1.ColonyPhaseProvisioning, TotalClusters: 0, KubeconfigSecretName: "s",
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Waiting", LastTransitionTime: metav1.Now()}}}
	if err := Apply(ctxT(t), mgmt.Client, mine, "manager-a", Explicit("totalClusters", "readyClusters")); err != nil {
		t.Fatal(err)
	}
	if mine.ResourceVersion == "" || mine.ResourceVersion == colony.ResourceVersion || mine.Status.Phase != infrav1.ColonyPhaseProvisioning {
		t.Fatalf("the object passed in was not updated from the response: rv %q, status %+v", mine.ResourceVersion, mine.Status)
	}

	other := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	other.Status.GPUInventory = map[string]infrav1.ClusterGPUInventory{"cd": {Reachable: true, LastUpdated: metav1.Now()}}
	if err := Apply(ctxT(t), mgmt.Client, other, "manager-b"); err != nil {
		t.Fatal(err)
	}

	// manager-a drops kubeconfigSecretName and changes the phase; gpuInventory is not its field.
	mine.Status = infrav1.ColonyStatus{Phase: infrav1.ColonyPhaseReady, TotalClusters: 0,
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}}
	if err := Apply(ctxT(t), mgmt.Client, mine, "manager-a", Explicit("totalClusters", "readyClusters")); err != nil {
		t.Fatal(err)
	}

	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(infrav1.GroupVersion.WithKind("Colony"))
	if err := mgmt.Client.Get(ctxT(t), key, u); err != nil {
		t.Fatal(err)
	}
	st, _, _ := unstructured.NestedMap(u.Object, "status")
	if st["phase"] != string(infrav1.ColonyPhaseReady) {
		t.Errorf("phase = %v", st["phase"])
	}
	if _, ok := st["kubeconfigSecretName"]; ok {
		t.Errorf("a field the manager stopped sending was kept: %v", st)
	}
	if v, ok := st["totalClusters"]; !ok || v != int64(0) {
		t.Errorf("explicit zero not stored: totalClusters = %v (present %v)", v, ok)
	}
	if _, ok := st["gpuInventory"]; !ok {
		t.Errorf("another manager's field was removed: %v", st)
	}
	if got := statusManagers(u); got["manager-a"] != metav1.ManagedFieldsOperationApply || got["manager-b"] != metav1.ManagedFieldsOperationApply {
		t.Errorf("status managers = %v", got)
	}
}

// TestApplyIfUnchangedRefusesAStaleRead: with IfUnchanged, an apply from an object read before
// another write fails with a Conflict and writes nothing; without it, it is written.
func TestApplyIfUnchangedRefusesAStaleRead(t *testing.T) {
	colony := newColony(t, "stale")
	stale := colony.DeepCopy()

	fresh := colony.DeepCopy()
	fresh.Status = infrav1.ColonyStatus{GPUInventory: map[string]infrav1.ClusterGPUInventory{"a": {Reachable: true, LastUpdated: metav1.Now()}}}
	if err := Apply(ctxT(t), mgmt.Client, fresh, "inv", IfUnchanged()); err != nil {
		t.Fatal(err)
	}
	stale.Status = infrav1.ColonyStatus{GPUInventory: map[string]infrav1.ClusterGPUInventory{"b": {Reachable: true, LastUpdated: metav1.Now()}}}
	if err := Apply(ctxT(t), mgmt.Client, stale, "inv", IfUnchanged()); !apierrors.IsConflict(err) {
		t.Fatalf("stale apply with IfUnchanged: %v, want a Conflict", err)
	}
	got := &infrav1.Colony{}
	if err := mgmt.Client.Get(ctxT(t), client.ObjectKeyFromObject(colony), got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Status.GPUInventory["a"]; !ok || len(got.Status.GPUInventory) != 1 {
		t.Fatalf("the refused apply changed the inventory: %v", got.Status.GPUInventory)
	}
	if err := Apply(ctxT(t), mgmt.Client, stale, "inv"); err != nil {
		t.Fatalf("unconditional apply: %v", err)
	}
}

// TestBodySendsIdentityAndStatusOnly: the apply body carries kind, name, namespace and status, never
// the spec, labels or resourceVersion (unless IfUnchanged).
func TestBodySendsIdentityAndStatusOnly(t *testing.T) {
	gvk := infrav1.GroupVersion.WithKind("Colony")
	colony := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", ResourceVersion: "7", Labels: map[string]string{"a": "b"}},
		Spec: infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{{ClusterName: "x"}}}}
	u, err := body(gvk, colony, options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := u.Object["spec"]; ok || u.GetResourceVersion() != "" || len(u.GetLabels()) != 0 || u.GetName() != "c" || u.GetNamespace() != "ns" || u.GetKind() != "Colony" {
		t.Errorf("body = %v", u.Object)
	}
	if st, ok := u.Object["status"].(map[string]any); !ok || len(st) != 0 {
		t.Errorf("an empty status must be sent as {}: %v", u.Object["status"])
	}
	u, err = body(gvk, colony, options{conditional: true})
	if err != nil || u.GetResourceVersion() != "7" {
		t.Errorf("IfUnchanged: rv %q, %v", u.GetResourceVersion(), err)
	}
}

// TestExplicitNamesTheField: Explicit refuses a field that is missing or not a scalar, naming it.
func TestExplicitNamesTheField(t *testing.T) {
	gvk := infrav1.GroupVersion.WithKind("Colony")
	for _, name := range []string{"conditions", "noSuchField"} {
		_, err := body(gvk, &infrav1.Colony{}, options{explicit: []string{name}})
		if err == nil || !strings.Contains(err.Error(), "status."+name) {
			t.Errorf("Explicit(%q): %v", name, err)
		}
	}
}
