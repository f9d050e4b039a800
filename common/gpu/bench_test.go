package gpu

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func benchCluster(nNodes, nPods int) ([]corev1.Node, []corev1.Pod) {
	models := []string{"A100", "H100", "L4", "MI300X"}
	nodes := make([]corev1.Node, 0, nNodes)
	for i := range nNodes {
		m := models[i%len(models)]
		res := ResourceNVIDIA
		if m == "MI300X" {
			res = ResourceAMD
		}
		nodes = append(nodes, node(fmt.Sprintf("node-%d", i), gpus(res, 8), labels(LabelGPUModel, m, "nvidia.com/cuda.driver.major", "550")))
	}
	pods := make([]corev1.Pod, 0, nPods)
	for i := range nPods {
		pods = append(pods, gpuPod(fmt.Sprintf("pod-%d", i), fmt.Sprintf("node-%d", i%nNodes), int64(i%2)))
	}
	return nodes, pods
}

func BenchmarkOfferings1000Nodes10000Pods(b *testing.B) {
	nodes, pods := benchCluster(1000, 10000)
	b.ReportAllocs()
	for b.Loop() {
		if len(Offerings(nodes, pods)) != 4 {
			b.Fatal("want 4 offerings")
		}
	}
}

func BenchmarkGate1000Nodes10000Pods(b *testing.B) {
	nodes, pods := benchCluster(1000, 10000)
	res := []Reservation{{Key: "r", GPUsPerReplica: 2, Replicas: 10}}
	b.ReportAllocs()
	for b.Loop() {
		Gate(Request{GPUType: "H100", GPUsPerReplica: 4, Replicas: 8}, nodes, pods, res)
	}
}
