// Package childtest creates the Nodes and Pods of GPU clusters on test API servers, for the tests of
// the packages that watch child clusters. A test API server runs no kubelet, scheduler or controller:
// Nodes get their status written here, and Pods are bound by setting spec.nodeName.
package childtest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Node describes a test node.
type Node struct {
	Name          string
	Labels        map[string]string
	Allocatable   corev1.ResourceList
	NotReady      bool
	Unschedulable bool
}

// GPUs returns a resource list of n units of a GPU resource plus some CPU and memory.
func GPUs(resourceName corev1.ResourceName, n int64) corev1.ResourceList {
	return corev1.ResourceList{
		resourceName:          *resource.NewQuantity(n, resource.DecimalSI),
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}

// Requests returns pod requests of n units of a GPU resource and a little CPU.
func Requests(resourceName corev1.ResourceName, n int64) corev1.ResourceList {
	return corev1.ResourceList{
		resourceName:       *resource.NewQuantity(n, resource.DecimalSI),
		corev1.ResourceCPU: resource.MustParse("100m"),
	}
}

// CreateNode creates the node and writes its status (allocatable, capacity and the Ready condition).
func CreateNode(ctx context.Context, c client.Client, n Node) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels},
		Spec:       corev1.NodeSpec{Unschedulable: n.Unschedulable},
	}
	if err := c.Create(ctx, node); err != nil {
		return fmt.Errorf("creating node %s: %w", n.Name, err)
	}
	return SetNodeStatus(ctx, c, n)
}

// SetNodeStatus rewrites a node's allocatable, capacity and Ready condition.
func SetNodeStatus(ctx context.Context, c client.Client, n Node) error {
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: n.Name}, node); err != nil {
		return fmt.Errorf("reading node %s: %w", n.Name, err)
	}
	status := corev1.ConditionTrue
	if n.NotReady {
		status = corev1.ConditionFalse
	}
	node.Status.Allocatable = n.Allocatable
	node.Status.Capacity = n.Allocatable
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: status, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	if err := c.Status().Update(ctx, node); err != nil {
		return fmt.Errorf("writing status of node %s: %w", n.Name, err)
	}
	return nil
}

// DeleteNode deletes a node.
func DeleteNode(ctx context.Context, c client.Client, name string) error {
	err := c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	return nil
}

// Pod describes a test pod bound to a node.
type Pod struct {
	Namespace string
	Name      string
	Node      string
	Requests  corev1.ResourceList
	Phase     corev1.PodPhase
	// NotReady leaves a Running pod without its Ready condition True (a kubelet reports a running pod
	// without readiness probes Ready).
	NotReady bool
}

// CreatePod creates the namespace when needed, then a pod bound to its node, and sets its phase
// (Running when empty).
func CreatePod(ctx context.Context, c client.Client, p Pod) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", p.Namespace, err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		Spec: corev1.PodSpec{
			NodeName: p.Node,
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.example/test:1",
				Resources: corev1.ResourceRequirements{Requests: p.Requests, Limits: extendedOnly(p.Requests)},
			}},
		},
	}
	if err := c.Create(ctx, pod); err != nil {
		return fmt.Errorf("creating pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	phase := p.Phase
	if phase == "" {
		phase = corev1.PodRunning
	}
	pod.Status.Phase = phase
	pod.Status.Conditions = readyCondition(phase == corev1.PodRunning && !p.NotReady)
	if err := c.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("writing status of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// SetPodReady sets a pod's Ready condition, as a kubelet does when its readiness changes.
func SetPodReady(ctx context.Context, c client.Client, namespace, name string, ready bool) error {
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		return fmt.Errorf("reading pod %s/%s: %w", namespace, name, err)
	}
	pod.Status.Conditions = readyCondition(ready)
	if err := c.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("writing status of pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

func readyCondition(ready bool) []corev1.PodCondition {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
}

// SetPodPhase changes a pod's phase.
func SetPodPhase(ctx context.Context, c client.Client, namespace, name string, phase corev1.PodPhase) error {
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		return fmt.Errorf("reading pod %s/%s: %w", namespace, name, err)
	}
	pod.Status.Phase = phase
	if err := c.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("writing status of pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// extendedOnly returns the requests of extended resources (with a "/" in the name), which the API
// server requires as limits too.
func extendedOnly(reqs corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range reqs {
		for _, ch := range string(k) {
			if ch == '/' {
				out[k] = v
				break
			}
		}
	}
	return out
}
