package colony

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

func colonyWith(n int) *infrav1.Colony {
	c := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Name: "col", Namespace: "ns", Generation: 3}}
	for i := range n {
		c.Spec.ColonyClusters = append(c.Spec.ColonyClusters, infrav1.ColonyCluster{ClusterName: fmt.Sprintf("c%d", i),
			ClusterDeploymentSpec: apiextensionsv1.JSON{Raw: []byte(`{"template":"t"}`)}})
	}
	return c
}

func TestComputeStatus(t *testing.T) {
	ready := func(name string) *entryState {
		return &entryState{clusterName: name, cdName: "col-" + name, exists: true, phase: clusterReady}
	}
	cases := []struct {
		name    string
		colony  *infrav1.Colony
		obs     observation
		phase   infrav1.ColonyPhase
		reason  string
		status  metav1.ConditionStatus
		ready   int32
		message []string
	}{
		{name: "no clusters", colony: colonyWith(0), phase: infrav1.ColonyPhaseReady, reason: infrav1.ColonyReasonNoClusters, status: metav1.ConditionTrue},
		{name: "all ready", colony: colonyWith(2), obs: observation{
			entries:    []*entryState{ready("c0"), ready("c1")},
			kubeconfig: kubeconfigResult{secretName: "col-kubeconfig", included: map[string]bool{"c0": true, "c1": true}},
		}, phase: infrav1.ColonyPhaseReady, reason: infrav1.ColonyReasonAllClustersReady, status: metav1.ConditionTrue, ready: 2,
			message: []string{"2/2 clusters ready"}},
		{name: "ready but kubeconfig unusable", colony: colonyWith(2), obs: observation{
			entries: []*entryState{ready("c0"), ready("c1")},
			kubeconfig: kubeconfigResult{secretName: "col-kubeconfig", included: map[string]bool{"c0": true},
				problems: map[string]string{"c1": "kubeconfig Secret col-c1-kubeconfig: its kubeconfig does not parse"}},
		}, phase: infrav1.ColonyPhaseProvisioning, reason: infrav1.ColonyReasonClustersNotReady, status: metav1.ConditionFalse, ready: 1,
			message: []string{"1/2 clusters ready", "c1 (ClusterDeployment col-c1): kubeconfig Secret col-c1-kubeconfig: its kubeconfig does not parse"}},
		{name: "failed wins over provisioning", colony: colonyWith(2), obs: observation{
			entries: []*entryState{
				{clusterName: "c0", cdName: "col-c0", exists: true, phase: clusterFailed, message: "Ready=False (Failed): x"},
				{clusterName: "c1", cdName: "col-c1", exists: true, phase: clusterProvisioning, message: "no Ready condition yet"},
			},
		}, phase: infrav1.ColonyPhaseDegraded, reason: infrav1.ColonyReasonClusterFailed, status: metav1.ConditionFalse,
			message: []string{"failed: c0 (ClusterDeployment col-c0): Ready=False (Failed): x", "c1 (ClusterDeployment col-c1): no Ready condition yet"}},
		{name: "invalid wins", colony: colonyWith(2), obs: observation{
			entries: []*entryState{
				{clusterName: "c0", cdName: "col-c0", invalid: "spec.colonyClusters[clusterName=c0].clusterDeploymentSpec: must be a JSON object"},
				{clusterName: "c1", cdName: "col-c1", exists: true, phase: clusterFailed, message: "boom"},
			},
		}, phase: infrav1.ColonyPhaseDegraded, reason: infrav1.ColonyReasonInvalidEntry, status: metav1.ConditionFalse,
			message: []string{"invalid entries: spec.colonyClusters[clusterName=c0]", "failed: c1"}},
		{name: "invalid edit of a ready cluster keeps it in the kubeconfig", colony: colonyWith(1), obs: observation{
			entries:    []*entryState{{clusterName: "c0", cdName: "col-c0", exists: true, phase: clusterReady, invalid: "bad"}},
			kubeconfig: kubeconfigResult{secretName: "col-kubeconfig", included: map[string]bool{"c0": true}},
		}, phase: infrav1.ColonyPhaseDegraded, reason: infrav1.ColonyReasonInvalidEntry, status: metav1.ConditionFalse, ready: 1},
		{name: "transient apply error", colony: colonyWith(1), obs: observation{
			entries: []*entryState{{clusterName: "c0", cdName: "col-c0", applyError: "connection refused", phase: clusterProvisioning}},
		}, phase: infrav1.ColonyPhaseProvisioning, reason: infrav1.ColonyReasonClustersNotReady, status: metav1.ConditionFalse,
			message: []string{"c0 (ClusterDeployment col-c0): connection refused"}},
		{name: "removed entry still deleting", colony: colonyWith(0), obs: observation{removing: []string{"col-old"}},
			phase: infrav1.ColonyPhaseReady, reason: infrav1.ColonyReasonNoClusters, status: metav1.ConditionTrue},
		{name: "deleting", colony: colonyWith(1), obs: observation{deleting: true,
			remaining: []remainingClusterDeployment{{name: "col-c0", finalizers: []string{"f"}}}},
			phase: infrav1.ColonyPhaseDeleting, reason: infrav1.ColonyReasonDeleting, status: metav1.ConditionFalse,
			message: []string{"waiting for ClusterDeployments to be deleted: col-c0 (finalizers: f)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := computeStatus(tc.colony, &tc.obs)
			if st.Phase != tc.phase || st.ReadyClusters != tc.ready || st.ObservedGeneration != 3 {
				t.Errorf("phase %s ready %d gen %d, want %s %d 3", st.Phase, st.ReadyClusters, st.ObservedGeneration, tc.phase, tc.ready)
			}
			c := condOf(&infrav1.Colony{Status: st}, infrav1.ColonyClustersReadyCondition)
			if c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 3 {
				t.Errorf("ClustersReady %s/%s gen %d, want %s/%s", c.Status, c.Reason, c.ObservedGeneration, tc.status, tc.reason)
			}
			for _, m := range tc.message {
				if !strings.Contains(c.Message, m) {
					t.Errorf("message %q lacks %q", c.Message, m)
				}
			}
			r := condOf(&infrav1.Colony{Status: st}, infrav1.ColonyReadyCondition)
			if r.Status != tc.status || r.Reason != tc.reason || r.ObservedGeneration != 3 {
				t.Errorf("Ready %s/%s gen %d", r.Status, r.Reason, r.ObservedGeneration)
			}
			// Reconciling while Provisioning or Deleting, Stalled while Degraded, each repeating Ready.
			want := map[string]bool{
				infrav1.ColonyReconcilingCondition: tc.phase == infrav1.ColonyPhaseProvisioning || tc.phase == infrav1.ColonyPhaseDeleting,
				infrav1.ColonyStalledCondition:     tc.phase == infrav1.ColonyPhaseDegraded,
			}
			for typ, on := range want {
				k := meta.FindStatusCondition(st.Conditions, typ)
				switch {
				case !on && k != nil:
					t.Errorf("%s present in phase %s: %+v", typ, st.Phase, *k)
				case on && k == nil:
					t.Errorf("%s missing in phase %s", typ, st.Phase)
				case on && (k.Status != metav1.ConditionTrue || k.Reason != r.Reason || k.Message != r.Message || k.ObservedGeneration != 3):
					t.Errorf("%s = %+v, want True repeating Ready %s: %s", typ, *k, r.Reason, r.Message)
				}
			}
		})
	}
}

