package gpu

import (
	"math"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

func a100Nodes(n int, free int64) []corev1.Node {
	var out []corev1.Node
	for i := range n {
		out = append(out, node(string(rune('a'+i)), gpus(ResourceNVIDIA, free), labels(LabelGPUModel, "A100")))
	}
	return out
}

func TestGateReplicaMustFitOnOneNode(t *testing.T) {
	// Two nodes of 8 with 4 taken on each: 8 free in total, but a replica of 6 needs one node.
	nodes := a100Nodes(2, 8)
	pods := []corev1.Pod{
		pod("p1", "a", container(corev1.ResourceList{ResourceNVIDIA: resource.MustParse("4")})),
		pod("p2", "b", container(corev1.ResourceList{ResourceNVIDIA: resource.MustParse("4")})),
	}
	d := Gate(Request{GPUType: "A100", GPUsPerReplica: 6, Replicas: 1}, nodes, pods, nil)
	if d.Outcome != Wait || d.Reason != ReasonWaitingForGpuCapacity || d.FreeGPUs != 8 || d.FittingReplicas != 0 || d.MatchingNodes != 2 {
		t.Fatalf("6 GPUs on 2x4 must wait although 8 are free in total: %+v", d)
	}
	if !strings.Contains(d.Message, "largest 4") || !strings.Contains(d.Message, "8 free") {
		t.Fatalf("message lacks the numbers: %q", d.Message)
	}
}

func TestGateAdmitsAndPacksReplicas(t *testing.T) {
	// 2 nodes x 4 free: replicas of 3 fit once per node, so 2 fit and 3 wait.
	d := Gate(Request{GPUType: "A100", GPUsPerReplica: 3, Replicas: 2}, a100Nodes(2, 4), nil, nil)
	if d.Outcome != Admit || d.Reason != ReasonFeasible || d.FittingReplicas != 2 || !d.Feasible() {
		t.Fatalf("want admit with 2 fitting: %+v", d)
	}
	d = Gate(Request{GPUType: "A100", GPUsPerReplica: 3, Replicas: 3}, a100Nodes(2, 4), nil, nil)
	if d.Outcome != Wait || d.FittingReplicas != 2 {
		t.Fatalf("want wait with 2 fitting: %+v", d)
	}
}

func TestGateUnavailable(t *testing.T) {
	nodes := []corev1.Node{
		node("other", gpus(ResourceNVIDIA, 8), labels(LabelGPUModel, "A100")),
		node("cpu"),
		// AMD GPUs, cordoned or not advertised yet, never hold an NVIDIA request.
		node("amd-cordoned", gpus(ResourceAMD, 8), labels(LabelGPUModel, "H100"), cordoned),
		node("amd-starting", labels(LabelGPUModel, "H100", LabelAMDProductName, "AMD-Instinct-MI300X")),
	}
	d := Gate(Request{GPUType: "H100", GPUsPerReplica: 1, Replicas: 1}, nodes, nil, nil)
	if d.Outcome != Unavailable || d.Reason != ReasonGpuOfferingUnavailable || d.MatchingNodes != 0 {
		t.Fatalf("no node that could ever hold H100 exists: %+v", d)
	}
	if !strings.Contains(d.Message, "exalsius.ai/gpu-model=H100") {
		t.Fatalf("message must name the selector: %q", d.Message)
	}
	// A GPU request on a cluster of CPU nodes (empty selector) fails too.
	if d := Gate(Request{GPUsPerReplica: 1}, []corev1.Node{node("cpu")}, nil, nil); d.Outcome != Unavailable {
		t.Fatalf("CPU nodes only: %+v", d)
	}
}

// TestGateHeldBackNodesWait: matching nodes that cannot take pods now but may soon (cordoned by a
// drain, NotReady during a kubelet restart, a device plugin that has not advertised the GPUs yet)
// make the request wait, naming them, not fail; only nodes too small for a replica fail it.
func TestGateHeldBackNodesWait(t *testing.T) {
	h100 := labels(LabelGPUModel, "H100")
	cases := []struct {
		name     string
		nodes    []corev1.Node
		perRep   int64
		want     Outcome
		reason   string
		contains string
	}{
		{name: "every matching node cordoned", perRep: 8, want: Wait, reason: ReasonWaitingForGpuNodes,
			nodes:    []corev1.Node{node("n1", gpus(ResourceNVIDIA, 8), h100, cordoned), node("n2", gpus(ResourceNVIDIA, 8), h100, cordoned)},
			contains: "2 matching nodes are cordoned (n1, n2)"},
		{name: "NotReady", perRep: 4, want: Wait, reason: ReasonWaitingForGpuNodes,
			nodes:    []corev1.Node{node("n1", gpus(ResourceNVIDIA, 8), h100, notReady), node("n2", gpus(ResourceNVIDIA, 8), h100, noReadyCondition)},
			contains: "2 matching nodes are NotReady (n1, n2)"},
		{name: "labelled, GPUs not advertised yet", perRep: 8, want: Wait, reason: ReasonWaitingForGpuNodes,
			nodes:    []corev1.Node{node("new", h100)},
			contains: "1 matching node has not advertised its GPUs yet (new)"},
		{name: "vendor label only, GPUs not advertised yet", perRep: 1, want: Wait, reason: ReasonWaitingForGpuNodes,
			nodes:    []corev1.Node{node("new", labels(LabelNVIDIAProduct, "NVIDIA-H100"))},
			contains: "has not advertised"},
		{name: "kubelet restart: the resource at zero", perRep: 1, want: Wait, reason: ReasonWaitingForGpuNodes,
			nodes:    []corev1.Node{node("n1", gpus(ResourceNVIDIA, 0))},
			contains: "1 matching node has not advertised its GPUs yet (n1)"},
		{name: "schedulable node too small, a cordoned one large enough", perRep: 8, want: Wait, reason: ReasonWaitingForGpuNodes,
			nodes:    []corev1.Node{node("small", gpus(ResourceNVIDIA, 4), h100), node("big", gpus(ResourceNVIDIA, 8), h100, cordoned)},
			contains: "1 matching node is cordoned (big)"},
		{name: "cordoned nodes too small for a replica", perRep: 8, want: Unavailable, reason: ReasonGpuOfferingUnavailable,
			nodes:    []corev1.Node{node("n1", gpus(ResourceNVIDIA, 4), h100, cordoned)},
			contains: "1 matching node is cordoned (n1), but none has more than 4 in total"},
		{name: "schedulable and cordoned nodes too small", perRep: 8, want: Unavailable, reason: ReasonGpuRequestNeverFits,
			nodes: []corev1.Node{node("small", gpus(ResourceNVIDIA, 4), h100), node("n1", gpus(ResourceNVIDIA, 4), h100, cordoned)}},
		{name: "capacity wait names the cordoned nodes too", perRep: 8, want: Wait, reason: ReasonWaitingForGpuCapacity,
			nodes:    []corev1.Node{node("a", gpus(ResourceNVIDIA, 8), h100), node("b", gpus(ResourceNVIDIA, 8), h100, cordoned)},
			contains: "besides, 1 matching node is cordoned (b)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var pods []corev1.Pod
			if c.reason == ReasonWaitingForGpuCapacity {
				pods = []corev1.Pod{gpuPod("busy", "a", 1)}
			}
			sel := ""
			if c.nodes[0].Labels[LabelGPUModel] != "" {
				sel = "H100"
			}
			d := Gate(Request{GPUType: sel, GPUsPerReplica: c.perRep, Replicas: 1}, c.nodes, pods, nil)
			if d.Outcome != c.want || d.Reason != c.reason {
				t.Fatalf("got %s/%s, want %s/%s: %s", d.Outcome, d.Reason, c.want, c.reason, d.Message)
			}
			if !strings.Contains(d.Message, c.contains) {
				t.Fatalf("message %q lacks %q", d.Message, c.contains)
			}
		})
	}
}

