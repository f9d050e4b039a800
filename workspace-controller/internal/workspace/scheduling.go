package workspace

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// pinToAdmittedNodes makes the replicas schedulable where the gate counted them. When the gate
// counted every replica on one node, the node's kubernetes.io/hostname label joins the selector the
// chart receives in `_exalsius.scheduling.nodeSelector`, which the published charts apply verbatim;
// the scheduler then cannot place them on GPUs the gate counted for another workspace. Replicas spread
// over several nodes cannot be pinned through a node selector; the gate counts one node whenever one
// holds them all. See docs/RECONCILIATION.md.
func (r *Reconciler) pinToAdmittedNodes(_ context.Context, s *scope) (stepResult, error) {
	pin := pinSelector(s)
	if len(pin) == 0 {
		return next, nil
	}
	sel := make(map[string]string, len(s.resources.NodeSelector)+len(pin))
	for k, v := range s.resources.NodeSelector {
		sel[k] = v
	}
	for k, v := range pin {
		sel[k] = v
	}
	s.resources.NodeSelector = sel
	return next, nil
}

// pinSelector is the selector entry that pins the workspace to its admitted node, or nil.
func pinSelector(s *scope) map[string]string {
	ad := s.ws.Status.Admission
	if ad == nil || ad.GPUsPerReplica == 0 || len(ad.Nodes) != 1 || ad.Nodes[0].Hostname == "" {
		return nil
	}
	return map[string]string{corev1.LabelHostname: ad.Nodes[0].Hostname}
}