// TestComputeStatusDropsKstatusConditions: a Colony that was Provisioning and is now Ready loses
// Reconciling; one that was Degraded and heals loses Stalled.
func TestComputeStatusDropsKstatusConditions(t *testing.T) {
	colony := colonyWith(1)
	notReady := observation{entries: []*entryState{{clusterName: "c0", cdName: "col-c0", exists: true, phase: clusterProvisioning, message: "m"}}}
	colony.Status = computeStatus(colony, &notReady)
	if meta.FindStatusCondition(colony.Status.Conditions, infrav1.ColonyReconcilingCondition) == nil {
		t.Fatal("a provisioning Colony has no Reconciling")
	}
	failed := observation{entries: []*entryState{{clusterName: "c0", cdName: "col-c0", exists: true, phase: clusterFailed, message: "m"}}}
	colony.Status = computeStatus(colony, &failed)
	if meta.FindStatusCondition(colony.Status.Conditions, infrav1.ColonyReconcilingCondition) != nil ||
		meta.FindStatusCondition(colony.Status.Conditions, infrav1.ColonyStalledCondition) == nil {
		t.Fatalf("a degraded Colony: %+v", colony.Status.Conditions)
	}
	healed := observation{
		entries:    []*entryState{{clusterName: "c0", cdName: "col-c0", exists: true, phase: clusterReady}},
		kubeconfig: kubeconfigResult{secretName: "col-kubeconfig", included: map[string]bool{"c0": true}},
	}
	prev := colony.Status
	colony.Status = computeStatus(colony, &healed)
	if colony.Status.Phase != infrav1.ColonyPhaseReady || len(colony.Status.Conditions) != 2 {
		t.Fatalf("a ready Colony: phase %s, conditions %+v", colony.Status.Phase, colony.Status.Conditions)
	}
	if ownedStatusEqual(prev, colony.Status) {
		t.Error("dropping Stalled is not seen as a change")
	}
}

