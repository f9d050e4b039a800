package gpu

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// Outcome is the verdict of the GPU gate.
type Outcome string

const (
	// Admit means every replica fits on the matching nodes now.
	Admit Outcome = "Admit"
	// Wait means matching nodes exist but have too few free GPUs, or cannot take pods now (cordoned,
	// NotReady, GPUs not advertised yet); retry when capacity frees up or the nodes come back.
	Wait Outcome = "Wait"
	// Unavailable means no node carries the selector and the GPU resource, not even one that cannot
	// take pods now, or none could ever hold one replica, or the request itself is invalid; a human
	// must act.
	Unavailable Outcome = "Unavailable"
)

// Reasons of a Decision. They equal the workspace Feasible condition's reasons.
const (
	ReasonGpuOfferingUnavailable = workspacesv1.ReasonGpuOfferingUnavailable
	ReasonWaitingForGpuCapacity  = workspacesv1.ReasonWaitingForGpuCapacity
	ReasonWaitingForGpuNodes     = workspacesv1.ReasonWaitingForGpuNodes
	ReasonFeasible               = workspacesv1.ReasonFeasible
	ReasonNoGPURequested         = workspacesv1.ReasonNoGPURequested
	// ReasonGpuRequestNeverFits: one replica asks for more GPUs than the largest matching node has in
	// total; no release of GPUs can make it fit.
	ReasonGpuRequestNeverFits = workspacesv1.ReasonGpuRequestNeverFits
	// ReasonInvalidGpuRequest: the request has an unknown vendor or a negative count. The schema
	// rejects both, so this only guards against callers passing unchecked input.
	ReasonInvalidGpuRequest = "InvalidGpuRequest"
)

// Request is what one workspace asks of the GPU gate.
type Request struct {
	// Key names the requesting workspace (namespace/name); a reservation with the same key is its own
	// and is not charged against it.
	Key string
	// Vendor picks the resource: NVIDIA (nvidia.com/gpu, also when empty) or AMD (amd.com/gpu).
	Vendor workspacesv1.GPUVendor
	// GPUType is matched against the node label exalsius.ai/gpu-model; empty matches any model.
	GPUType string
	// NodeSelector is joined with the GPUType selector.
	NodeSelector map[string]string
	// GPUsPerReplica is the GPUs each replica needs, all from one node. Zero admits at once.
	GPUsPerReplica int64
	// Replicas is the number of replicas; values below 1 count as 1.
	Replicas int32
}

// Reservation holds GPUs for a workspace that the gate admitted earlier but whose pods are not bound
// to nodes yet, so that two workspaces never claim the same free GPUs. Replicas counts only the
// replicas still unbound; bound pods already show up as requests on their nodes.
type Reservation struct {
	// Key names the workspace (namespace/name); the requester's own reservation is skipped.
	Key string
	// Vendor picks the resource, as in Request.
	Vendor workspacesv1.GPUVendor
	// Selector is the node selector the workspace was admitted with (see Selector).
	Selector map[string]string
	// Node, when set, pins every replica of the reservation to that node.
	Node string
	// GPUsPerReplica and Replicas are the reserved amount.
	GPUsPerReplica int64
	Replicas       int32
}

// Decision is the gate's verdict with the numbers that drove it.
type Decision struct {
	// Outcome is Admit, Wait or Unavailable.
	Outcome Outcome
	// Reason is Feasible, NoGPURequested, WaitingForGpuCapacity, WaitingForGpuNodes,
	// GpuOfferingUnavailable, GpuRequestNeverFits or InvalidGpuRequest.
	Reason string
	// Message explains the decision with numbers.
	Message string
	// Selector is the node selector checked: the one the chart must receive.
	Selector map[string]string
	// ResourceName is the GPU resource checked.
	ResourceName corev1.ResourceName
	// MatchingNodes is the number of schedulable Ready nodes with the selector and the resource.
	MatchingNodes int32
	// FreeGPUs is the free GPUs on the matching nodes after pods' requests and reservations.
	FreeGPUs int64
	// ReservedGPUs is the GPUs taken from the matching nodes by reservations.
	ReservedGPUs int64
	// FittingReplicas is how many replicas fit, each on one node, at most the replicas requested.
	FittingReplicas int32
	// Placement, when admitted with GPUs, is where the replicas were counted: all on one node when
	// any node holds them all (the smallest such node), else spread over the nodes with the most room.
	Placement []NodeReplicas
}

// NodeReplicas is a number of replicas counted on one node.
type NodeReplicas struct {
	Node     string
	Replicas int32
}