func TestGateRawSelectorJoined(t *testing.T) {
	nodes := []corev1.Node{
		node("a", gpus(ResourceNVIDIA, 8), labels(LabelGPUModel, "A100", LabelNVIDIAProduct, "NVIDIA-A100-SXM4-40GB")),
		node("b", gpus(ResourceNVIDIA, 8), labels(LabelGPUModel, "A100", LabelNVIDIAProduct, "NVIDIA-A100-SXM4-80GB")),
	}
	req := Request{GPUType: "A100", NodeSelector: map[string]string{LabelNVIDIAProduct: "NVIDIA-A100-SXM4-80GB"}, GPUsPerReplica: 8, Replicas: 1}
	d := Gate(req, nodes, []corev1.Pod{gpuPod("busy", "b", 1)}, nil)
	if d.Outcome != Wait || d.MatchingNodes != 1 || d.FreeGPUs != 7 {
		t.Fatalf("only node b matches, and it has 7 free: %+v", d)
	}
	want := map[string]string{LabelGPUModel: "A100", LabelNVIDIAProduct: "NVIDIA-A100-SXM4-80GB"}
	if !reflect.DeepEqual(d.Selector, want) || !reflect.DeepEqual(Selector(req), want) {
		t.Fatalf("selector: got %v, want %v", d.Selector, want)
	}
	// A raw selector alone, without gpuType.
	d = Gate(Request{NodeSelector: map[string]string{LabelNVIDIAProduct: "NVIDIA-A100-SXM4-40GB"}, GPUsPerReplica: 8}, nodes, nil, nil)
	if d.Outcome != Admit || d.MatchingNodes != 1 {
		t.Fatalf("raw selector must match node a: %+v", d)
	}
}