func TestComputeStatusKeepsTransitionTimes(t *testing.T) {
	colony := colonyWith(0)
	first := computeStatus(colony, &observation{})
	old := metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	for i := range first.Conditions {
		first.Conditions[i].LastTransitionTime = old
	}
	colony.Status = first
	second := computeStatus(colony, &observation{})
	for _, c := range second.Conditions {
		if !c.LastTransitionTime.Equal(&old) {
			t.Errorf("%s lastTransitionTime moved without a transition", c.Type)
		}
	}
	if !ownedStatusEqual(first, second) {
		t.Error("same input, different status")
	}
	// gpuInventory is not the colony-controller's: it never makes the status differ.
	colony.Status.GPUInventory = map[string]infrav1.ClusterGPUInventory{"x": {Reachable: true}}
	if !ownedStatusEqual(colony.Status, second) {
		t.Error("gpuInventory counted as an owned field")
	}
}

func TestStatusObjectCarriesOnlyOwnedFields(t *testing.T) {
	colony := colonyWith(1)
	colony.Status.GPUInventory = map[string]infrav1.ClusterGPUInventory{"x": {Reachable: true}}
	colony.ResourceVersion = "5"
	st := computeStatus(colony, &observation{entries: []*entryState{{clusterName: "c0", cdName: "col-c0"}}})
	st.GPUInventory = colony.Status.GPUInventory
	obj := statusObject(colony, st)
	if obj.Status.GPUInventory != nil {
		t.Error("gpuInventory sent")
	}
	if len(obj.Spec.ColonyClusters) != 0 || obj.ResourceVersion != "" || obj.Name != colony.Name || obj.Namespace != colony.Namespace {
		t.Errorf("status object carries more than identity and status: %+v", obj.ObjectMeta)
	}
	if colony.Status.GPUInventory == nil {
		t.Error("statusObject changed the Colony it was given")
	}
}

// TestZeroCountsStored: a Colony with no ready cluster stores readyClusters: 0, not nothing.
func TestZeroCountsStored(t *testing.T) {
	ns := newNamespace(t)
	createColony(t, ns, "col", entry(t, "a", nil))
	r := newReconciler(mgmt.Client, mgmt.Client, nil)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "col"}}
	for range 2 {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(infrav1.GroupVersion.WithKind("Colony"))
	if err := mgmt.Client.Get(context.Background(), req.NamespacedName, u); err != nil {
		t.Fatal(err)
	}
	ready, found, _ := unstructured.NestedInt64(u.Object, "status", "readyClusters")
	total, _, _ := unstructured.NestedInt64(u.Object, "status", "totalClusters")
	if !found || ready != 0 || total != 1 {
		t.Errorf("readyClusters %d (stored %v), totalClusters %d", ready, found, total)
	}
}

// captureRecorder keeps the events a reconcile records.
type captureRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *captureRecorder) Eventf(_ runtime.Object, _ runtime.Object, eventtype, reason, action, _ string, _ ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventtype+"/"+reason+"/"+action)
}

