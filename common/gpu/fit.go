package gpu

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Fit says how many replicas of a per-replica resource request fit on a cluster's nodes now.
type Fit struct {
	// MatchingNodes is the number of schedulable, Ready nodes carrying the selector.
	MatchingNodes int32
	// FittingReplicas is how many replicas fit, each on one node, at most the replicas asked for.
	FittingReplicas int32
	// Limiting names the resource that ran out first on the most nodes, when not every replica fits.
	Limiting corev1.ResourceName
	// Message explains the result with numbers.
	Message string
}

// Fits reports whether every replica fits.
func (f Fit) Fits(replicas int32) bool { return f.FittingReplicas >= max(replicas, 1) }

// FitResources packs replicas of perReplica (cpu, memory, ephemeral-storage or any other resource,
// GPUs included) onto the schedulable, Ready nodes carrying the selector. A node's free amount of a
// resource is its allocatable minus the effective requests (see PodRequestMilli) of the non-terminal
// pods bound to it; it holds as many replicas as its scarcest requested resource allows. Zero or
// negative quantities in perReplica are ignored; an empty perReplica fits on any matching node.
// Replicas below 1 count as 1.
func FitResources(selector map[string]string, perReplica corev1.ResourceList, replicas int32, nodes []corev1.Node, pods []corev1.Pod) Fit {
	replicas = max(replicas, 1)
	names := make([]corev1.ResourceName, 0, len(perReplica))
	want := map[corev1.ResourceName]int64{}
	for name, q := range perReplica {
		if v := q.MilliValue(); v > 0 {
			names = append(names, name)
			want[name] = v
		}
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })

	free := map[string]map[corev1.ResourceName]int64{}
	var order []string
	for i := range nodes {
		n := &nodes[i]
		if !IsSchedulable(n) || !MatchesSelector(n, selector) {
			continue
		}
		if _, dup := free[n.Name]; dup {
			continue
		}
		m := make(map[corev1.ResourceName]int64, len(names))
		for _, name := range names {
			q := n.Status.Allocatable[name]
			m[name] = nonNegative(q.MilliValue())
		}
		free[n.Name] = m
		order = append(order, n.Name)
	}
	f := Fit{MatchingNodes: int32(len(order))}
	if len(order) == 0 {
		f.Message = fmt.Sprintf("no schedulable, Ready node has selector {%s}", selectorString(selector))
		return f
	}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || IsTerminal(p) {
			continue
		}
		m := free[p.Spec.NodeName]
		if m == nil {
			continue
		}
		for _, name := range names {
			m[name] = max(m[name]-PodRequestMilli(p, name), 0)
		}
	}
	var slots int64
	short := map[corev1.ResourceName]int{}
	for _, node := range order {
		nodeSlots := int64(replicas)
		var scarce corev1.ResourceName
		for _, name := range names {
			if s := free[node][name] / want[name]; s < nodeSlots {
				nodeSlots, scarce = s, name
			}
		}
		if scarce != "" {
			short[scarce]++
		}
		slots = saturatingAdd(slots, nodeSlots)
	}
	f.FittingReplicas = int32(min(slots, int64(replicas)))
	if f.FittingReplicas < replicas {
		best := 0
		for _, name := range names {
			if short[name] > best {
				best, f.Limiting = short[name], name
			}
		}
	}
	f.Message = fmt.Sprintf("%d of %d replica(s) fit on %d matching node(s) with selector {%s}", f.FittingReplicas, replicas, f.MatchingNodes, selectorString(selector))
	if f.Limiting != "" {
		f.Message += fmt.Sprintf("; %s runs out first", f.Limiting)
	}
	return f
}
