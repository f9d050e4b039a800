package gate

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
)

func cand(name string, outcome gpu.Outcome, free int64) candidate {
	return candidate{key: types.NamespacedName{Namespace: "ns", Name: name}, decision: gpu.Decision{Outcome: outcome, FreeGPUs: free}}
}

func TestChoosePlacement(t *testing.T) {
	cases := []struct {
		name   string
		cands  []candidate
		need   int64
		want   string
		reason string
	}{
		{"none", []candidate{cand("a", gpu.Wait, 1), cand("b", gpu.Unavailable, 0)}, 2, "", ""},
		{"only fit", []candidate{cand("a", gpu.Wait, 1), cand("b", gpu.Admit, 4)}, 2, "b", workspacesv1.PlacementOnlyFit},
		{"tightest", []candidate{cand("a", gpu.Admit, 8), cand("b", gpu.Admit, 3), cand("c", gpu.Admit, 5)}, 2, "b", workspacesv1.PlacementTightestFit},
		{"tie by name", []candidate{cand("c", gpu.Admit, 3), cand("b", gpu.Admit, 3)}, 1, "b", workspacesv1.PlacementTightestFit},
		{"no GPUs: by name", []candidate{cand("z", gpu.Admit, 0), cand("m", gpu.Admit, 0)}, 0, "m", workspacesv1.PlacementTightestFit},
		{"unreachable skipped", []candidate{{key: types.NamespacedName{Name: "a"}, unreachable: "down", decision: gpu.Decision{Outcome: gpu.Admit}}, cand("b", gpu.Admit, 9)}, 1, "b", workspacesv1.PlacementOnlyFit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i, reason := choosePlacement(tc.cands, tc.need)
			got := ""
			if i >= 0 {
				got = tc.cands[i].key.Name
			}
			if got != tc.want || reason != tc.reason {
				t.Errorf("choosePlacement = %q (%s), want %q (%s)", got, reason, tc.want, tc.reason)
			}
		})
	}
}

func TestCouldFitLater(t *testing.T) {
	if couldFitLater([]candidate{cand("a", gpu.Unavailable, 0)}) {
		t.Error("an Unavailable cluster could fit later")
	}
	if !couldFitLater([]candidate{cand("a", gpu.Unavailable, 0), cand("b", gpu.Wait, 0)}) {
		t.Error("a waiting cluster could not fit later")
	}
	if !couldFitLater([]candidate{{unreachable: "down"}}) {
		t.Error("an unreachable cluster could not fit later")
	}
}

func TestLargestOffering(t *testing.T) {
	node := func(name string, n int64, model string) corev1.Node {
		return corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{gpu.LabelGPUModel: model}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{gpu.ResourceNVIDIA: *resource.NewQuantity(n, resource.DecimalSI)},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
	}
	cands := []candidate{
		{key: types.NamespacedName{Namespace: "ns", Name: "a"}, nodes: []corev1.Node{node("n1", 4, "l4")}},
		{key: types.NamespacedName{Namespace: "ns", Name: "b"}, nodes: []corev1.Node{node("n2", 8, "h100"), node("n3", 2, "t4")}},
	}
	got := largestOffering(cands, workspacesv1.GPUVendorNVIDIA)
	if want := "the largest offering is 8 nvidia.com/gpu (h100) on node n2 of ClusterDeployment ns/b"; got != want {
		t.Errorf("largestOffering = %q, want %q", got, want)
	}
	if got := largestOffering(cands, workspacesv1.GPUVendorAMD); !strings.Contains(got, "no candidate cluster") {
		t.Errorf("largestOffering(AMD) = %q", got)
	}
}

func quota(name string, workspaces *int32, gpus ...workspacesv1.GPUQuota) workspacesv1.WorkspaceQuota {
	return workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: workspacesv1.WorkspaceQuotaSpec{GPUs: gpus, Workspaces: workspaces}}
}