func TestSelectorGPUTypeWins(t *testing.T) {
	got := Selector(Request{GPUType: "H100", NodeSelector: map[string]string{LabelGPUModel: "A100", "zone": "x"}})
	if !reflect.DeepEqual(got, map[string]string{LabelGPUModel: "H100", "zone": "x"}) {
		t.Fatalf("got %v", got)
	}
	if got := Selector(Request{}); got == nil || len(got) != 0 {
		t.Fatalf("want an empty, non-nil selector, got %#v", got)
	}
}

func TestGateAMD(t *testing.T) {
	nodes := []corev1.Node{
		node("nv", gpus(ResourceNVIDIA, 8), labels(LabelGPUModel, "MI300X")),
		node("amd", gpus(ResourceAMD, 8), labels(LabelGPUModel, "MI300X")),
	}
	pods := []corev1.Pod{pod("amd-user", "amd", container(gpuReq(ResourceAMD, 6)))}
	d := Gate(Request{Vendor: workspacesv1.GPUVendorAMD, GPUType: "MI300X", GPUsPerReplica: 4, Replicas: 1}, nodes, pods, nil)
	if d.Outcome != Wait || d.ResourceName != ResourceAMD || d.MatchingNodes != 1 || d.FreeGPUs != 2 {
		t.Fatalf("AMD must count amd.com/gpu only: %+v", d)
	}
}

func TestGateTerminalPodsIgnored(t *testing.T) {
	pods := []corev1.Pod{
		gpuPod("done", "a", 4, phase(corev1.PodSucceeded)),
		gpuPod("crashed", "a", 4, phase(corev1.PodFailed)),
	}
	d := Gate(Request{GPUType: "A100", GPUsPerReplica: 4, Replicas: 1}, a100Nodes(1, 4), pods, nil)
	if d.Outcome != Admit || d.FreeGPUs != 4 {
		t.Fatalf("terminal pods hold no GPUs: %+v", d)
	}
	d = Gate(Request{GPUType: "A100", GPUsPerReplica: 4, Replicas: 1}, a100Nodes(1, 4), []corev1.Pod{gpuPod("init", "a", 0, initContainer(gpuReq(ResourceNVIDIA, 1), false))}, nil)
	if d.Outcome != Wait || d.FreeGPUs != 3 {
		t.Fatalf("an init container's GPU counts: %+v", d)
	}
}

