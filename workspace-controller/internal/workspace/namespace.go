package workspace

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/childns"
)

// The release namespace ws-<name> on the child is internal/childns's; the steps here reach the child
// and turn what childns found into the workspace's conditions.

// namespaces is childns for the workspace's child, reached through cl.
func (r *Reconciler) namespaces(s *scope, cl client.Client) childns.Namespaces {
	return childns.Namespaces{Child: cl, Workspaces: r.Client, Cluster: s.cdKey}
}

// claimReleaseNamespace checks, before the gate, that ws-<name> on the child is not another
// workspace's. A namespace still being deleted (an earlier workspace of this name) is waited for.
func (r *Reconciler) claimReleaseNamespace(ctx context.Context, s *scope) (stepResult, error) {
	ctx, cancel := r.childContext(ctx)
	defer cancel()
	cl, err := r.Children.Client(ctx, s.cdKey)
	if err != nil {
		return r.childUnreachable(s, err), nil
	}
	out, err := r.namespaces(s, cl).Claim(ctx, s.ws)
	if err != nil {
		return stop, err
	}
	s.releaseNSClaim = &out // ensureReleaseNamespace makes or corrects it without reading it again
	return r.releaseNamespaceStops(s, out, false), nil
}

// ensureReleaseNamespace makes ws-<name> on the child before the release: owned by the workspace,
// with its Pod Security level and a ResourceQuota capping GPUs at the admission (childns.Ensure).
func (r *Reconciler) ensureReleaseNamespace(ctx context.Context, s *scope) (stepResult, error) {
	ctx, cancel := r.childContext(ctx)
	defer cancel()
	cl, err := r.Children.Client(ctx, s.cdKey)
	if err != nil {
		return r.childUnreachable(s, err), nil
	}
	out, err := r.namespaces(s, cl).Ensure(ctx, childns.Want{
		Workspace: s.ws, PodSecurityLevel: childns.PodSecurityLevel(s.class), Admission: s.ws.Status.Admission,
	}, s.releaseNSClaim)
	if out.Created {
		s.releaseNSCreated = true
	}
	if err != nil {
		return stop, err
	}
	if out.Kind == childns.Ready {
		s.setTrue(workspacesv1.ReleaseNamespaceReadyCondition, out.Reason, out.Message)
		return next, nil
	}
	return r.releaseNamespaceStops(s, out, true), nil
}

// releaseNamespaceStops turns a ws-<name> that is not this workspace's to use into the condition and
// the end of the pass: a Conflict fails the workspace; a Terminating namespace is waited for
// (childns: one rule), as what the pass is doing where it was found: waiting for it at the claim,
// deploying once the gate admitted the workspace (admitted). A usable or absent namespace goes on.
func (r *Reconciler) releaseNamespaceStops(s *scope, out childns.Outcome, admitted bool) stepResult {
	switch out.Kind {
	case childns.Conflict:
		s.failed(workspacesv1.ReleaseNamespaceReadyCondition, out.Reason, out.Message)
		return stop
	case childns.Terminating:
		report, msg := s.waitFor, "is still being deleted"
		if admitted {
			report, msg = s.deploying, "is being deleted"
		}
		report(workspacesv1.ReleaseNamespaceReadyCondition, workspacesv1.ReasonReleaseNamespaceTerminating,
			fmt.Sprintf("namespace %s on the child of ClusterDeployment %s %s; it is made again once it is gone", out.Namespace.Name, s.cdKey, msg))
		return stopAfter(r.Options.UnreachableRetry)
	}
	return next
}

// childUnreachable reports a child that cannot be reached. An installed workspace keeps its phase
// (its release is untouched, and the rest of the pass needs no child); any other waits Pending.
func (r *Reconciler) childUnreachable(s *scope, err error) stepResult {
	msg := fmt.Sprintf("cannot reach the child cluster of ClusterDeployment %s: %v", s.cdKey, err)
	if s.installed() {
		s.setCondition(workspacesv1.ReleaseNamespaceReadyCondition, metav1.ConditionFalse, workspacesv1.ReasonClusterUnreachable, msg)
		return next
	}
	s.waitFor(workspacesv1.ReleaseNamespaceReadyCondition, workspacesv1.ReasonClusterUnreachable, msg)
	return stopAfter(r.Options.UnreachableRetry)
}

// childContext bounds the requests to a child: a child that stops answering mid-request (its API
// server hung, the network gone) must not hold a worker.
func (r *Reconciler) childContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.Options.ChildRequestTimeout)
}

// quotaRefusal returns the child's latest report that the release's pods were refused for exceeding
// the namespace's quota (childns.QuotaRefusal), or "".
func (r *Reconciler) quotaRefusal(ctx context.Context, s *scope) string {
	ctx, cancel := r.childContext(ctx)
	defer cancel()
	cl, err := r.Children.Client(ctx, s.cdKey)
	if err != nil {
		return ""
	}
	return r.namespaces(s, cl).QuotaRefusal(ctx, s.releaseNamespace())
}

// deleteReleaseNamespace deletes ws-<name> on the child when it belongs to this workspace
// (childns.Delete); it reports what it left and why.
func (r *Reconciler) deleteReleaseNamespace(ctx context.Context, s *scope, targetAllowed bool) (left string, err error) {
	ctx, cancel := r.childContext(ctx)
	defer cancel()
	cl, err := r.Children.Client(ctx, s.cdKey)
	if err != nil {
		return "", err
	}
	return r.namespaces(s, cl).Delete(ctx, s.ws, targetAllowed)
}
