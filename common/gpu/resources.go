// Package gpu holds the GPU arithmetic the inventory-collector and the workspace gate share: which
// nodes count, what a pod requests, the GPU offerings of a cluster and whether a workspace fits. The
// functions are pure: they read the Nodes and Pods they are given and never talk to an API server, so
// the inventory on a Colony and the decision of the gate always agree.
package gpu

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// Well-known resource names, labels and vendors.
const (
	// ResourceNVIDIA is the extended resource of NVIDIA GPUs (the NVIDIA device plugin).
	ResourceNVIDIA corev1.ResourceName = "nvidia.com/gpu"
	// ResourceAMD is the extended resource of AMD GPUs (the ROCm device plugin).
	ResourceAMD corev1.ResourceName = "amd.com/gpu"

	// LabelGPUModel is the canonical model label, set by the platform on GPU nodes. It wins over the
	// vendor labels and is the label the gate selects on for a workspace's gpuType.
	LabelGPUModel = "exalsius.ai/gpu-model"
	// LabelNVIDIAProduct is set by NVIDIA GPU Feature Discovery, for example NVIDIA-A100-SXM4-80GB.
	LabelNVIDIAProduct = "nvidia.com/gpu.product"
	// LabelAMDProductName is set by the AMD GPU node labeller, for example AMD-Instinct-MI300X.
	LabelAMDProductName = "amd.com/gpu.product-name"

	// VendorNVIDIA and VendorAMD are the vendor names of offerings, equal to workspacesv1.GPUVendor.
	VendorNVIDIA = string(workspacesv1.GPUVendorNVIDIA)
	VendorAMD    = string(workspacesv1.GPUVendorAMD)
)

// vendor describes one GPU vendor: its resource, its model label and the prefix of its raw labels.
type vendor struct {
	name        string
	resource    corev1.ResourceName
	modelLabel  string
	labelPrefix string
}

// vendors lists the supported vendors in the order offerings are reported.
var vendors = []vendor{
	{name: VendorAMD, resource: ResourceAMD, modelLabel: LabelAMDProductName, labelPrefix: "amd.com/"},
	{name: VendorNVIDIA, resource: ResourceNVIDIA, modelLabel: LabelNVIDIAProduct, labelPrefix: "nvidia.com/"},
}

// volatileLabels are vendor labels whose values change on their own (GPU Feature Discovery rewrites
// its timestamp every labelling pass). They are left out of offerings' labels so that the inventory
// does not change, and get written, for no reason.
var volatileLabels = map[string]bool{
	"nvidia.com/gfd.timestamp": true,
}

// ResourceNameFor returns the extended resource of a vendor: nvidia.com/gpu for NVIDIA (and for an
// empty vendor, the API's default), amd.com/gpu for AMD. ok is false for any other vendor.
func ResourceNameFor(v workspacesv1.GPUVendor) (name corev1.ResourceName, ok bool) {
	switch v {
	case workspacesv1.GPUVendorNVIDIA, "":
		return ResourceNVIDIA, true
	case workspacesv1.GPUVendorAMD:
		return ResourceAMD, true
	}
	return "", false
}

// IsReady reports whether the node's Ready condition is True.
func IsReady(n *corev1.Node) bool {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return n.Status.Conditions[i].Status == corev1.ConditionTrue
		}
	}
	return false
}

// IsSchedulable reports whether new pods may land on the node: it is Ready and not cordoned. Taints are
// not considered: GPU nodes are commonly tainted for GPU workloads, which tolerate the taint.
func IsSchedulable(n *corev1.Node) bool {
	return !n.Spec.Unschedulable && IsReady(n)
}

// Allocatable returns the node's allocatable amount of an extended resource as an integer (0 when
// absent or negative).
func Allocatable(n *corev1.Node, name corev1.ResourceName) int64 {
	q, ok := n.Status.Allocatable[name]
	if !ok {
		return 0
	}
	return nonNegative(q.Value())
}

// modelOf returns a node's model for a vendor and the label it came from ("" and "" when none says).
func modelOf(n *corev1.Node, v vendor) (model, label string) {
	if m, ok := n.Labels[LabelGPUModel]; ok && m != "" {
		return m, LabelGPUModel
	}
	if m, ok := n.Labels[v.modelLabel]; ok && m != "" {
		return m, v.modelLabel
	}
	return "", ""
}

// vendorLabels returns the node's raw labels under the vendor's prefix, without the volatile ones.
func vendorLabels(n *corev1.Node, v vendor) map[string]string {
	out := map[string]string{}
	for k, val := range n.Labels {
		if strings.HasPrefix(k, v.labelPrefix) && !volatileLabels[k] {
			out[k] = val
		}
	}
	return out
}

// IsTerminal reports whether the pod has finished (Succeeded or Failed) and so holds no resources.
func IsTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// PodRequest returns the pod's effective request of one resource, as the scheduler computes it: the
// larger of the sum over app containers (plus restartable init containers, "sidecars", which keep
// running) and, for each regular init container, its request plus the sidecars started before it.
// A container without a request but with a limit counts its limit, as the API server defaults
// requests of extended resources to their limits.
func PodRequest(p *corev1.Pod, name corev1.ResourceName) int64 {
	var containers, sidecars, initPeak int64
	for i := range p.Spec.Containers {
		containers = saturatingAdd(containers, containerRequest(&p.Spec.Containers[i], name))
	}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		r := containerRequest(c, name)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars = saturatingAdd(sidecars, r)
			initPeak = max(initPeak, sidecars)
			continue
		}
		initPeak = max(initPeak, saturatingAdd(sidecars, r))
	}
	return max(saturatingAdd(containers, sidecars), initPeak)
}

// PodRequestMilli is PodRequest in thousandths, for cpu and memory-like resources. Pod-level resources
// (spec.resources), when they set the resource, win over the containers' sum.
func PodRequestMilli(p *corev1.Pod, name corev1.ResourceName) int64 {
	if p.Spec.Resources != nil {
		if q, ok := p.Spec.Resources.Requests[name]; ok {
			return nonNegative(q.MilliValue())
		}
	}
	var containers, sidecars, initPeak int64
	for i := range p.Spec.Containers {
		containers = saturatingAdd(containers, containerRequestMilli(&p.Spec.Containers[i], name))
	}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		r := containerRequestMilli(c, name)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars = saturatingAdd(sidecars, r)
			initPeak = max(initPeak, sidecars)
			continue
		}
		initPeak = max(initPeak, saturatingAdd(sidecars, r))
	}
	return max(saturatingAdd(containers, sidecars), initPeak)
}

func containerRequest(c *corev1.Container, name corev1.ResourceName) int64 {
	if q, ok := quantityOf(c, name); ok {
		return nonNegative(q.Value())
	}
	return 0
}

func containerRequestMilli(c *corev1.Container, name corev1.ResourceName) int64 {
	if q, ok := quantityOf(c, name); ok {
		return nonNegative(q.MilliValue())
	}
	return 0
}

func quantityOf(c *corev1.Container, name corev1.ResourceName) (resource.Quantity, bool) {
	if q, ok := c.Resources.Requests[name]; ok {
		return q, true
	}
	q, ok := c.Resources.Limits[name]
	return q, ok
}

func nonNegative(v int64) int64 {
	if v < 0 {
		return 0
	}
	return v
}

// saturatingAdd adds two non-negative numbers, stopping at the largest int64 instead of wrapping.
func saturatingAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return int64(^uint64(0) >> 1)
}

// MatchesSelector reports whether every key of the selector is a label of the node with that value.
func MatchesSelector(n *corev1.Node, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := n.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