func TestGateReservationsFirstFit(t *testing.T) {
	nodes := a100Nodes(2, 4) // a: 4, b: 4
	// One admitted workspace of 2 x 3 GPUs, unbound: first-fit takes 3 from a and 3 from b.
	res := []Reservation{{Key: "ns/older", Selector: map[string]string{LabelGPUModel: "A100"}, GPUsPerReplica: 3, Replicas: 2}}
	d := Gate(Request{Key: "ns/new", GPUType: "A100", GPUsPerReplica: 2, Replicas: 1}, nodes, nil, res)
	if d.Outcome != Wait || d.ReservedGPUs != 6 || d.FreeGPUs != 2 {
		t.Fatalf("reserved GPUs must count as taken: %+v", d)
	}
	// The requester's own reservation is not charged against it.
	d = Gate(Request{Key: "ns/older", GPUType: "A100", GPUsPerReplica: 3, Replicas: 2}, nodes, nil, res)
	if d.Outcome != Admit || d.ReservedGPUs != 0 {
		t.Fatalf("own reservation must be skipped: %+v", d)
	}
	// First-fit packs 1-GPU replicas onto node a, leaving b whole for a 4-GPU replica.
	small := []Reservation{{Key: "ns/small", GPUsPerReplica: 1, Replicas: 3}}
	d = Gate(Request{GPUType: "A100", GPUsPerReplica: 4, Replicas: 1}, nodes, nil, small)
	if d.Outcome != Admit || d.ReservedGPUs != 3 || d.FreeGPUs != 5 {
		t.Fatalf("first-fit must leave node b whole: %+v", d)
	}
	// Another vendor's reservation and a reservation whose selector matches no node take nothing.
	other := []Reservation{
		{Key: "ns/amd", Vendor: workspacesv1.GPUVendorAMD, GPUsPerReplica: 4, Replicas: 2},
		{Key: "ns/h100", Selector: map[string]string{LabelGPUModel: "H100"}, GPUsPerReplica: 4, Replicas: 2},
	}
	d = Gate(Request{GPUType: "A100", GPUsPerReplica: 4, Replicas: 2}, nodes, nil, other)
	if d.Outcome != Admit || d.ReservedGPUs != 0 {
		t.Fatalf("unrelated reservations must not count: %+v", d)
	}
	// A reservation pinned to a node is charged there.
	pinned := []Reservation{{Key: "ns/pinned", Node: "b", GPUsPerReplica: 4, Replicas: 1}}
	d = Gate(Request{GPUType: "A100", GPUsPerReplica: 4, Replicas: 2}, nodes, nil, pinned)
	if d.Outcome != Wait || d.FittingReplicas != 1 {
		t.Fatalf("pinned reservation must take node b: %+v", d)
	}
}

func TestGateReservationOnNonMatchingNodeDoesNotCharge(t *testing.T) {
	nodes := []corev1.Node{
		node("a", gpus(ResourceNVIDIA, 4), labels(LabelGPUModel, "A100", "zone", "east")),
		node("b", gpus(ResourceNVIDIA, 4), labels(LabelGPUModel, "A100", "zone", "west")),
	}
	// The reservation may land anywhere, first-fit puts it on a; a request for zone=west is unaffected.
	res := []Reservation{{Key: "ns/any", GPUsPerReplica: 4, Replicas: 1}}
	d := Gate(Request{NodeSelector: map[string]string{"zone": "west"}, GPUsPerReplica: 4, Replicas: 1}, nodes, nil, res)
	if d.Outcome != Admit || d.ReservedGPUs != 0 {
		t.Fatalf("reservation charged to a must not block b: %+v", d)
	}
}

func TestGateNoGPUAndInvalid(t *testing.T) {
	if d := Gate(Request{}, nil, nil, nil); d.Outcome != Admit || d.Reason != ReasonNoGPURequested {
		t.Fatalf("no GPUs requested must admit: %+v", d)
	}
	if d := Gate(Request{Vendor: "Intel", GPUsPerReplica: 1}, nil, nil, nil); d.Outcome != Unavailable || d.Reason != ReasonInvalidGpuRequest || !strings.Contains(d.Message, "gpuVendor") {
		t.Fatalf("unknown vendor: %+v", d)
	}
	if d := Gate(Request{GPUsPerReplica: -1}, nil, nil, nil); d.Outcome != Unavailable || !strings.Contains(d.Message, "gpuCount") {
		t.Fatalf("negative count: %+v", d)
	}
	// Replicas below 1 count as 1.
	if d := Gate(Request{GPUType: "A100", GPUsPerReplica: 4, Replicas: 0}, a100Nodes(1, 4), nil, nil); d.Outcome != Admit || d.FittingReplicas != 1 {
		t.Fatalf("zero replicas count as one: %+v", d)
	}
}

func TestGateAgreesWithOfferings(t *testing.T) {
	nodes := a100Nodes(3, 8)
	pods := []corev1.Pod{gpuPod("p1", "a", 3), gpuPod("p2", "b", 8), gpuPod("p3", "c", 1, initContainer(gpuReq(ResourceNVIDIA, 5), false))}
	off := Offerings(nodes, pods)
	d := Gate(Request{GPUType: "A100", GPUsPerReplica: 1, Replicas: 1}, nodes, pods, nil)
	if len(off) != 1 || off[0].Total-off[0].Allocated != d.FreeGPUs {
		t.Fatalf("offering free %d-%d != gate free %d", off[0].Total, off[0].Allocated, d.FreeGPUs)
	}
}

