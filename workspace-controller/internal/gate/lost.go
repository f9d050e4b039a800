package gate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
)

// ClusterRecreated reports whether an admission was granted on an earlier ClusterDeployment of the
// same name: its recorded UID differs from the current one. An admission without a UID (recorded
// before the UID was) or an unknown current UID says nothing.
func ClusterRecreated(ad *workspacesv1.Admission, uid types.UID) bool {
	return ad != nil && ad.ClusterUID != "" && uid != "" && ad.ClusterUID != uid
}

// ChildReplaced reports whether an admission was granted on another child cluster than the one its
// ClusterDeployment reaches now: the recorded identity (the kube-system namespace's UID) differs from
// the current one, as when a hosted control plane or a cluster behind an adopted kubeconfig was built
// anew. An admission without an identity, or an unknown current identity, says nothing.
func ChildReplaced(ad *workspacesv1.Admission, id types.UID) bool {
	return ad != nil && ad.ClusterIdentity != "" && id != "" && ad.ClusterIdentity != id
}

// Lost says why an admission no longer holds on its cluster's nodes as they are now, or "" when it
// holds. An admitted node is lost when:
//
//   - it is gone: no node of its name, or its kubernetes.io/hostname label is no longer the one the
//     replicas are pinned to (a replaced node);
//   - no pod of the release (namespace releaseNamespace) is bound to it, and it cannot take them: it is
//     cordoned, NotReady, allocates fewer GPUs than the admission counted on it, or the pods bound to
//     it have taken the GPUs counted for the workspace (a pod that did not pass the gate, or a late
//     pod of a release being uninstalled, whose reservation lapsed): whoever holds the GPUs on the
//     child keeps them, and the workspace that cannot get them is gated again.
//
// A node that still runs one of the release's pods holds, cordoned (a drain) or NotReady (a kubelet
// restart) alike: the workspace keeps running there until the pod goes. pods are the child's pods;
// terminal ones are ignored. An admission without GPUs counts no node and is never lost here.
func Lost(ad *workspacesv1.Admission, releaseNamespace string, nodes []corev1.Node, pods []corev1.Pod) string {
	if ad == nil || ad.GPUsPerReplica == 0 || len(ad.Nodes) == 0 {
		return ""
	}
	return newLostView(nodes, pods).lost(ad, releaseNamespace)
}

// lostView is a child's nodes and pods read once for many Lost questions (the reservations of one
// gate decision ask it for every admitted workspace on the cluster).
type lostView struct {
	byName map[string]*corev1.Node
	// bound: per namespace, the nodes a non-terminal pod of it is bound to.
	bound map[string]map[string]bool
	pods  []corev1.Pod
	// used: per GPU resource, what the non-terminal pods bound to each node request (filled per
	// resource on first use).
	used map[corev1.ResourceName]map[string]int64
}

func newLostView(nodes []corev1.Node, pods []corev1.Pod) *lostView {
	v := &lostView{byName: make(map[string]*corev1.Node, len(nodes)), bound: map[string]map[string]bool{}, pods: pods,
		used: map[corev1.ResourceName]map[string]int64{}}
	for i := range nodes {
		v.byName[nodes[i].Name] = &nodes[i]
	}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || gpu.IsTerminal(p) {
			continue
		}
		if v.bound[p.Namespace] == nil {
			v.bound[p.Namespace] = map[string]bool{}
		}
		v.bound[p.Namespace][p.Spec.NodeName] = true
	}
	return v
}

func (v *lostView) usedOf(res corev1.ResourceName) map[string]int64 {
	if u, ok := v.used[res]; ok {
		return u
	}
	u := map[string]int64{}
	for i := range v.pods {
		p := &v.pods[i]
		if p.Spec.NodeName != "" && !gpu.IsTerminal(p) {
			u[p.Spec.NodeName] += gpu.PodRequest(p, res)
		}
	}
	v.used[res] = u
	return u
}

// lost is Lost on the view.
func (v *lostView) lost(ad *workspacesv1.Admission, releaseNamespace string) string {
	if ad == nil || ad.GPUsPerReplica == 0 || len(ad.Nodes) == 0 {
		return ""
	}
	res := corev1.ResourceName(ad.GPUResourceName)
	bound := v.bound[releaseNamespace]
	for _, an := range ad.Nodes {
		n := v.byName[an.Name]
		switch {
		case n == nil:
			return fmt.Sprintf("admitted node %s is gone", an.Name)
		case an.Hostname != "" && n.Labels[corev1.LabelHostname] != an.Hostname:
			return fmt.Sprintf("admitted node %s is gone (its hostname is no longer %s)", an.Name, an.Hostname)
		case bound[an.Name]:
			continue
		case n.Spec.Unschedulable:
			return fmt.Sprintf("admitted node %s is cordoned and runs no pod of the workspace", an.Name)
		case !gpu.IsReady(n):
			return fmt.Sprintf("admitted node %s is NotReady and runs no pod of the workspace", an.Name)
		}
		want, have := ad.GPUsPerReplica*int64(an.Replicas), gpu.Allocatable(n, res)
		if have < want {
			return fmt.Sprintf("admitted node %s allocates %d %s, fewer than the %d admitted there", an.Name, have, ad.GPUResourceName, want)
		}
		if free := have - v.usedOf(res)[an.Name]; free < want {
			return fmt.Sprintf("the %d %s admitted on node %s are taken by other pods (%d free there)", want, ad.GPUResourceName, an.Name, max(free, 0))
		}
	}
	return ""
}