func TestQuotaViolation(t *testing.T) {
	nv := workspacesv1.GPUVendorNVIDIA
	held := []quotaCharge{{vendor: nv, model: "h100", gpus: 2}, {vendor: nv, model: "a10", gpus: 1}, {}}
	cases := []struct {
		name   string
		quotas []workspacesv1.WorkspaceQuota
		req    quotaCharge
		want   string
	}{
		{"no quota", nil, quotaCharge{vendor: nv, gpus: 100}, ""},
		{"vendor room", []workspacesv1.WorkspaceQuota{quota("q", nil, workspacesv1.GPUQuota{Vendor: nv, Limit: 4})}, quotaCharge{vendor: nv, gpus: 1}, ""},
		{"vendor over", []workspacesv1.WorkspaceQuota{quota("q", nil, workspacesv1.GPUQuota{Vendor: nv, Limit: 4})}, quotaCharge{vendor: nv, gpus: 2},
			"WorkspaceQuota q: 3 of 4 NVIDIA GPUs are used and the workspace asks for 2 (spec.gpus[0])"},
		{"other vendor free", []workspacesv1.WorkspaceQuota{quota("q", nil, workspacesv1.GPUQuota{Vendor: nv, Limit: 0})}, quotaCharge{vendor: workspacesv1.GPUVendorAMD, gpus: 8}, ""},
		{"model over", []workspacesv1.WorkspaceQuota{quota("q", nil, workspacesv1.GPUQuota{Vendor: nv, Model: "h100", Limit: 3})}, quotaCharge{vendor: nv, model: "h100", gpus: 2},
			"WorkspaceQuota q: 2 of 3 NVIDIA h100 GPUs are used and the workspace asks for 2 (spec.gpus[0])"},
		{"other model free", []workspacesv1.WorkspaceQuota{quota("q", nil, workspacesv1.GPUQuota{Vendor: nv, Model: "h100", Limit: 2})}, quotaCharge{vendor: nv, model: "a10", gpus: 5}, ""},
		{"workspaces over", []workspacesv1.WorkspaceQuota{quota("q", ptr(int32(3)))}, quotaCharge{},
			"WorkspaceQuota q: 3 of 3 workspaces are used; one more would exceed spec.workspaces"},
		{"second quota", []workspacesv1.WorkspaceQuota{quota("a", ptr(int32(9))), quota("b", ptr(int32(3)))}, quotaCharge{}, "WorkspaceQuota b: 3 of 3 workspaces are used; one more would exceed spec.workspaces"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := quotaViolation(tc.quotas, held, tc.req); got != tc.want {
				t.Errorf("quotaViolation = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestQuotaSummary(t *testing.T) {
	q := quota("q", ptr(int32(5)), workspacesv1.GPUQuota{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: 4},
		workspacesv1.GPUQuota{Vendor: workspacesv1.GPUVendorNVIDIA, Model: "h100", Limit: 2})
	use, n := quotaUse(&q, []quotaCharge{{vendor: workspacesv1.GPUVendorNVIDIA, model: "h100", gpus: 2}, {vendor: workspacesv1.GPUVendorNVIDIA, gpus: 1}})
	if got, want := quotaSummary(&q, use, n), "NVIDIA 3/4, NVIDIA h100 2/2, workspaces 2/5"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

func TestPriorityQueueOrder(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(1000, 0))
	t1 := metav1.NewTime(time.Unix(2000, 0))
	ws := func(ns, n string, prio int32, created metav1.Time) *workspacesv1.WorkspaceDeployment {
		return &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n, CreationTimestamp: created},
			Spec: workspacesv1.WorkspaceDeploymentSpec{Priority: prio}}
	}
	caps := capsOf([]workspacesv1.WorkspaceQuota{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "gold", Name: "a"}, Spec: workspacesv1.WorkspaceQuotaSpec{MaxPriority: ptr(int32(100))}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "gold", Name: "b"}, Spec: workspacesv1.WorkspaceQuotaSpec{MaxPriority: ptr(int32(10))}},
	})
	if !caps.ahead(ws("gold", "young", 10, t1), ws("gold", "old", 0, t0)) {
		t.Error("higher priority is not ahead of older")
	}
	if !caps.ahead(ws("gold", "old", 5, t0), ws("gold", "young", 5, t1)) {
		t.Error("same priority: older is not ahead")
	}
	// gold is capped at 10, the lowest of its quotas: 50 counts as 10, ties with 10, age decides.
	if caps.ahead(ws("gold", "young", 50, t1), ws("gold", "old", 10, t0)) {
		t.Error("the cap of the namespace is not applied")
	}
	// A namespace without a quota is capped at 0.
	if caps.ahead(ws("free", "young", 7, t1), ws("gold", "old", 0, t0)) {
		t.Error("a namespace without a quota outranks others")
	}
	if got := caps.effective(ws("free", "low", -3, t0)); got != -3 {
		t.Errorf("negative priority %d, want -3", got)
	}
	if got := workspacesv1.MaxPriority(nil); got != 0 {
		t.Errorf("MaxPriority(nil) = %d, want 0", got)
	}
}

