package world

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/exalsius/exalsius-operator/common/gpu"
)

// Labels and annotations of simulated nodes.
const (
	// KwokNodeAnnotation marks the nodes kwok manages; the child's kwok selects on it.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// KwokNodeAnnotationValue is the value kwok selects.
	KwokNodeAnnotationValue = "fake"
	// PoolLabel names the node pool (the config entry) a node came from.
	PoolLabel = "e2e.exalsius.ai/node-pool"
	// GPUModelLabel is the operator's own GPU model label.
	GPUModelLabel = gpu.LabelGPUModel
	// NVIDIAProductLabel is the label NVIDIA's GPU feature discovery sets.
	NVIDIAProductLabel = gpu.LabelNVIDIAProduct
	// AMDProductLabel is the label AMD's node labeller sets.
	AMDProductLabel = gpu.LabelAMDProductName
)

// ClusterConfig is the shape of a ClusterDeployment's spec.config that the simulator's ClusterTemplate
// (`sim-cluster`) understands. Every other key is ignored, as a real template ignores values it does
// not use.
//
//	config:
//	  nodes:
//	  - name: gpu            # node name prefix; default pool<index>
//	    count: 2             # default 1
//	    cpu: "32"            # default "16"
//	    memory: 128Gi        # default "64Gi"
//	    pods: "110"          # default "110"
//	    unschedulable: false
//	    labels: {zone: a}
//	    gpu:
//	      vendor: NVIDIA     # NVIDIA (nvidia.com/gpu) or AMD (amd.com/gpu)
//	      model: A100        # sets exalsius.ai/gpu-model and the vendor's product label
//	      count: 8           # GPUs per node
//	      vendorLabelsOnly: false  # true: leave exalsius.ai/gpu-model off (vendor label only)
//	      labels: {nvidia.com/gpu.memory: "81920"}
//
// Without nodes, a child gets one CPU-only node named worker-0.
type ClusterConfig struct {
	Nodes []NodePool `json:"nodes,omitempty"`
}

