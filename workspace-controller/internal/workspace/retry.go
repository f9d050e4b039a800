package workspace

import (
	corev1 "k8s.io/api/core/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// retryRequest returns the value of the workspace's retry annotation
// (workspacesv1.RetryRequestedAtAnnotation) and whether it asks a retry not handled yet: it is set
// and differs from status.lastHandledRetryAt, as Flux's requestedAt / lastHandledReconcileAt pair.
func retryRequest(ws *workspacesv1.WorkspaceDeployment) (string, bool) {
	v := ws.Annotations[workspacesv1.RetryRequestedAtAnnotation]
	return v, v != "" && v != ws.Status.LastHandledRetryAt
}

// retry handles a retry request at the start of a pass. A Failed workspace leaves Failed: the pass
// starts from the status a newly created workspace has (Pending, no failure context), so it is
// resolved, gated and admitted again, and "serviceset" starts a new rollout (the deployTimeout counts
// from it). The request is recorded in status.lastHandledRetryAt whatever the phase, so a value is
// handled once; a request on a workspace that is not Failed does nothing more. The steps decide
// again: a cause that still holds (an invalid class, a release k0rdent still reports failed once the
// settle time has passed) fails the workspace again.
func (r *Reconciler) retry(s *scope) {
	v, ok := retryRequest(s.ws)
	if !ok {
		return
	}
	s.ws.Status.LastHandledRetryAt = v
	if s.ws.Status.Phase != workspacesv1.PhaseFailed {
		return
	}
	for _, st := range []*workspacesv1.WorkspaceDeploymentStatus{&s.prev, &s.ws.Status} {
		st.Phase = workspacesv1.PhasePending
		st.FailureContext = nil
	}
	s.retrying = true
	r.Recorder.Eventf(s.ws, nil, corev1.EventTypeNormal, workspacesv1.ReasonRetrying, "Retry",
		"retry requested (%s=%s): the workspace is admitted and deployed again", workspacesv1.RetryRequestedAtAnnotation, v)
}