// TestStatusWrittenOnlyWhenChanged: a second pass that finds nothing new writes nothing and records
// no event.
func TestStatusWrittenOnlyWhenChanged(t *testing.T) {
	ns := newNamespace(t)
	createColony(t, ns, "col", entry(t, "a", nil))
	rec := &captureRecorder{}
	r := newReconciler(mgmt.Client, mgmt.Client, rec)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "col"}}
	for range 2 { // the first pass adds the finalizer and the ClusterDeployment, the second sees it
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	before := getColony(t, ns, "col")
	if before.Status.Phase != infrav1.ColonyPhaseProvisioning || len(rec.events) == 0 {
		t.Fatalf("first passes: phase %q, events %v", before.Status.Phase, rec.events)
	}
	seen := len(rec.events)
	for range 3 {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	after := getColony(t, ns, "col")
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("a pass with nothing new wrote the Colony: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
	}
	if len(rec.events) != seen {
		t.Errorf("a pass with nothing new recorded events: %v", rec.events[seen:])
	}
	// A real change is written and recorded.
	setCDConditions(t, ns, "col-a", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionFalse, k0rdentv1beta1.FailedReason))
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if c := getColony(t, ns, "col"); c.Status.Phase != infrav1.ColonyPhaseDegraded || len(rec.events) == seen {
		t.Errorf("failure not written: phase %q, events %v", c.Status.Phase, rec.events)
	}
}

// TestGPUInventoryLeftAlone: gpuInventory written by the inventory-collector's field manager
// survives every status write of the colony-controller.
func TestGPUInventoryLeftAlone(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns)
	createColony(t, ns, "col", entry(t, "a", nil))
	waitColony(t, ns, "col", "first status", phaseIs(infrav1.ColonyPhaseProvisioning))

	inv := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
		"gpuInventory": map[string]any{"col-a": map[string]any{
			"reachable": true, "lastUpdated": "2026-01-01T00:00:00Z",
			"offerings": []any{map[string]any{"vendor": "NVIDIA", "resourceName": "nvidia.com/gpu", "model": "H100",
				"total": int64(8), "allocated": int64(2), "nodes": int64(1)}},
		}},
	}}}
	inv.SetGroupVersionKind(infrav1.GroupVersion.WithKind("Colony"))
	inv.SetNamespace(ns)
	inv.SetName("col")
	if err := mgmt.Client.Status().Apply(context.Background(), client.ApplyConfigurationFromUnstructured(inv),
		client.FieldOwner("inventory-collector")); err != nil {
		t.Fatalf("inventory-collector apply: %v", err)
	}

	// Make the colony-controller write status several times: a new entry, then readiness.
	updateColony(t, ns, "col", func(c *infrav1.Colony) {
		c.Spec.ColonyClusters = append(c.Spec.ColonyClusters, entry(t, "b", nil))
	})
	waitColony(t, ns, "col", "second entry counted", func(c *infrav1.Colony) error {
		if c.Status.TotalClusters != 2 || c.Status.ObservedGeneration != c.Generation {
			return fmt.Errorf("status %+v", c.Status)
		}
		return nil
	})
	setCDConditions(t, ns, "col-a", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionFalse, k0rdentv1beta1.FailedReason))
	c := waitColony(t, ns, "col", "Degraded", phaseIs(infrav1.ColonyPhaseDegraded))

	got, ok := c.Status.GPUInventory["col-a"]
	if !ok || !got.Reachable || len(got.Offerings) != 1 || got.Offerings[0].Total != 8 || got.Offerings[0].Model != "H100" {
		t.Fatalf("gpuInventory changed: %+v", c.Status.GPUInventory)
	}
	for _, m := range c.ManagedFields {
		if m.Subresource != "status" || m.FieldsV1 == nil {
			continue
		}
		owns := strings.Contains(m.FieldsV1.GetRawString(), "gpuInventory")
		switch m.Manager {
		case "inventory-collector":
			if !owns {
				t.Errorf("inventory-collector lost gpuInventory: %s", m.FieldsV1.GetRawString())
			}
		case FieldManager:
			if owns {
				t.Errorf("colony-controller owns gpuInventory: %s", m.FieldsV1.GetRawString())
			}
		}
	}
}
