// Package gpu holds the GPU arithmetic the inventory-collector and the workspace gate share: which
// nodes count, what a pod requests, the GPU offerings of a cluster and whether a workspace fits. The
// functions are pure: they read the Nodes and Pods they are given and never talk to an API server, so
// the inventory on a Colony and the decision of the gate always agree.
package gpu

import (
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

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

// ModelOf returns a node's GPU model for the extended resource its GPUs are counted in, as the
// inventory reports it: the exalsius.ai/gpu-model label, else the vendor's product label
// (nvidia.com/gpu.product, amd.com/gpu.product-name); "" when neither says, or for a resource of no
// known vendor.
func ModelOf(n *corev1.Node, resource corev1.ResourceName) string {
	for _, v := range vendors {
		if v.resource == resource {
			m, _ := modelOf(n, v)
			return m
		}
	}
	return ""
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

// PodRequest returns the pod's effective request of one resource, as whole units, the way the
// scheduler computes it (k8s.io/component-helpers/resource.PodRequests): the larger of the sum over
// app containers (plus restartable init containers, "sidecars", which keep running) and, for each
// regular init container, its request plus the sidecars started before it; pod-level resources
// (spec.resources) win for the resources they may set (cpu, memory), and the pod's overhead
// (spec.overhead, from its RuntimeClass) is added. Resize status is not read: a pod counts what its
// spec asks for. A container without a request but with a limit counts its limit and a negative
// quantity counts as 0, as the API server defaults and validates them, so hand-built pods count as
// their stored form would. The result is never negative and stops at the largest int64.
func PodRequest(p *corev1.Pod, name corev1.ResourceName) int64 {
	q, ok := podRequest(p, name)
	if !ok {
		return 0
	}
	if q.Cmp(maxUnits) >= 0 {
		return math.MaxInt64
	}
	return nonNegative(q.Value())
}

// PodRequestMilli is PodRequest in thousandths, for cpu and memory-like resources.
func PodRequestMilli(p *corev1.Pod, name corev1.ResourceName) int64 {
	q, ok := podRequest(p, name)
	if !ok {
		return 0
	}
	if q.Cmp(maxMilli) >= 0 {
		return math.MaxInt64
	}
	return nonNegative(q.MilliValue())
}

var (
	maxUnits = *resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
	maxMilli = *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
)

// podRequest returns the pod's request of one resource. A pod of one container and nothing else
// (no init containers, overhead or pod-level resources), which is every pod the child-cluster cache
// rebuilds from its effective requests, requests what that container requests: that is read
// directly, because the library's computation allocates several resource lists per call and made
// the gate over 10000 pods twenty times slower. Every other pod goes through the library.
func podRequest(p *corev1.Pod, name corev1.ResourceName) (resource.Quantity, bool) {
	if len(p.Spec.Containers) == 1 && len(p.Spec.InitContainers) == 0 && p.Spec.Overhead == nil && p.Spec.Resources == nil {
		r := &p.Spec.Containers[0].Resources
		if q, ok := r.Requests[name]; ok {
			return q, true
		}
		q, ok := r.Limits[name]
		return q, ok
	}
	q, ok := podRequests(p)[name]
	return q, ok
}

// podRequests is the library's computation on the pod as the API server would store it.
func podRequests(p *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(defaulted(p), resourcehelper.PodResourcesOptions{})
}

// defaulted returns p, or, when one of its containers has a limit without a request or a negative
// request, a copy whose containers' requests are what the API server would store: the limit is the
// request, and nothing is below 0. Pods read from an API server are defaulted and validated already,
// so for them nothing is copied.
func defaulted(p *corev1.Pod) *corev1.Pod {
	needs := func(cs []corev1.Container) bool {
		for i := range cs {
			r := &cs[i].Resources
			for _, q := range r.Requests {
				if q.Sign() < 0 {
					return true
				}
			}
			for n := range r.Limits {
				if _, ok := r.Requests[n]; !ok {
					return true
				}
			}
		}
		return false
	}
	if !needs(p.Spec.Containers) && !needs(p.Spec.InitContainers) {
		return p
	}
	fix := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i := range cs {
			out[i] = corev1.Container{Name: cs[i].Name, RestartPolicy: cs[i].RestartPolicy}
			reqs := make(corev1.ResourceList, len(cs[i].Resources.Requests)+len(cs[i].Resources.Limits))
			for n, q := range cs[i].Resources.Limits {
				reqs[n] = q
			}
			for n, q := range cs[i].Resources.Requests {
				reqs[n] = q
			}
			for n, q := range reqs {
				if q.Sign() < 0 {
					reqs[n] = resource.Quantity{Format: q.Format}
				}
			}
			out[i].Resources.Requests = reqs
		}
		return out
	}
	cp := *p
	cp.Spec.Containers = fix(p.Spec.Containers)
	cp.Spec.InitContainers = fix(p.Spec.InitContainers)
	return &cp
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
