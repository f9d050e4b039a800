package childcluster

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The informers keep only what GPU and resource arithmetic needs, so that the cache of a child with
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

// trimPod keeps a Pod's name, namespace, labels, node, node selector, phase and the resources of its
// containers, init containers (with their restart policy, for sidecars) and pod-level resources.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         p.Namespace,
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			Labels:            p.Labels,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{
			NodeName:       p.Spec.NodeName,
			NodeSelector:   p.Spec.NodeSelector,
			Containers:     trimContainers(p.Spec.Containers),
			InitContainers: trimContainers(p.Spec.InitContainers),
			Resources:      p.Spec.Resources,
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	return out, nil
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = corev1.Container{
			Name:          cs[i].Name,
			RestartPolicy: cs[i].RestartPolicy,
			Resources: corev1.ResourceRequirements{
				Requests: cs[i].Resources.Requests,
				Limits:   cs[i].Resources.Limits,
			},
		}
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

// podChanged reports whether two trimmed Pods differ in anything but their resourceVersion.
func podChanged(a, b *corev1.Pod) bool {
	return a.Status.Phase != b.Status.Phase ||
		(a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) ||
		!maps.Equal(a.Labels, b.Labels) ||
		!equality.Semantic.DeepEqual(a.Spec, b.Spec)
}