func TestFitResources(t *testing.T) {
	nodes := []corev1.Node{
		node("a", alloc(corev1.ResourceCPU, "4"), alloc(corev1.ResourceMemory, "16Gi"), labels("pool", "x")),
		node("b", alloc(corev1.ResourceCPU, "8"), alloc(corev1.ResourceMemory, "4Gi"), labels("pool", "x")),
		node("c", alloc(corev1.ResourceCPU, "64"), alloc(corev1.ResourceMemory, "64Gi"), labels("pool", "x"), cordoned),
	}
	pods := []corev1.Pod{pod("busy", "a", container(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}))}
	per := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	// a: cpu 2.5 -> 2, mem 16Gi -> 4 => 2; b: cpu 8, mem 4Gi -> 1 => 1; c cordoned.
	f := FitResources(map[string]string{"pool": "x"}, per, 4, nodes, pods)
	if f.MatchingNodes != 2 || f.FittingReplicas != 3 || f.Fits(4) || f.Limiting == "" {
		t.Fatalf("want 3 of 4 fitting on 2 nodes: %+v", f)
	}
	if f := FitResources(map[string]string{"pool": "x"}, per, 3, nodes, pods); !f.Fits(3) {
		t.Fatalf("3 replicas fit: %+v", f)
	}
	if f := FitResources(map[string]string{"pool": "y"}, per, 1, nodes, pods); f.MatchingNodes != 0 || f.Fits(1) {
		t.Fatalf("no node matches: %+v", f)
	}
	if f := FitResources(nil, nil, 2, nodes, nil); !f.Fits(2) {
		t.Fatalf("an empty request fits: %+v", f)
	}
}

func TestPodLevelResources(t *testing.T) {
	p := pod("p", "a", container(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}))
	p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}
	if got := PodRequestMilli(&p, corev1.ResourceCPU); got != 3000 {
		t.Fatalf("pod-level request wins: got %d", got)
	}
}

// TestPodOverheadCounted: a pod's overhead (spec.overhead, set from its RuntimeClass) is part of its
// request, with container-level and with pod-level resources, as the scheduler counts it; a resource
// only the overhead names counts too.
func TestPodOverheadCounted(t *testing.T) {
	overhead := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	p := pod("p", "a", container(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), ResourceNVIDIA: resource.MustParse("2")}))
	p.Spec.Overhead = overhead
	if got := PodRequestMilli(&p, corev1.ResourceCPU); got != 1250 {
		t.Errorf("cpu with overhead: got %dm, want 1250m", got)
	}
	if got := PodRequestMilli(&p, corev1.ResourceMemory); got != 64*1024*1024*1000 {
		t.Errorf("memory only the overhead names: got %d milli, want 64Mi", got)
	}
	if got := PodRequest(&p, ResourceNVIDIA); got != 2 {
		t.Errorf("GPUs: got %d, want 2 (overhead has none)", got)
	}
	p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}
	if got := PodRequestMilli(&p, corev1.ResourceCPU); got != 3250 {
		t.Errorf("pod-level cpu with overhead: got %dm, want 3250m", got)
	}
	// The fit of a node counts the overhead: 2 CPUs allocatable, a pod of 1 CPU + 250m overhead
	// leaves 750m, too little for a replica of 1 CPU.
	n := node("a")
	n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("2")
	q := pod("q", "a", container(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}))
	q.Spec.Overhead = overhead
	per := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	if f := FitResources(nil, per, 1, []corev1.Node{n}, []corev1.Pod{q}); f.Fits(1) {
		t.Errorf("the overhead was not counted: %+v", f)
	}
	q.Spec.Overhead = nil
	if f := FitResources(nil, per, 1, []corev1.Node{n}, []corev1.Pod{q}); !f.Fits(1) {
		t.Errorf("without overhead one CPU is free: %+v", f)
	}
}

// TestOneContainerPathMatchesLibrary: the direct read for pods of one container (what the child
// cache rebuilds) gives what the library computes for the same pod.
func TestOneContainerPathMatchesLibrary(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	cases := []corev1.ResourceRequirements{
		{},
		{Requests: rl("cpu", "250m", "memory", "1Gi", "nvidia.com/gpu", "2")},
		{Limits: rl("cpu", "1", "nvidia.com/gpu", "1")},
		{Requests: rl("cpu", "100m"), Limits: rl("cpu", "2", "memory", "3Gi")},
		{Requests: rl("cpu", "-1", "nvidia.com/gpu", "-2")},
	}
	for i, r := range cases {
		p := pod("p", "n")
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: r}}
		lib := podRequests(&p)
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, ResourceNVIDIA, ResourceAMD} {
			want := int64(0)
			if q, ok := lib[name]; ok {
				want = nonNegative(q.MilliValue())
			}
			if got := PodRequestMilli(&p, name); got != want {
				t.Errorf("case %d, %s: %d, the library says %d", i, name, got, want)
			}
		}
	}
}