func TestAdmittedModel(t *testing.T) {
	nodes := []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{gpu.LabelGPUModel: "h100"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{gpu.LabelGPUModel: "h100"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{gpu.LabelGPUModel: "a10"}}},
	}
	if got := admittedModel(gpu.Decision{Placement: []gpu.NodeReplicas{{Node: "a"}, {Node: "b"}}}, nodes); got != "h100" {
		t.Errorf("shared model %q", got)
	}
	if got := admittedModel(gpu.Decision{Placement: []gpu.NodeReplicas{{Node: "a"}, {Node: "c"}}}, nodes); got != "" {
		t.Errorf("mixed models %q, want none", got)
	}
	if got := admittedModel(gpu.Decision{Selector: map[string]string{gpu.LabelGPUModel: "l4"}}, nodes); got != "l4" {
		t.Errorf("selector model %q", got)
	}
}
func ptr[T any](v T) *T { return &v }

// TestHeldBackNodesWait: a cluster whose matching nodes all cannot take pods now (a drain cordoned
// them, a kubelet restart made them NotReady or dropped their GPUs to zero, a new cluster's device
// plugin has not advertised them yet) makes Admit wait and Place wait unplaced (NoClusterFitsNow),
// never fail (Unavailable, NoClusterCanFit); only a cluster with no such node fails.
func TestHeldBackNodesWait(t *testing.T) {
	h100 := map[string]string{gpu.LabelGPUModel: "H100"}
	gpus := func(n int64) corev1.ResourceList {
		return corev1.ResourceList{gpu.ResourceNVIDIA: *resource.NewQuantity(n, resource.DecimalSI)}
	}
	node := func(name string, alloc corev1.ResourceList, unschedulable bool, ready corev1.ConditionStatus) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: h100}, Spec: corev1.NodeSpec{Unschedulable: unschedulable},
			Status: corev1.NodeStatus{Allocatable: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	}
	req := gpu.Request{GPUType: "H100", GPUsPerReplica: 8, Replicas: 1}
	cases := []struct {
		name  string
		nodes []corev1.Node
		want  Outcome
	}{
		{"cordoned", []corev1.Node{node("a", gpus(8), true, corev1.ConditionTrue), node("b", gpus(8), true, corev1.ConditionTrue)}, Waiting},
		{"NotReady", []corev1.Node{node("a", gpus(8), false, corev1.ConditionUnknown)}, Waiting},
		{"zero allocatable", []corev1.Node{node("a", gpus(0), false, corev1.ConditionTrue)}, Waiting},
		{"not advertised", []corev1.Node{node("a", corev1.ResourceList{}, false, corev1.ConditionTrue)}, Waiting},
		{"no matching node", nil, Unavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gd := gpu.Gate(req, tc.nodes, nil, nil)
			if got := outcomeOf(gd); got != tc.want {
				t.Fatalf("Admit's outcome %s, want %s: %s", got, tc.want, gd.Message)
			}
			c := candidate{key: types.NamespacedName{Namespace: "ns", Name: "c"}, nodes: tc.nodes, decision: gd}
			if i, _ := choosePlacement([]candidate{c}, 8); i >= 0 {
				t.Fatalf("placed on a cluster whose nodes cannot take pods")
			}
			if later := couldFitLater([]candidate{c}); later != (tc.want == Waiting) {
				t.Fatalf("couldFitLater = %v: Place would say %s", later, map[bool]Outcome{true: NoFitNow, false: NoFitEver}[later])
			}
		})
	}
}
