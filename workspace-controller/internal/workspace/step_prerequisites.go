package workspace

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/prerequisites"
)

// prerequisites makes sure every prerequisite of the class is deployed on the cluster, either by a
// service the Colony put on the ClusterDeployment or by the shared per-cluster ServiceSet
// (docs/RECONCILIATION.md, step 9; internal/prerequisites), and turns what it found into
// PrerequisitesMet and the pass's verdict.
func (r *Reconciler) prerequisites(ctx context.Context, s *scope) (stepResult, error) {
	if len(s.class.Spec.Prerequisites) == 0 {
		s.ws.Status.Prerequisites = nil
		s.setTrue(workspacesv1.PrerequisitesMetCondition, workspacesv1.ReasonNoPrerequisites, "the class has no prerequisites")
		return next, nil
	}
	in := prerequisites.Installer{Client: r.Client, ValuesDigest: valuesDigest}
	res, err := in.Ensure(ctx, prerequisites.Request{
		Workspace: s.ws, Class: s.class, Cluster: s.cd, ClusterKey: s.cdKey, ClusterOwner: clusterOwnerRef(s.cd),
	})
	if err != nil {
		return stop, err
	}
	s.ws.Status.Prerequisites = res.Statuses
	deployedBefore := s.ws.Status.ServiceSetName != ""
	switch {
	case len(res.Conflicts) > 0:
		s.failed(workspacesv1.PrerequisitesMetCondition, res.ConflictReason, strings.Join(res.Conflicts, "; "))
		return stop, nil
	case len(res.Failed) > 0 && !deployedBefore:
		s.failed(workspacesv1.PrerequisitesMetCondition, workspacesv1.ReasonPrerequisiteFailed, "prerequisite failed: "+strings.Join(res.Failed, "; "))
		return stop, nil
	case len(res.Failed)+len(res.Pending) > 0 && deployedBefore:
		// The workspace is installed already: report, but do not take it down.
		s.setCondition(workspacesv1.PrerequisitesMetCondition, metav1.ConditionFalse, workspacesv1.ReasonPrerequisitesDeploying,
			"prerequisites not deployed: "+strings.Join(append(res.Failed, res.Pending...), "; "))
		return next, nil
	case len(res.Pending) > 0:
		return r.waitForPrerequisites(s, res.Pending), nil
	}
	s.setTrue(workspacesv1.PrerequisitesMetCondition, workspacesv1.ReasonPrerequisitesMet, "every prerequisite is deployed")
	return next, nil
}

// waitForPrerequisites keeps the workspace in InstallingPrerequisites until the class's
// prerequisiteDeployTimeout, counted from when it started waiting, then fails it.
func (r *Reconciler) waitForPrerequisites(s *scope, pending []string) stepResult {
	timeout := s.class.Spec.PrerequisiteDeployTimeoutOrDefault()
	started := s.now
	if c := meta.FindStatusCondition(s.ws.Status.Conditions, workspacesv1.PrerequisitesMetCondition); c != nil &&
		c.Status == metav1.ConditionFalse && c.Reason == workspacesv1.ReasonPrerequisitesDeploying {
		started = c.LastTransitionTime.Time
	}
	msg := "waiting for prerequisites: " + strings.Join(pending, ", ")
	if s.now.Sub(started) >= timeout {
		s.failed(workspacesv1.PrerequisitesMetCondition, workspacesv1.ReasonPrerequisiteTimeout,
			fmt.Sprintf("prerequisites not deployed within prerequisiteDeployTimeout %s: %s", timeout, strings.Join(pending, ", ")))
		return stop
	}
	s.installingPrerequisites(workspacesv1.PrerequisitesMetCondition, workspacesv1.ReasonPrerequisitesDeploying, msg)
	return stopAfter(timeout - s.now.Sub(started))
}