// NodePool is a group of identical simulated nodes.
type NodePool struct {
	Name          string            `json:"name,omitempty"`
	Count         *int32            `json:"count,omitempty"`
	CPU           string            `json:"cpu,omitempty"`
	Memory        string            `json:"memory,omitempty"`
	Pods          string            `json:"pods,omitempty"`
	Unschedulable bool              `json:"unschedulable,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	GPU           *GPUSpec          `json:"gpu,omitempty"`
}

// GPUSpec gives each node of a pool GPU capacity and the labels GPU operators would set.
type GPUSpec struct {
	Vendor           string            `json:"vendor"`
	Model            string            `json:"model,omitempty"`
	Count            int64             `json:"count"`
	VendorLabelsOnly bool              `json:"vendorLabelsOnly,omitempty"`
	Labels           map[string]string `json:"labels,omitempty"`
}

// NVIDIARuntimeClass is the RuntimeClass NVIDIA's GPU operator creates (its default
// operator.runtimeClass, with the handler of the same name its container toolkit configures), and the
// one NVIDIA GPU charts name in runtimeClassName. AMD's GPU operator (driver, device plugin, node
// labeller, metrics exporter) creates none: the device plugin hands the devices to the container,
// so AMD children carry no RuntimeClass.
const NVIDIARuntimeClass = "nvidia"

// RuntimeClasses returns the RuntimeClasses the GPU operators of nodes would create: NVIDIA's
// RuntimeClass when a node has NVIDIA GPUs (the label nvidia.com/gpu.present), none otherwise.
func RuntimeClasses(nodes []corev1.Node) []nodev1.RuntimeClass {
	for _, n := range nodes {
		if n.Labels[nvidiaPresentLabel] == "true" {
			return []nodev1.RuntimeClass{{
				ObjectMeta: metav1.ObjectMeta{Name: NVIDIARuntimeClass, Labels: map[string]string{"app.kubernetes.io/component": "gpu-operator"}},
				Handler:    NVIDIARuntimeClass,
			}}
		}
	}
	return nil
}

// nvidiaPresentLabel is the label NVIDIA's GPU operator sets on the nodes with NVIDIA GPUs.
const nvidiaPresentLabel = "nvidia.com/gpu.present"

// ParseClusterConfig decodes a ClusterDeployment's spec.config. Errors name the field path.
func ParseClusterConfig(raw []byte) (ClusterConfig, error) {
	var cfg ClusterConfig
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return cfg, nil
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return cfg, fmt.Errorf("spec.config: %w", err)
	}
	return cfg, nil
}

// BuildNodes returns the Node objects a config describes, sorted by name. Errors name the field path.
func (c ClusterConfig) BuildNodes() ([]corev1.Node, error) {
	pools := c.Nodes
	if len(pools) == 0 {
		pools = []NodePool{{Name: "worker", CPU: "8", Memory: "32Gi"}}
	}
	var nodes []corev1.Node
	seen := map[string]bool{}
	for i, p := range pools {
		path := fmt.Sprintf("spec.config.nodes[%d]", i)
		ns, err := p.nodes(i, path)
		if err != nil {
			return nil, err
		}
		for _, n := range ns {
			if seen[n.Name] {
				return nil, fmt.Errorf("%s.name: node %q is produced twice", path, n.Name)
			}
			seen[n.Name] = true
			nodes = append(nodes, n)
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes, nil
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

func (p NodePool) nodes(index int, path string) ([]corev1.Node, error) {
	name := orDefault(p.Name, fmt.Sprintf("pool%d", index))
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return nil, fmt.Errorf("%s.name: %s", path, strings.Join(errs, "; "))
	}
	count := int32(1)
	if p.Count != nil {
		count = *p.Count
	}
	if count < 0 || count > 100 {
		return nil, fmt.Errorf("%s.count: %d is outside 0..100", path, count)
	}
	res := corev1.ResourceList{}
	for _, q := range []struct {
		field, value, def string
		name              corev1.ResourceName
	}{
		{"cpu", p.CPU, "16", corev1.ResourceCPU},
		{"memory", p.Memory, "64Gi", corev1.ResourceMemory},
		{"pods", p.Pods, "110", corev1.ResourcePods},
	} {
		v, err := resource.ParseQuantity(orDefault(q.value, q.def))
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", path, q.field, err)
		}
		res[q.name] = v
	}
	labels := map[string]string{PoolLabel: name}
	for k, v := range p.Labels {
		labels[k] = v
	}
	if p.GPU != nil {
		if err := p.GPU.apply(path+".gpu", res, labels); err != nil {
			return nil, err
		}
	}
	for k, v := range labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("%s.labels[%q]: %s", path, k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("%s.labels[%q]: %s", path, k, strings.Join(errs, "; "))
		}
	}
	out := make([]corev1.Node, 0, count)
	for j := int32(0); j < count; j++ {
		n := corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("%s-%d", name, j),
				Labels:      map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"},
				Annotations: map[string]string{KwokNodeAnnotation: KwokNodeAnnotationValue, "node.alpha.kubernetes.io/ttl": "0"},
			},
			Spec: corev1.NodeSpec{Unschedulable: p.Unschedulable},
			Status: corev1.NodeStatus{
				Capacity:    res.DeepCopy(),
				Allocatable: res.DeepCopy(),
			},
		}
		for k, v := range labels {
			n.Labels[k] = v
		}
		n.Labels["kubernetes.io/hostname"] = n.Name
		out = append(out, n)
	}
	return out, nil
}

func (g GPUSpec) apply(path string, res corev1.ResourceList, labels map[string]string) error {
	if g.Count < 0 || g.Count > 64 {
		return fmt.Errorf("%s.count: %d is outside 0..64", path, g.Count)
	}
	var resourceName corev1.ResourceName
	var productLabel string
	switch strings.ToUpper(g.Vendor) {
	case "NVIDIA":
		resourceName, productLabel = "nvidia.com/gpu", NVIDIAProductLabel
		labels[nvidiaPresentLabel] = "true"
		labels["nvidia.com/gpu.count"] = fmt.Sprint(g.Count)
	case "AMD":
		resourceName, productLabel = "amd.com/gpu", AMDProductLabel
	default:
		return fmt.Errorf("%s.vendor: %q is not NVIDIA or AMD", path, g.Vendor)
	}
	res[resourceName] = *resource.NewQuantity(g.Count, resource.DecimalSI)
	if g.Model != "" {
		labels[productLabel] = g.Model
		if !g.VendorLabelsOnly {
			labels[GPUModelLabel] = g.Model
		}
	}
	for k, v := range g.Labels {
		labels[k] = v
	}
	return nil
}