// TestPodRequestNeverNegativeNorWraps: invalid negative quantities count as 0 per container, and a
// sum beyond int64 stops at its largest value.
func TestPodRequestNeverNegativeNorWraps(t *testing.T) {
	p := pod("p", "a", container(gpuReq(ResourceNVIDIA, -5)), container(gpuReq(ResourceNVIDIA, 2)))
	if got := PodRequest(&p, ResourceNVIDIA); got != 2 {
		t.Errorf("negative request: got %d, want 2", got)
	}
	big := pod("b", "a", container(gpuReq(ResourceNVIDIA, math.MaxInt64)), container(gpuReq(ResourceNVIDIA, math.MaxInt64)))
	if got := PodRequest(&big, ResourceNVIDIA); got != math.MaxInt64 {
		t.Errorf("huge request: got %d", got)
	}
	if got := PodRequestMilli(&big, ResourceNVIDIA); got != math.MaxInt64 {
		t.Errorf("huge request in milli: got %d", got)
	}
}

// TestGateNeverFits: two nodes of 4 GPUs and a replica asking 8 can never fit, whatever is released:
// Unavailable, naming the largest node, not Wait.
func TestGateNeverFits(t *testing.T) {
	d := Gate(Request{GPUType: "A100", GPUsPerReplica: 8, Replicas: 1}, a100Nodes(2, 4), nil, nil)
	if d.Outcome != Unavailable || d.Reason != ReasonGpuRequestNeverFits || d.MatchingNodes != 2 {
		t.Fatalf("8 GPUs per replica on 2x4 must never fit: %+v", d)
	}
	if !strings.Contains(d.Message, "a, has 4 in total") {
		t.Fatalf("message must name the largest node and its size: %q", d.Message)
	}
	// The same request on a node of 8 that is busy now waits: a release makes it fit.
	busy := []corev1.Pod{pod("p", "a", container(corev1.ResourceList{ResourceNVIDIA: resource.MustParse("1")}))}
	if d := Gate(Request{GPUType: "A100", GPUsPerReplica: 8, Replicas: 1}, a100Nodes(1, 8), busy, nil); d.Outcome != Wait {
		t.Fatalf("a busy node large enough must wait: %+v", d)
	}
}

// TestGatePlacement: all replicas on the smallest node that holds them all, else spread over the
// nodes with the most room first.
func TestGatePlacement(t *testing.T) {
	nodes := []corev1.Node{
		node("big", gpus(ResourceNVIDIA, 8), labels(LabelGPUModel, "A100")),
		node("small", gpus(ResourceNVIDIA, 2), labels(LabelGPUModel, "A100")),
		node("mid", gpus(ResourceNVIDIA, 4), labels(LabelGPUModel, "A100")),
	}
	d := Gate(Request{GPUType: "A100", GPUsPerReplica: 1, Replicas: 3}, nodes, nil, nil)
	if want := []NodeReplicas{{Node: "mid", Replicas: 3}}; !reflect.DeepEqual(d.Placement, want) {
		t.Fatalf("placement %+v, want %+v", d.Placement, want)
	}
	d = Gate(Request{GPUType: "A100", GPUsPerReplica: 2, Replicas: 6}, nodes, nil, nil)
	if want := []NodeReplicas{{Node: "big", Replicas: 4}, {Node: "mid", Replicas: 2}}; !reflect.DeepEqual(d.Placement, want) {
		t.Fatalf("placement %+v, want %+v", d.Placement, want)
	}
	// A reservation pinned to mid leaves it no room: the 3 replicas go to big.
	d = Gate(Request{GPUType: "A100", GPUsPerReplica: 1, Replicas: 3}, nodes, nil,
		[]Reservation{{Key: "o", Node: "mid", GPUsPerReplica: 2, Replicas: 1}})
	if want := []NodeReplicas{{Node: "big", Replicas: 3}}; !reflect.DeepEqual(d.Placement, want) {
		t.Fatalf("placement %+v, want %+v", d.Placement, want)
	}
}
