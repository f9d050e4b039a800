package childns

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/common/gpu"
)

// maxNamedPods bounds the pods a message names.
const maxNamedPods = 5

// namedPods lists pod names for a message, at most maxNamedPods of them: "a, b and 3 more".
func namedPods(names []string) string {
	if len(names) <= maxNamedPods {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamedPods], ", "), len(names)-maxNamedPods)
}

// PodsReadiness is what the release's pods in ws-<name> show of the release running: the pods that
// are not finished and not being deleted, and those of them that are not Ready.
type PodsReadiness struct {
	// Pods counts the release's pods that are not finished and not being deleted.
	Pods int
	// NotReady names those of them that do not run: their Ready condition is not True, or they are
	// bound to a node that no longer exists (a replaced machine's pod, Ready as its kubelet last said,
	// until the child's pod garbage collector removes it). Sorted.
	NotReady []string
	// OnGoneNodes names those of NotReady bound to a node that no longer exists, sorted.
	OnGoneNodes []string
}

// Ready reports whether the release's pods run: every pod counted is Ready, and, when needPod, there
// is at least one.
func (p PodsReadiness) Ready(needPod bool) bool {
	return len(p.NotReady) == 0 && (p.Pods > 0 || !needPod)
}

// String says what is not ready yet: "no pod of the release exists yet", or "2 of 3 pod(s) are not
// Ready yet (nb-0, nb-1)", at most five names.
func (p PodsReadiness) String() string {
	if p.Pods == 0 {
		return "no pod of the release exists on the child yet"
	}
	msg := fmt.Sprintf("%d of %d pod(s) of the release are not Ready yet (%s)", len(p.NotReady), p.Pods, namedPods(p.NotReady))
	if len(p.OnGoneNodes) > 0 {
		msg += fmt.Sprintf("; %s on a node that no longer exists", namedPods(p.OnGoneNodes))
	}
	return msg
}

// PodsReady reads the release's pods in namespace (one List), and, when a counted pod is Ready and
// bound, the child's nodes (a second List). Finished pods (a Job's, Succeeded or Failed) and pods being
// deleted (a rolling update's old ones) do not count; a Ready pod bound to a node that no longer exists
// counts as not Ready.
func (n Namespaces) PodsReady(ctx context.Context, namespace string) (PodsReadiness, error) {
	var pods corev1.PodList
	if err := n.Child.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return PodsReadiness{}, fmt.Errorf("listing pods in namespace %s on the child of %s: %w", namespace, n.Cluster, err)
	}
	var nodes map[string]bool
	if needsNodes(pods.Items) {
		var list corev1.NodeList
		if err := n.Child.List(ctx, &list); err != nil {
			return PodsReadiness{}, fmt.Errorf("listing the nodes of the child of %s: %w", n.Cluster, err)
		}
		nodes = make(map[string]bool, len(list.Items))
		for i := range list.Items {
			nodes[list.Items[i].Name] = true
		}
	}
	return podsReadiness(pods.Items, nodes), nil
}

// counted reports whether a pod counts in PodsReadiness: not finished and not being deleted.
func counted(p *corev1.Pod) bool {
	return !gpu.IsTerminal(p) && p.DeletionTimestamp.IsZero()
}

// needsNodes reports whether deciding the pods' readiness needs the child's nodes: a counted pod is
// Ready and bound.
func needsNodes(pods []corev1.Pod) bool {
	for i := range pods {
		if p := &pods[i]; counted(p) && p.Spec.NodeName != "" && podReady(p) {
			return true
		}
	}
	return false
}

// podsReadiness decides the readiness of pods; nodes holds the names of the child's nodes (nil when
// needsNodes said none is needed).
func podsReadiness(pods []corev1.Pod, nodes map[string]bool) PodsReadiness {
	var out PodsReadiness
	for i := range pods {
		p := &pods[i]
		if !counted(p) {
			continue
		}
		out.Pods++
		switch {
		case !podReady(p):
			out.NotReady = append(out.NotReady, p.Name)
		case p.Spec.NodeName != "" && !nodes[p.Spec.NodeName]:
			out.NotReady = append(out.NotReady, p.Name)
			out.OnGoneNodes = append(out.OnGoneNodes, p.Name)
		}
	}
	sort.Strings(out.NotReady)
	sort.Strings(out.OnGoneNodes)
	return out
}

// podReady reports whether the pod's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
