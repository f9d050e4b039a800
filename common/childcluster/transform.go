package childcluster

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/text"
)

// The watches keep only what GPU and resource arithmetic needs, so that the cache of a child with
// thousands of pods stays small and so that status-only churn (heartbeats, pod conditions) can be told
// apart from changes that matter.

// trimNode keeps a Node's name, labels, unschedulable flag, allocatable resources and the status of its
// Ready condition (without timestamps or messages, which heartbeats rewrite).
func trimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil // tombstones and the like pass through
	}
	out := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:              n.Name,
			UID:               n.UID,
			ResourceVersion:   n.ResourceVersion,
			Labels:            n.Labels,
			DeletionTimestamp: n.DeletionTimestamp,
		},
		Spec:   corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable},
		Status: corev1.NodeStatus{Allocatable: n.Status.Allocatable},
	}
	for i := range n.Status.Conditions {
		if c := n.Status.Conditions[i]; c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
			break
		}
	}
	return out, nil
}

// pod is what the cache keeps of a child's Pod: its name and namespace (for the store's key and
// for telling a workspace's own pods apart), its node, its phase, whether it is Ready, and its
// effective requests, one quantity per resource, computed once when the Pod arrives. Containers,
// labels, annotations, the other conditions and the rest are dropped: a pod costs a few hundred bytes in the cache instead of the
// kilobytes a Pod struct (even a trimmed one) takes. Pods rebuilds corev1.Pods from it for the GPU
// and resource arithmetic (common/gpu), with one container holding the effective requests.
type pod struct {
	metav1.ObjectMeta // Name and Namespace only
	NodeName          string
	Phase             corev1.PodPhase
	// Ready is the pod's Ready condition: a change is a change of the release whose readiness a
	// deploying workspace waits for, so it is signalled too (it is not counted).
	Ready bool
	// Unschedulable is set while the scheduler reports the pod Unschedulable (PodScheduled False,
	// reason Unschedulable) and the pod is not being deleted: what a deploying workspace reports as
	// the child's refusal once it lasts, read from the cache instead of a listing of the child.
	Unschedulable *unschedulable
	// Requests are the pod's effective requests as the scheduler counts them (gpu.PodRequestMilli:
	// pod-level resources, app containers, sidecars, init containers and the pod's overhead), in
	// thousandths. They are computed from the whole Pod when it arrives, so the fields the computation
	// reads (containers, init containers and their restart policy, spec.resources, spec.overhead) need
	// not be kept.
	Requests corev1.ResourceList
}

// unschedulable is what the cache keeps of a pod's PodScheduled=False/Unschedulable condition: when it
// became so and the scheduler's message, cut to MaxConditionMessageBytes.
type unschedulable struct {
	Since   metav1.Time
	Message string
}

// MaxConditionMessageBytes bounds the scheduler's message the cache keeps for an Unschedulable pod
// (a summary over thousands of nodes can be long; a refusal repeats at most this much of it).
const MaxConditionMessageBytes = 512

// GetObjectKind implements runtime.Object.
func (p *pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (p *pod) DeepCopyObject() runtime.Object {
	out := &pod{NodeName: p.NodeName, Phase: p.Phase, Ready: p.Ready, Requests: p.Requests.DeepCopy()}
	if p.Unschedulable != nil {
		u := *p.Unschedulable
		out.Unschedulable = &u
	}
	out.Name, out.Namespace = p.Name, p.Namespace
	return out
}

// trimPod turns a Pod into a pod, keeping only what the arithmetic needs.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // tombstones and the like pass through
	}
	out := &pod{NodeName: p.Spec.NodeName, Phase: p.Status.Phase, Ready: podReady(p), Requests: effectiveRequests(p),
		Unschedulable: podUnschedulable(p)}
	out.Name, out.Namespace = p.Name, p.Namespace
	return out, nil
}

// podUnschedulable is what the cache keeps of a pod the scheduler reports Unschedulable, or nil (also
// for a pod being deleted: its refusal no longer matters).
func podUnschedulable(p *corev1.Pod) *unschedulable {
	if p.DeletionTimestamp != nil {
		return nil
	}
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return &unschedulable{Since: c.LastTransitionTime, Message: text.Truncate(c.Message, MaxConditionMessageBytes)}
		}
	}
	return nil
}

// effectiveRequests returns, for every resource a pod's containers, pod-level resources or overhead
// name, its effective request in thousandths (nil when none).
func effectiveRequests(p *corev1.Pod) corev1.ResourceList {
	names := map[corev1.ResourceName]struct{}{}
	add := func(l corev1.ResourceList) {
		for n := range l {
			names[n] = struct{}{}
		}
	}
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			add(cs[i].Resources.Requests)
			add(cs[i].Resources.Limits)
		}
	}
	if p.Spec.Resources != nil {
		add(p.Spec.Resources.Requests)
	}
	add(p.Spec.Overhead)
	if len(names) == 0 {
		return nil
	}
	out := make(corev1.ResourceList, len(names))
	for n := range names {
		out[n] = *resource.NewMilliQuantity(gpu.PodRequestMilli(p, n), resource.DecimalSI)
	}
	return out
}

// asPod rebuilds a corev1.Pod from a pod: one container holds the effective requests, which gives
// the same request of every resource under common/gpu's rules as the original Pod did.
// An Unschedulable pod gets its PodScheduled condition back (time, reason and message).
func (p *pod) asPod() corev1.Pod {
	out := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		Spec: corev1.PodSpec{NodeName: p.NodeName, Containers: []corev1.Container{{
			Name: "effective-requests", Resources: corev1.ResourceRequirements{Requests: p.Requests}}}},
		Status: corev1.PodStatus{Phase: p.Phase},
	}
	if u := p.Unschedulable; u != nil {
		out.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, LastTransitionTime: u.Since, Message: u.Message}}
	}
	return out
}

// nodeChanged reports whether two trimmed Nodes differ in anything but their resourceVersion.
func nodeChanged(a, b *corev1.Node) bool {
	return a.Spec.Unschedulable != b.Spec.Unschedulable ||
		(a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) ||
		!maps.Equal(a.Labels, b.Labels) ||
		!equality.Semantic.DeepEqual(a.Status.Allocatable, b.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(a.Status.Conditions, b.Status.Conditions)
}

// podReady reports whether a Pod's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podChanged reports whether two pods differ in what is counted, in their readiness, or in whether
// (and since when) the scheduler reports them Unschedulable. A new message alone is not a change: the
// scheduler rewrites it on every attempt, and the cache keeps the newest for the next read.
func podChanged(a, b *pod) bool {
	return a.Phase != b.Phase || a.NodeName != b.NodeName || a.Ready != b.Ready ||
		(a.Unschedulable == nil) != (b.Unschedulable == nil) ||
		(a.Unschedulable != nil && !a.Unschedulable.Since.Equal(&b.Unschedulable.Since)) ||
		!equality.Semantic.DeepEqual(a.Requests, b.Requests)
}
