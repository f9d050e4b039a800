package workspace

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/routing"
)

func (r *Reconciler) routingRetry() time.Duration {
	if r.Options.RoutingRetry > 0 {
		return r.Options.RoutingRetry
	}
	return DefaultRoutingRetry
}

func (r *Reconciler) routingResync() time.Duration {
	if r.Options.RoutingResync > 0 {
		return r.Options.RoutingResync
	}
	return DefaultRoutingResync
}

// routingWorkspace is what the route provider needs to know about the workspace.
func routingWorkspace(s *scope, cd *k0rdentv1beta1.ClusterDeployment) routing.Workspace {
	w := routing.Workspace{
		Namespace: s.ws.Namespace, Name: s.ws.Name, UID: s.ws.UID,
		ClusterKey: owned.ClusterKey(s.ws), Cluster: cd,
		Release: owned.ReleaseName(s.ws), ReleaseNamespace: s.releaseNamespace(),
	}
	if s.class != nil {
		w.Endpoints = s.class.Spec.AccessEndpoints
	}
	return w
}

// routes is the last step: the routes of the workspace's endpoints, which never stop the pass.
func (r *Reconciler) routes(ctx context.Context, s *scope) (stepResult, error) {
	r.access(ctx, s)
	return next, nil
}

// access gives the workspace its URLs through the route provider and sums them up in RoutesReady.
// Missing routing infrastructure or routes that do not serve yet never change the phase: the
// workspace stays Running and the pass comes back (routes follow when the infrastructure appears).
func (r *Reconciler) access(ctx context.Context, s *scope) {
	if s.class == nil {
		return
	}
	eps := s.class.Spec.AccessEndpoints
	if len(eps) == 0 {
		s.ws.Status.Access = nil
		s.setTrue(workspacesv1.RoutesReadyCondition, workspacesv1.ReasonNoEndpoints, "the class declares no access endpoints")
		return
	}
	if r.Routes == nil {
		out := make([]workspacesv1.AccessStatus, 0, len(eps))
		for _, ep := range eps {
			out = append(out, workspacesv1.AccessStatus{Name: ep.Name, Protocol: ep.Protocol, Message: "routing is not configured in this controller"})
		}
		s.ws.Status.Access = out
		s.setCondition(workspacesv1.RoutesReadyCondition, metav1.ConditionFalse, workspacesv1.ReasonRoutingNotConfigured,
			"routing is not configured in this controller")
		return
	}
	w := routingWorkspace(s, s.cd)
	if gate.PortEndpoints(eps) > 0 {
		pq, err := gate.PortsAllowed(ctx, r.Client, s.ws, r.classEndpoints)
		if err != nil {
			s.setCondition(workspacesv1.RoutesReadyCondition, metav1.ConditionFalse, workspacesv1.ReasonRoutesPending, "routing: "+err.Error())
			s.requeueWithin(r.routingRetry())
			return
		}
		if pq.Limited {
			w.Ports, w.PortsMessage = &pq.Allowed, pq.Message
		}
	}
	res, err := r.Routes.Ensure(ctx, w)
	if err != nil {
		// A transient error: keep the entries as they were, say why, and come back.
		log.FromContext(ctx).Info("routing failed, retrying", "error", err.Error())
		s.setCondition(workspacesv1.RoutesReadyCondition, metav1.ConditionFalse, workspacesv1.ReasonRoutesPending, "routing: "+err.Error())
		s.requeueWithin(r.routingRetry())
		return
	}
	s.ws.Status.Access = res.Access
	ready := 0
	for _, a := range res.Access {
		if a.Ready {
			ready++
		}
	}
	switch {
	case res.InfraNotReady != "":
		s.setCondition(workspacesv1.RoutesReadyCondition, metav1.ConditionFalse, workspacesv1.ReasonRoutingInfraNotReady, res.InfraNotReady)
		s.requeueWithin(r.routingRetry())
	case !res.Ready():
		s.setCondition(workspacesv1.RoutesReadyCondition, metav1.ConditionFalse, workspacesv1.ReasonRoutesPending,
			fmt.Sprintf("%d of %d routes serve; see status.access for the others", ready, len(res.Access)))
		s.requeueWithin(r.routingRetry())
	default:
		s.setTrue(workspacesv1.RoutesReadyCondition, workspacesv1.ReasonRoutesReady, fmt.Sprintf("all %d routes serve", len(res.Access)))
		s.requeueWithin(r.routingResync())
	}
}

// classEndpoints are the access endpoints of a workspace's class, from the cache; none when the class
// is gone.
func (r *Reconciler) classEndpoints(ctx context.Context, ws *workspacesv1.WorkspaceDeployment) ([]workspacesv1.AccessEndpoint, error) {
	class := &workspacesv1.WorkspaceClass{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: ws.Spec.WorkspaceClassRef}, class); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading WorkspaceClass %s: %w", ws.Spec.WorkspaceClassRef, err)
	}
	return class.Spec.AccessEndpoints, nil
}

// requeueWithin asks for a pass at most d from now.
func (s *scope) requeueWithin(d time.Duration) {
	if s.requeueAfter <= 0 || d < s.requeueAfter {
		s.requeueAfter = d
	}
}

// removeRoutes removes the workspace's routes before anything else is torn down, and reports
// whether they are gone. cd is nil when the ClusterDeployment is gone.
func (r *Reconciler) removeRoutes(ctx context.Context, s *scope, cd *k0rdentv1beta1.ClusterDeployment, cdGone bool) (bool, error) {
	if r.Routes == nil {
		return true, nil
	}
	if cdGone {
		cd = nil
	}
	// The message is the deletion's note: the status is derived from it (phase.go), so a message
	// written into the status here would be overwritten by "the workspace is being deleted".
	done, err := r.Routes.Remove(ctx, routingWorkspace(s, cd))
	if err != nil {
		s.obs.note = "removing the routes on the regional cluster: " + err.Error()
		return false, nil
	}
	if !done {
		s.obs.note = "removing the routes on the regional cluster"
	}
	return done, nil
}
