package gpu

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
)

func TestOfferingsModelAndSelector(t *testing.T) {
	nodes := []corev1.Node{
		node("canonical", gpus(ResourceNVIDIA, 8), labels(LabelGPUModel, "H100", LabelNVIDIAProduct, "NVIDIA-H100-80GB-HBM3")),
		node("vendor-only", gpus(ResourceNVIDIA, 4), labels(LabelNVIDIAProduct, "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.memory", "81920")),
		node("no-model", gpus(ResourceNVIDIA, 1)),
		node("amd", gpus(ResourceAMD, 2), labels(LabelAMDProductName, "AMD-Instinct-MI300X", "amd.com/gpu.family", "AI")),
		node("cpu-only", alloc(corev1.ResourceCPU, "32")),
	}
	got := Offerings(nodes, nil)
	want := []infrav1.GPUOffering{
		{Vendor: "AMD", Model: "AMD-Instinct-MI300X", ResourceName: "amd.com/gpu", Selector: map[string]string{LabelAMDProductName: "AMD-Instinct-MI300X"},
			Total: 2, Nodes: 1, Labels: map[string]string{LabelAMDProductName: "AMD-Instinct-MI300X", "amd.com/gpu.family": "AI"}},
		{Vendor: "NVIDIA", Model: "", ResourceName: "nvidia.com/gpu", Selector: map[string]string{}, Total: 1, Nodes: 1},
		{Vendor: "NVIDIA", Model: "H100", ResourceName: "nvidia.com/gpu", Selector: map[string]string{LabelGPUModel: "H100"},
			Total: 8, Nodes: 1, Labels: map[string]string{LabelNVIDIAProduct: "NVIDIA-H100-80GB-HBM3"}},
		{Vendor: "NVIDIA", Model: "NVIDIA-A100-SXM4-80GB", ResourceName: "nvidia.com/gpu", Selector: map[string]string{LabelNVIDIAProduct: "NVIDIA-A100-SXM4-80GB"},
			Total: 4, Nodes: 1, Labels: map[string]string{LabelNVIDIAProduct: "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.memory": "81920"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("offerings:\n got %+v\nwant %+v", got, want)
	}
}

func TestOfferingsExcludesCordonedNotReadyAndZero(t *testing.T) {
	nodes := []corev1.Node{
		node("ok", gpus(ResourceNVIDIA, 4), labels(LabelGPUModel, "A100")),
		node("cordoned", gpus(ResourceNVIDIA, 4), labels(LabelGPUModel, "A100"), cordoned),
		node("notready", gpus(ResourceNVIDIA, 4), labels(LabelGPUModel, "A100"), notReady),
		node("nocondition", gpus(ResourceNVIDIA, 4), labels(LabelGPUModel, "A100"), noReadyCondition),
		node("zero", gpus(ResourceNVIDIA, 0), labels(LabelGPUModel, "A100")),
	}
	pods := []corev1.Pod{gpuPod("on-cordoned", "cordoned", 2), gpuPod("on-ok", "ok", 1)}
	got := Offerings(nodes, pods)
	if len(got) != 1 || got[0].Total != 4 || got[0].Nodes != 1 || got[0].Allocated != 1 {
		t.Fatalf("want one offering of 4 GPUs on 1 node with 1 allocated, got %+v", got)
	}
}

func TestOfferingsAllocatedIgnoresTerminalAndUnbound(t *testing.T) {
	nodes := []corev1.Node{node("a", gpus(ResourceNVIDIA, 8))}
	pods := []corev1.Pod{
		gpuPod("running", "a", 2),
		gpuPod("pending-bound", "a", 1, phase(corev1.PodPending)),
		gpuPod("succeeded", "a", 4, phase(corev1.PodSucceeded)),
		gpuPod("failed", "a", 4, phase(corev1.PodFailed)),
		gpuPod("unbound", "", 3, phase(corev1.PodPending)),
		gpuPod("elsewhere", "b", 3),
		pod("limit-only", "a", limitOnly(gpuReq(ResourceNVIDIA, 1))),
	}
	got := Offerings(nodes, pods)
	if len(got) != 1 || got[0].Allocated != 4 {
		t.Fatalf("want allocated 4 (2 running + 1 pending bound + 1 limit-only), got %+v", got)
	}
}

func TestOfferingsLabelsIntersectAndDropVolatile(t *testing.T) {
	nodes := []corev1.Node{
		node("a", gpus(ResourceNVIDIA, 1), labels(LabelGPUModel, "L4", "nvidia.com/cuda.driver.major", "550", "nvidia.com/gpu.memory", "23034", "nvidia.com/gfd.timestamp", "1")),
		node("b", gpus(ResourceNVIDIA, 1), labels(LabelGPUModel, "L4", "nvidia.com/cuda.driver.major", "535", "nvidia.com/gpu.memory", "23034", "nvidia.com/gfd.timestamp", "2", "amd.com/stray", "x")),
	}
	got := Offerings(nodes, nil)
	want := map[string]string{"nvidia.com/gpu.memory": "23034"}
	if len(got) != 1 || !reflect.DeepEqual(got[0].Labels, want) || got[0].Nodes != 2 || got[0].Total != 2 {
		t.Fatalf("want labels %v on one 2-node offering, got %+v", want, got)
	}
	single := Offerings(nodes[:1], nil)
	if _, ok := single[0].Labels["nvidia.com/gfd.timestamp"]; ok {
		t.Fatalf("the GFD timestamp label must never be reported: %v", single[0].Labels)
	}
}

func TestOfferingsNodeWithBothVendors(t *testing.T) {
	nodes := []corev1.Node{node("mixed", gpus(ResourceNVIDIA, 2), gpus(ResourceAMD, 1))}
	pods := []corev1.Pod{pod("p", "mixed", container(corev1.ResourceList{
		ResourceNVIDIA: gpuReq(ResourceNVIDIA, 1)[ResourceNVIDIA], ResourceAMD: gpuReq(ResourceAMD, 1)[ResourceAMD],
	}))}
	got := Offerings(nodes, pods)
	if len(got) != 2 || got[0].Vendor != VendorAMD || got[1].Vendor != VendorNVIDIA || got[0].Allocated != 1 || got[1].Allocated != 1 {
		t.Fatalf("want an AMD and an NVIDIA offering with 1 allocated each, got %+v", got)
	}
}

func TestOfferingsDeterministic(t *testing.T) {
	var nodes []corev1.Node
	for i, m := range []string{"b", "a", "c", "a", "b"} {
		nodes = append(nodes, node(string(rune('n'+i)), gpus(ResourceNVIDIA, 1), labels(LabelGPUModel, m)))
	}
	first := Offerings(nodes, nil)
	for range 20 {
		if got := Offerings(nodes, nil); !reflect.DeepEqual(got, first) {
			t.Fatalf("order changed: %+v vs %+v", got, first)
		}
	}
	if first[0].Model != "a" || first[1].Model != "b" || first[2].Model != "c" {
		t.Fatalf("want models sorted, got %+v", first)
	}
}

func TestOfferingsEmpty(t *testing.T) {
	if got := Offerings(nil, nil); got != nil {
		t.Fatalf("want nil, got %+v", got)
	}
}

func TestPodRequestInitAndSidecars(t *testing.T) {
	cases := []struct {
		name string
		pod  corev1.Pod
		want int64
	}{
		{"containers sum", pod("p", "n", container(gpuReq(ResourceNVIDIA, 1)), container(gpuReq(ResourceNVIDIA, 2))), 3},
		{"init larger", pod("p", "n", container(gpuReq(ResourceNVIDIA, 1)), initContainer(gpuReq(ResourceNVIDIA, 4), false)), 4},
		{"init smaller", pod("p", "n", container(gpuReq(ResourceNVIDIA, 3)), initContainer(gpuReq(ResourceNVIDIA, 2), false)), 3},
		{"sidecar adds", pod("p", "n", container(gpuReq(ResourceNVIDIA, 1)), initContainer(gpuReq(ResourceNVIDIA, 1), true)), 2},
		{"init after sidecar", pod("p", "n", container(gpuReq(ResourceNVIDIA, 1)), initContainer(gpuReq(ResourceNVIDIA, 1), true), initContainer(gpuReq(ResourceNVIDIA, 3), false)), 4},
		{"limit only", pod("p", "n", limitOnly(gpuReq(ResourceNVIDIA, 2))), 2},
		{"none", pod("p", "n", container(nil)), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodRequest(&tc.pod, ResourceNVIDIA); got != tc.want {
				t.Fatalf("want %d, got %d", tc.want, got)
			}
		})
	}
}
