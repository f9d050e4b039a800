package gpu

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
)

// offeringKey identifies an offering: vendor, model and the label the model came from. The resource
// name follows from the vendor and the selector from the label and the model, so the key is the
// offering identity of docs/INVENTORY.md (vendor + model + resourceName + selector).
type offeringKey struct {
	vendor string
	model  string
	label  string
}

// builder accumulates one offering.
type builder struct {
	key       offeringKey
	resource  corev1.ResourceName
	total     int64
	allocated int64
	nodes     int32
	labels    map[string]string
}

// Offerings returns the GPU offerings of a cluster from its Nodes and Pods.
//
// A node counts when it is schedulable (not cordoned), Ready, and has a positive allocatable
// nvidia.com/gpu or amd.com/gpu; a node with both counts once for each vendor. Its model is the label
// exalsius.ai/gpu-model, else the vendor's product label, else empty; the offering's selector is that
// one label with the model as value (empty when there is no model). Total sums the nodes' allocatable
// GPUs; Allocated sums the effective GPU requests (see PodRequest) of the non-terminal pods bound to
// those nodes; Labels are the vendor's raw labels (nvidia.com/* or amd.com/*) that every node of the
// offering carries with the same value, so a label that differs between nodes is left out rather than
// shown with one node's value. Offerings are sorted by vendor, model, resource name and selector
// label, so equal inputs give equal outputs.
func Offerings(nodes []corev1.Node, pods []corev1.Pod) []infrav1.GPUOffering {
	type nodeRef struct {
		b *builder
		v vendor
	}
	byKey := map[offeringKey]*builder{}
	byNode := map[string][]nodeRef{}
	seen := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		if !IsSchedulable(n) {
			continue
		}
		for _, v := range vendors {
			alloc := Allocatable(n, v.resource)
			if alloc <= 0 || seen[n.Name+"/"+string(v.resource)] {
				// The same node twice in a caller's merged list counts once, the first with the
				// resource, as in Gate.
				continue
			}
			seen[n.Name+"/"+string(v.resource)] = true
			model, label := modelOf(n, v)
			k := offeringKey{vendor: v.name, model: model, label: label}
			b := byKey[k]
			labels := vendorLabels(n, v)
			if b == nil {
				b = &builder{key: k, resource: v.resource, labels: labels}
				byKey[k] = b
			} else {
				intersect(b.labels, labels)
			}
			b.total = saturatingAdd(b.total, alloc)
			b.nodes++
			byNode[n.Name] = append(byNode[n.Name], nodeRef{b: b, v: v})
		}
	}
	if len(byKey) == 0 {
		return nil
	}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || IsTerminal(p) {
			continue
		}
		for _, ref := range byNode[p.Spec.NodeName] {
			ref.b.allocated = saturatingAdd(ref.b.allocated, PodRequest(p, ref.v.resource))
		}
	}
	out := make([]infrav1.GPUOffering, 0, len(byKey))
	for _, b := range byKey {
		o := infrav1.GPUOffering{
			Model:        b.key.model,
			Vendor:       b.key.vendor,
			ResourceName: string(b.resource),
			Total:        b.total,
			Allocated:    b.allocated,
			Nodes:        b.nodes,
			Selector:     map[string]string{},
		}
		if b.key.label != "" {
			o.Selector[b.key.label] = b.key.model
		}
		if len(b.labels) > 0 {
			o.Labels = b.labels
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return lessOffering(&out[i], &out[j]) })
	return out
}

// intersect keeps in dst only the entries that src has with the same value.
func intersect(dst, src map[string]string) {
	for k, v := range dst {
		if sv, ok := src[k]; !ok || sv != v {
			delete(dst, k)
		}
	}
}

func lessOffering(a, b *infrav1.GPUOffering) bool {
	if a.Vendor != b.Vendor {
		return a.Vendor < b.Vendor
	}
	if a.Model != b.Model {
		return a.Model < b.Model
	}
	if a.ResourceName != b.ResourceName {
		return a.ResourceName < b.ResourceName
	}
	return selectorString(a.Selector) < selectorString(b.Selector)
}

// selectorString renders a selector as sorted k=v pairs joined by commas.
func selectorString(sel map[string]string) string {
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(k)
		sb.WriteByte('=')
		sb.WriteString(sel[k])
	}
	return sb.String()
}