// Feasible reports whether the decision admits the workspace.
func (d Decision) Feasible() bool { return d.Outcome == Admit }

// Selector returns the node selector of a request: {exalsius.ai/gpu-model: GPUType} when GPUType is
// set, joined with NodeSelector. The chart receives exactly this selector. A NodeSelector entry for
// exalsius.ai/gpu-model is overridden by GPUType.
func Selector(req Request) map[string]string {
	out := make(map[string]string, len(req.NodeSelector)+1)
	for k, v := range req.NodeSelector {
		out[k] = v
	}
	if req.GPUType != "" {
		out[LabelGPUModel] = req.GPUType
	}
	return out
}

// freeNode is one matching node and its free GPUs.
type freeNode struct {
	node     *corev1.Node
	free     int64
	reserved int64
}

// Gate decides whether a workspace's GPU request fits on a cluster now.
//
// GPU nodes are schedulable, Ready nodes with a positive allocatable of the vendor's resource; the
// matching nodes are those whose labels also carry the request's Selector. Nodes with the Selector
// that cannot take pods now but may soon (cordoned, NotReady, or carrying the vendor's GPU labels
// or resource without GPUs advertised yet: see heldBackNodes) make the request Wait
// (WaitingForGpuNodes) where it would otherwise be Unavailable: a drain, a kubelet restart or a
// device plugin still starting is not a reason to fail. Without any such node, no matching node is
// Unavailable (GpuOfferingUnavailable), and a replica larger than every matching node, held back
// ones included, is Unavailable (GpuRequestNeverFits). Each GPU node's free GPUs are its allocatable minus the effective
// requests of the non-terminal pods bound to it. Reservations are then charged, in the order given
// (callers pass the oldest first): each replica of a reservation takes its GPUs from the first GPU
// node, in node-name order, that matches the reservation's own selector and still has room
// (first-fit), whether or not that node matches the request. A reservation pinned to a Node is
// charged to that node. A reserved replica that fits nowhere takes nothing: those GPUs are not there
// to hold. Finally the request's replicas are packed one per node slot: a node with f free GPUs holds
// f / GPUsPerReplica replicas, since a replica never spans nodes. Enough slots admit; too few wait.
func Gate(req Request, nodes []corev1.Node, pods []corev1.Pod, reservations []Reservation) Decision {
	d := Decision{Selector: Selector(req)}
	res, ok := ResourceNameFor(req.Vendor)
	if !ok {
		d.Outcome, d.Reason = Unavailable, ReasonInvalidGpuRequest
		d.Message = fmt.Sprintf("resources.perReplica.gpuVendor: unsupported vendor %q, want NVIDIA or AMD", req.Vendor)
		return d
	}
	d.ResourceName = res
	if req.GPUsPerReplica < 0 {
		d.Outcome, d.Reason = Unavailable, ReasonInvalidGpuRequest
		d.Message = fmt.Sprintf("resources.perReplica.gpuCount: must not be negative, got %d", req.GPUsPerReplica)
		return d
	}
	if req.GPUsPerReplica == 0 {
		d.Outcome, d.Reason = Admit, ReasonNoGPURequested
		d.Message = "no GPUs requested"
		return d
	}
	replicas := max(req.Replicas, 1)

	all := freeNodes(res, nodes, pods)
	chargeReservations(all, res, req.Key, reservations)
	free := make([]*freeNode, 0, len(all))
	for _, f := range all {
		if MatchesSelector(f.node, d.Selector) {
			free = append(free, f)
			d.ReservedGPUs = saturatingAdd(d.ReservedGPUs, f.reserved)
		}
	}
	d.MatchingNodes = int32(len(free))
	back := heldBackNodes(res, d.Selector, nodes)
	if len(free) == 0 {
		d.Message = fmt.Sprintf("no schedulable, Ready node has %s with selector {%s}", res, selectorString(d.Selector))
		if back.mayHold(req.GPUsPerReplica) {
			d.Outcome, d.Reason = Wait, ReasonWaitingForGpuNodes
			d.Message += " now: " + back.String() + "; waiting for them"
			return d
		}
		d.Outcome, d.Reason = Unavailable, ReasonGpuOfferingUnavailable
		if !back.empty() {
			d.Message += fmt.Sprintf("; %s, but none has more than %d in total, and one replica needs %d", back, back.capacity, req.GPUsPerReplica)
		}
		return d
	}

	var slots int64
	var largest int64
	for _, f := range free {
		d.FreeGPUs = saturatingAdd(d.FreeGPUs, f.free)
		slots = saturatingAdd(slots, f.free/req.GPUsPerReplica)
		largest = max(largest, f.free)
	}
	d.FittingReplicas = int32(min(slots, int64(replicas)))
	var capacity int64
	var capacityNode string
	for _, f := range free {
		if a := Allocatable(f.node, res); a > capacity {
			capacity, capacityNode = a, f.node.Name
		}
	}
	if req.GPUsPerReplica > capacity {
		if back.mayHold(req.GPUsPerReplica) {
			d.Outcome, d.Reason = Wait, ReasonWaitingForGpuNodes
			d.Message = fmt.Sprintf("one replica needs %d %s on one node, but the largest of the %d schedulable, Ready matching node(s) with selector {%s}, %s, has %d in total; %s: waiting for them",
				req.GPUsPerReplica, res, d.MatchingNodes, selectorString(d.Selector), capacityNode, capacity, back)
			return d
		}
		d.Outcome, d.Reason = Unavailable, ReasonGpuRequestNeverFits
		d.Message = fmt.Sprintf("one replica needs %d %s on one node, but the largest of the %d matching node(s) with selector {%s}, %s, has %d in total; no release of GPUs can make it fit",
			req.GPUsPerReplica, res, d.MatchingNodes, selectorString(d.Selector), capacityNode, capacity)
		return d
	}

	numbers := fmt.Sprintf("%d replica(s) x %d %s needed on one node each; %d matching node(s) with selector {%s} have %d free (after %d reserved by admitted workspaces, largest %d on one node), fitting %d replica(s)",
		replicas, req.GPUsPerReplica, res, d.MatchingNodes, selectorString(d.Selector), d.FreeGPUs, d.ReservedGPUs, largest, d.FittingReplicas)
	if slots >= int64(replicas) {
		d.Outcome, d.Reason, d.Message = Admit, ReasonFeasible, numbers
		d.Placement = place(free, req.GPUsPerReplica, replicas)
		return d
	}
	d.Outcome, d.Reason, d.Message = Wait, ReasonWaitingForGpuCapacity, numbers
	if !back.empty() {
		d.Message += "; besides, " + back.String()
	}
	return d
}

