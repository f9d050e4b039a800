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

// ch is a charge of gpus GPUs of one vendor and model.
func ch(vendor workspacesv1.GPUVendor, model string, gpus int64) quotaCharge {
	c := quotaCharge{vendor: vendor}
	c.add(model, gpus)
	return c
}

// TestChargeOf: an admission counts the GPUs on each node by the node's model, so that a per-model
// quota counts an admission spread over two models, and one on nodes known only by their vendor's
// product label; an admission recorded before nodes carried a model counts its own.
func TestChargeOf(t *testing.T) {
	nv := workspacesv1.GPUVendorNVIDIA
	h100 := workspacesv1.GPUQuota{Vendor: nv, Model: "h100", Limit: 8}
	a10 := workspacesv1.GPUQuota{Vendor: nv, Model: "a10", Limit: 8}
	all := workspacesv1.GPUQuota{Vendor: nv, Limit: 8}
	spread := &workspacesv1.Admission{GPUVendor: nv, GPUsPerReplica: 2, GPUs: 6, Nodes: []workspacesv1.AdmittedNode{
		{Name: "n1", Replicas: 2, GPUModel: "h100"}, {Name: "n2", Replicas: 1, GPUModel: "a10"}}}
	c := chargeOf("team/spread", spread)
	if got := [3]int64{counted(h100, c), counted(a10, c), counted(all, c)}; got != [3]int64{4, 2, 6} {
		t.Errorf("spread over two models: h100, a10, all = %v, want [4 2 6]", got)
	}
	old := &workspacesv1.Admission{GPUVendor: nv, GPUModel: "h100", GPUsPerReplica: 1, GPUs: 2, Nodes: []workspacesv1.AdmittedNode{
		{Name: "n1", Replicas: 2}}}
	if got := counted(h100, chargeOf("team/old", old)); got != 2 {
		t.Errorf("an admission without node models counts its own model: %d, want 2", got)
	}
	legacy := &workspacesv1.Admission{GPUVendor: nv, GPUModel: "a10", GPUs: 3}
	if got := counted(a10, chargeOf("team/legacy", legacy)); got != 3 {
		t.Errorf("an admission without nodes counts its GPUs: %d, want 3", got)
	}
	if got := counted(workspacesv1.GPUQuota{Vendor: workspacesv1.GPUVendorAMD, Limit: 8}, c); got != 0 {
		t.Errorf("another vendor's quota counts %d", got)
	}
	// A request spread over two models is refused by the model it would take over the limit.
	held := []quotaCharge{ch(nv, "a10", 7)}
	want := "WorkspaceQuota q: 7 of 8 NVIDIA a10 GPUs are used and the workspace asks for 2 (spec.gpus[1])"
	if got, _, _ := quotaViolation(quotaScope{quotas: []workspacesv1.WorkspaceQuota{quota("q", nil, h100, a10)}}, held, c, ""); got != want {
		t.Errorf("quotaViolation = %q, want %q", got, want)
	}
}

