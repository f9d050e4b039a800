package workspace

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
)

// clusterGone is the finding of "cluster exists" when the workspace's ClusterDeployment does not
// exist. Since when it is gone is the lastTransitionTime of ClusterDeploymentResolved
// False/ClusterDeploymentNotFound, which the status carries already (a condition False for another
// reason is set anew, so that its time is the time the cluster went).
//
// Within ClusterGoneGrace nothing is given up: a ClusterDeployment its Colony deletes and makes again
// comes back within it, and the workspace keeps its admission (which the GPU gate and the
// WorkspaceQuota count) and, when placement chose its cluster, its placement. Past it the cluster is
// gone for good (releaseGoneCluster): what the workspace had there is removed, the admission is
// released, and a placed workspace is placed again.
func (r *Reconciler) clusterGone(ctx context.Context, s *scope) (*finding, error) {
	since := s.now
	if c := meta.FindStatusCondition(s.prev.Conditions, workspacesv1.ClusterDeploymentResolvedCondition); c != nil && c.Status == metav1.ConditionFalse {
		if c.Reason == workspacesv1.ReasonClusterDeploymentNotFound {
			since = c.LastTransitionTime.Time
		} else {
			meta.RemoveStatusCondition(&s.ws.Status.Conditions, workspacesv1.ClusterDeploymentResolvedCondition)
		}
	}
	field := "spec.clusterDeploymentRef"
	if gate.PlacesItself(s.ws) {
		field = "status.placement"
	}
	f := &finding{condition: workspacesv1.ClusterDeploymentResolvedCondition, reason: workspacesv1.ReasonClusterDeploymentNotFound,
		message: fmt.Sprintf("%s: ClusterDeployment %s not found; waiting for it", field, s.cdKey)}
	holds := s.ws.Status.Admission != nil || s.ws.Status.ServiceSetName != "" || gate.PlacesItself(s.ws)
	if !holds {
		return f, nil
	}
	if left := r.Options.ClusterGoneGrace - s.now.Sub(since); left > 0 {
		// The message is the same on every pass (no countdown): a status write only on a change.
		f.message += fmt.Sprintf("; if it is not back within %s of %s, the workspace gives up what it holds there",
			r.Options.ClusterGoneGrace, since.UTC().Format(time.RFC3339))
		if gate.PlacesItself(s.ws) {
			f.message += " and is placed again"
		}
		f.retry = left
		return f, nil
	}
	return r.releaseGoneCluster(ctx, s, f)
}

// releaseGoneCluster gives up what a workspace holds on a ClusterDeployment gone for longer than
// ClusterGoneGrace, as its deletion does when the cluster is gone: its routes, its ServiceSet (with
// KCM's finalizer removed, since KCM cannot uninstall from a cluster that is gone, and its name,
// `<cd>-ws-<name>`, must not be taken over by a ClusterDeployment of the same name made later) and
// its values Secrets. Once the ServiceSet is gone, the admission is released (nothing then counts
// it: the gate and the WorkspaceQuotas count an admission, or a ServiceSet, and neither is left), and
// a workspace placed by placement loses its placement, so that the "placement" step chooses anew in
// the next pass. A workspace that names its ClusterDeployment stays Pending until it is back, and is
// then gated again.
func (r *Reconciler) releaseGoneCluster(ctx context.Context, s *scope, f *finding) (*finding, error) {
	if done, err := r.removeRoutes(ctx, s, nil, true); err != nil || !done {
		f.message += "; removing its routes"
		f.retry = r.routingRetry()
		return f, err
	}
	gone, err := r.deleteServiceSet(ctx, s, true)
	if err != nil {
		return nil, err
	}
	if !gone {
		f.message += fmt.Sprintf("; it has been gone for more than %s: deleting ServiceSet %s/%s", r.Options.ClusterGoneGrace,
			s.cdKey.Namespace, s.serviceSetNameForDelete())
		f.retry = r.Options.UnreachableRetry // the ServiceSet's deletion brings the workspace back earlier
		return f, nil
	}
	if err := r.removeValuesSecrets(ctx, s); err != nil {
		return nil, err
	}
	r.Children.Forget(s.cdKey)
	s.ws.Status.Admission = nil
	s.ws.Status.ServiceSetName = ""
	s.ws.Status.ReleaseNamespace = "" // placed again, it takes the form its new cluster gives
	f.message += fmt.Sprintf("; it has been gone for more than %s: the admission is released", r.Options.ClusterGoneGrace)
	if gate.PlacesItself(s.ws) && s.ws.Status.Placement != nil {
		s.ws.Status.Placement = nil
		r.gateFor().Forget(s.key())
		s.setCondition(workspacesv1.PlacedCondition, metav1.ConditionFalse, workspacesv1.ReasonClusterDeploymentNotFound,
			fmt.Sprintf("ClusterDeployment %s is gone; the workspace is placed again", s.cdKey))
		f.message += " and the workspace is placed again"
		f.retry = staleRetry // the next pass places it
	}
	return f, nil
}