// heldBack are the nodes with a request's selector that cannot take its pods now but may soon.
type heldBack struct {
	cordoned, notReady, unadvertised []string
	// capacity is the largest allocatable of the resource on the cordoned and NotReady nodes.
	capacity int64
}

// heldBackNodes finds, among the nodes with the selector, those that are not GPU nodes of the
// resource now but may become one without anybody adding a node: cordoned (spec.unschedulable, a
// drain) or NotReady (a kubelet restart) nodes with GPUs of the resource, and nodes that carry the
// vendor's GPU labels or list the resource but advertise no GPU of it yet (a device plugin starting
// or restarting). A node that is both cordoned and NotReady counts as cordoned.
func heldBackNodes(res corev1.ResourceName, selector map[string]string, nodes []corev1.Node) heldBack {
	var b heldBack
	seen := map[string]bool{}
	for i := range nodes {
		n := &nodes[i]
		if seen[n.Name] || !MatchesSelector(n, selector) {
			continue
		}
		seen[n.Name] = true
		alloc := Allocatable(n, res)
		switch {
		case alloc <= 0:
			if promisesGPUs(n, res) {
				b.unadvertised = append(b.unadvertised, n.Name)
			}
			continue
		case n.Spec.Unschedulable:
			b.cordoned = append(b.cordoned, n.Name)
		case !IsReady(n):
			b.notReady = append(b.notReady, n.Name)
		default:
			continue
		}
		b.capacity = max(b.capacity, alloc)
	}
	sort.Strings(b.cordoned)
	sort.Strings(b.notReady)
	sort.Strings(b.unadvertised)
	return b
}

// promisesGPUs reports whether a node without GPUs of the resource advertised is a GPU node of the
// resource whose device plugin has not reported yet: it lists the resource (at zero, as after a
// kubelet restart), or carries a label of the resource's vendor (nvidia.com/..., amd.com/..., set by
// the vendors' feature discovery), or only the platform's exalsius.ai/gpu-model label, with neither
// another vendor's labels nor its GPUs.
func promisesGPUs(n *corev1.Node, res corev1.ResourceName) bool {
	if _, ok := n.Status.Allocatable[res]; ok {
		return true
	}
	for _, v := range vendors {
		has := false
		for k := range n.Labels {
			if strings.HasPrefix(k, v.labelPrefix) {
				has = true
				break
			}
		}
		switch {
		case v.resource == res && has:
			return true
		case v.resource != res && (has || Allocatable(n, v.resource) > 0):
			return false
		}
	}
	_, ok := n.Labels[LabelGPUModel]
	return ok
}