// TestNewAdmissionRecordsNodeModels: each admitted node carries its model, from the canonical label
// or the vendor's product label.
func TestNewAdmissionRecordsNodeModels(t *testing.T) {
	node := func(name string, labels map[string]string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	nodes := []corev1.Node{node("n1", map[string]string{gpu.LabelGPUModel: "h100"}), node("n2", map[string]string{gpu.LabelNVIDIAProduct: "NVIDIA-A10"})}
	one := int32(1)
	res := &workspacesv1.ResolvedResources{Replicas: 2, GPUResourceName: string(gpu.ResourceNVIDIA),
		PerReplica: workspacesv1.PerReplicaResources{GPUVendor: workspacesv1.GPUVendorNVIDIA, GPUCount: &one}}
	ad := newAdmission("team/cd", res, gpu.Decision{Placement: []gpu.NodeReplicas{{Node: "n1", Replicas: 1}, {Node: "n2", Replicas: 1}}}, nodes, time.Now())
	if len(ad.Nodes) != 2 || ad.Nodes[0].GPUModel != "h100" || ad.Nodes[1].GPUModel != "NVIDIA-A10" || ad.GPUModel != "" {
		t.Fatalf("admission %+v: want nodes h100 and NVIDIA-A10, no common model", ad)
	}
	ad = newAdmission("team/cd", res, gpu.Decision{Placement: []gpu.NodeReplicas{{Node: "n2", Replicas: 2}}}, nodes, time.Now())
	if ad.GPUModel != "NVIDIA-A10" {
		t.Fatalf("admission on one node: model %q, want NVIDIA-A10", ad.GPUModel)
	}
}

func TestQuotaViolation(t *testing.T) {
	nv := workspacesv1.GPUVendorNVIDIA
	held := []quotaCharge{ch(nv, "h100", 2), ch(nv, "a10", 1), {}}
	cases := []struct {
		name   string
		quotas []workspacesv1.WorkspaceQuota
		req    quotaCharge
		want   string
	}{
		{"no quota", nil, ch(nv, "", 100), ""},
		{"vendor room", []workspacesv1.WorkspaceQuota{quota("q", nil, workspacesv1.GPUQuota{Vendor: nv, Limit: 4})}, ch(nv, "", 1), ""},
		{"vendor over", []workspacesv1.WorkspaceQuota{quota("q", nil, workspacesv1.GPUQuota{Vendor: nv, Limit: 4})}, ch(nv, "", 2),
			"WorkspaceQuota q: 3 of 4 NVIDIA GPUs are used and the workspace asks for 2 (spec.gpus[0])"},
		{"other vendor free", []workspacesv1.WorkspaceQuota{quota("q", nil, workspacesv1.GPUQuota{Vendor: nv, Limit: 0})}, ch(workspacesv1.GPUVendorAMD, "", 8), ""},
		{"model over", []workspacesv1.WorkspaceQuota{quota("q", nil, workspacesv1.GPUQuota{Vendor: nv, Model: "h100", Limit: 3})}, ch(nv, "h100", 2),
			"WorkspaceQuota q: 2 of 3 NVIDIA h100 GPUs are used and the workspace asks for 2 (spec.gpus[0])"},
		{"other model free", []workspacesv1.WorkspaceQuota{quota("q", nil, workspacesv1.GPUQuota{Vendor: nv, Model: "h100", Limit: 2})}, ch(nv, "a10", 5), ""},
		{"workspaces over", []workspacesv1.WorkspaceQuota{quota("q", ptr(int32(3)))}, quotaCharge{},
			"WorkspaceQuota q: 3 of 3 workspaces are used; one more would exceed spec.workspaces"},
		{"second quota", []workspacesv1.WorkspaceQuota{quota("a", ptr(int32(9))), quota("b", ptr(int32(3)))}, quotaCharge{}, "WorkspaceQuota b: 3 of 3 workspaces are used; one more would exceed spec.workspaces"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, _, _ := quotaViolation(quotaScope{quotas: tc.quotas}, held, tc.req, ""); got != tc.want {
				t.Errorf("quotaViolation = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestQuotaSummary(t *testing.T) {
	q := quota("q", ptr(int32(5)), workspacesv1.GPUQuota{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: 4},
		workspacesv1.GPUQuota{Vendor: workspacesv1.GPUVendorNVIDIA, Model: "h100", Limit: 2})
	use, n := quotaUse(&q, []quotaCharge{ch(workspacesv1.GPUVendorNVIDIA, "h100", 2), ch(workspacesv1.GPUVendorNVIDIA, "", 1)})
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
	an := func(models ...string) []workspacesv1.AdmittedNode {
		out := make([]workspacesv1.AdmittedNode, 0, len(models))
		for _, m := range models {
			out = append(out, workspacesv1.AdmittedNode{GPUModel: m})
		}
		return out
	}
	if got := admittedModel(gpu.Decision{}, an("h100", "h100")); got != "h100" {
		t.Errorf("shared model %q", got)
	}
	if got := admittedModel(gpu.Decision{}, an("h100", "a10")); got != "" {
		t.Errorf("mixed models %q, want none", got)
	}
	if got := admittedModel(gpu.Decision{Selector: map[string]string{gpu.LabelGPUModel: "l4"}}, an("h100")); got != "l4" {
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
