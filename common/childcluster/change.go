package childcluster

import (
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxChangedNamespaces bounds the namespaces a notification names: past it, it says that anything
// may have changed (Change.All), which costs a subscriber a look at every workspace of the cluster
// and keeps a storm of pod changes from growing the pending notifications without bound.
const maxChangedNamespaces = 256

// Change says what changed on a ClusterDeployment's child since the subscriber was last told about
// it. Changes of one child within the debounce window, and those that wait for a slow subscriber,
// are folded into one Change.
type Change struct {
	// Cluster is the ClusterDeployment.
	Cluster types.NamespacedName
	// All: the connection was made, failed, became unreachable or reachable again, or a relisting
	// (or more than 256 namespaces) changed the Pods: any of the child's objects may have changed.
	All bool
	// Reach: the child became unreachable, or reachable again, since the connection was made (its
	// probe's verdict changed); it comes with All.
	Reach bool
	// Nodes: a Node came, went or changed in what is counted (capacity, readiness, schedulability,
	// labels).
	Nodes bool
	// Namespaces holds the namespaces of the Pods that came, went or changed, sorted; empty with All.
	// With Options.WatchWorkloadEvents it also holds those of the workload Events that did
	// (WorkloadEventReasons): what a namespace's pods are refused is told as a change of its Pods.
	Namespaces []string
	// Owned holds the namespaces in which an object the controller keeps on the child
	// (Options.OwnedSelector: the namespace itself, or its ResourceQuotas and NetworkPolicies)
	// changed or went, sorted; empty with All.
	Owned []string
}

// OwnedIn reports whether an owned object of a namespace (the namespace itself, its quotas or its
// network policies) may have changed or gone.
func (c Change) OwnedIn(namespace string) bool {
	if c.All {
		return true
	}
	_, found := slices.BinarySearch(c.Owned, namespace)
	return found
}

// PodsOf reports whether the Pods of a namespace (or its workload Events, when watched) may have
// changed.
func (c Change) PodsOf(namespace string) bool {
	if c.All {
		return true
	}
	_, found := slices.BinarySearch(c.Namespaces, namespace)
	return found
}

// delta is a Change being folded, before it is told.
type delta struct {
	all, nodes, reach bool
	namespaces        map[string]struct{}
	owned             map[string]struct{}
}

var (
	deltaAll   = delta{all: true}
	deltaNodes = delta{nodes: true}
	// deltaReach is the change of the child's reachability.
	deltaReach = delta{all: true, reach: true}
)

// podsIn is the delta of a Pod change in a namespace.
func podsIn(namespace string) delta {
	return delta{namespaces: map[string]struct{}{namespace: {}}}
}

// ownedIn is the delta of a change of an owned object in a namespace.
func ownedIn(namespace string) delta {
	return delta{owned: map[string]struct{}{namespace: {}}}
}

// merge folds o into d.
func (d *delta) merge(o delta) {
	d.all = d.all || o.all
	d.nodes = d.nodes || o.nodes
	d.reach = d.reach || o.reach
	if !d.all {
		d.namespaces = union(d.namespaces, o.namespaces)
		d.owned = union(d.owned, o.owned)
		d.all = len(d.namespaces) > maxChangedNamespaces || len(d.owned) > maxChangedNamespaces
	}
	if d.all {
		d.namespaces, d.owned = nil, nil
	}
}

// union adds the namespaces of o to d, making d when needed.
func union(d, o map[string]struct{}) map[string]struct{} {
	for ns := range o {
		if d == nil {
			d = make(map[string]struct{}, len(o))
		}
		d[ns] = struct{}{}
	}
	return d
}

// change returns the Change of the cluster that d describes.
func (d delta) change(key types.NamespacedName) Change {
	c := Change{Cluster: key, All: d.all, Nodes: d.nodes || d.all, Reach: d.reach}
	if !d.all {
		c.Namespaces, c.Owned = sorted(d.namespaces), sorted(d.owned)
	}
	return c
}

// sorted returns the namespaces of a set, sorted; nil for none.
func sorted(set map[string]struct{}) []string {
	if len(set) == 0 {
		return nil
	}
	out := make([]string, 0, len(set))
	for ns := range set {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// ChangeEvent is the object Cache.Source hands its handler for a notification: the ClusterDeployment
// (its kind, namespace and name) and what changed on its child (ChangeOf).
type ChangeEvent struct {
	metav1.PartialObjectMetadata
	Change Change
}

// DeepCopyObject implements runtime.Object.
func (e *ChangeEvent) DeepCopyObject() runtime.Object {
	out := &ChangeEvent{Change: e.Change}
	e.PartialObjectMetadata.DeepCopyInto(&out.PartialObjectMetadata)
	out.Change.Namespaces = slices.Clone(e.Change.Namespaces)
	out.Change.Owned = slices.Clone(e.Change.Owned)
	return out
}

// ChangeOf returns what changed on the child of the ClusterDeployment a Cache.Source event names; for
// any other object, a Change that says anything may have changed.
func ChangeOf(o client.Object) Change {
	if e, ok := o.(*ChangeEvent); ok {
		return e.Change
	}
	return Change{Cluster: client.ObjectKeyFromObject(o), All: true, Nodes: true}
}