func (b heldBack) empty() bool {
	return len(b.cordoned)+len(b.notReady)+len(b.unadvertised) == 0
}

// mayHold reports whether a held-back node may hold one replica of perReplica GPUs once it is back:
// a cordoned or NotReady node large enough, or a node whose GPUs are not advertised yet (their
// number is not known).
func (b heldBack) mayHold(perReplica int64) bool {
	return len(b.unadvertised) > 0 || (b.capacity >= perReplica && len(b.cordoned)+len(b.notReady) > 0)
}

// String names the held-back nodes by why, for example "2 matching nodes are cordoned (a, b)".
func (b heldBack) String() string {
	var parts []string
	add := func(names []string, one, many string) {
		switch len(names) {
		case 0:
		case 1:
			parts = append(parts, fmt.Sprintf("1 matching node %s (%s)", one, nodeList(names)))
		default:
			parts = append(parts, fmt.Sprintf("%d matching nodes %s (%s)", len(names), many, nodeList(names)))
		}
	}
	add(b.cordoned, "is cordoned", "are cordoned")
	add(b.notReady, "is NotReady", "are NotReady")
	add(b.unadvertised, "has not advertised its GPUs yet", "have not advertised their GPUs yet")
	return strings.Join(parts, ", ")
}

// nodeList names up to three nodes, then how many more.
func nodeList(names []string) string {
	const shown = 3
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

// freeNodes returns the schedulable, Ready nodes with the resource, sorted by name, with their free
// GPUs after pod requests.
func freeNodes(res corev1.ResourceName, nodes []corev1.Node, pods []corev1.Pod) []*freeNode {
	byName := map[string]*freeNode{}
	for i := range nodes {
		n := &nodes[i]
		if !IsSchedulable(n) {
			continue
		}
		alloc := Allocatable(n, res)
		if alloc <= 0 {
			continue
		}
		if _, dup := byName[n.Name]; dup {
			continue // the same node twice in a caller's merged list: keep the first
		}
		byName[n.Name] = &freeNode{node: n, free: alloc}
	}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || IsTerminal(p) {
			continue
		}
		if f := byName[p.Spec.NodeName]; f != nil {
			f.free = max(f.free-PodRequest(p, res), 0)
		}
	}
	out := make([]*freeNode, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].node.Name < out[j].node.Name })
	return out
}

// chargeReservations takes the reservations' GPUs from the free nodes by first-fit, recording on each
// node how many it took.
func chargeReservations(free []*freeNode, res corev1.ResourceName, self string, reservations []Reservation) {
	for i := range reservations {
		r := &reservations[i]
		rres, ok := ResourceNameFor(r.Vendor)
		if !ok || rres != res || r.GPUsPerReplica <= 0 || r.Replicas <= 0 || (self != "" && r.Key == self) {
			continue
		}
		for range r.Replicas {
			for _, f := range free {
				if r.Node != "" && f.node.Name != r.Node {
					continue
				}
				if f.free >= r.GPUsPerReplica && MatchesSelector(f.node, r.Selector) {
					f.free -= r.GPUsPerReplica
					f.reserved += r.GPUsPerReplica
					break
				}
			}
		}
	}
}

// place counts replicas on nodes: on the smallest single node that holds them all when there is one
// (so the workspace can be pinned to one node), else on the nodes with the most room first. The
// caller has checked that the free slots hold every replica.
func place(free []*freeNode, perReplica int64, replicas int32) []NodeReplicas {
	var best *freeNode
	for _, f := range free {
		if f.free/perReplica >= int64(replicas) && (best == nil || f.free < best.free) {
			best = f
		}
	}
	if best != nil {
		return []NodeReplicas{{Node: best.node.Name, Replicas: replicas}}
	}
	order := append([]*freeNode(nil), free...)
	sort.SliceStable(order, func(i, j int) bool { return order[i].free > order[j].free })
	var out []NodeReplicas
	left := int64(replicas)
	for _, f := range order {
		if left == 0 {
			break
		}
		n := min(f.free/perReplica, left)
		if n <= 0 {
			continue
		}
		out = append(out, NodeReplicas{Node: f.node.Name, Replicas: int32(n)})
		left -= n
	}
	return out
}
