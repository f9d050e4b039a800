package workspace

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/childns"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/mesh"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
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
	return r.releaseNamespaceStops(s, out), nil
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
	devices, err := r.Children.DeviceResources(ctx, s.cdKey)
	if err != nil {
		return r.childUnreachable(s, err), nil
	}
	out, err := r.namespaces(s, cl).Ensure(ctx, childns.Want{
		Workspace: s.ws, PodSecurityLevel: childns.PodSecurityLevel(s.class), Admission: s.ws.Status.Admission,
		Devices: devices, ResourceClaims: s.class != nil && s.class.Spec.AllowResourceClaims,
		Compute:    childns.ComputeCap(s.class, s.resources),
		Ingress:    childns.IngressPolicy(s.class, append([]string{r.Options.GatewayNamespace}, r.Options.ReleaseIngressNamespaces...)),
		MeshLabels: r.mesh().ReleaseNamespaceLabels(s.cdKey.Name),
	}, s.releaseNSClaim)
	if out.Created {
		s.releaseNSCreated = true
	}
	if err != nil {
		return stop, err
	}
	if out.Kind == childns.Ready {
		if s.wasStopped() {
			// Started again: the stop's quota goes and the release's workloads make their pods now.
			if err := r.namespaces(s, cl).Start(ctx, out.Namespace.Name, s.now); err != nil {
				return stop, err
			}
		}
		s.setTrue(workspacesv1.ReleaseNamespaceReadyCondition, out.Reason, out.Message)
		return next, nil
	}
	return r.releaseNamespaceStops(s, out), nil
}

// mesh is the mesh configuration of the options; Setup refused invalid ones, so a reconciler built
// without Setup (tests) with invalid mesh options gets none.
func (r *Reconciler) mesh() mesh.Config {
	m, err := r.Options.Mesh()
	if err != nil {
		return mesh.Config{Mode: mesh.None}
	}
	return m
}

// wasStopped reports whether the workspace comes back from a stop: it was Stopped (or stopping), or
// its ServiceSet still carries the zero-replica values of the stop.
func (s *scope) wasStopped() bool {
	return s.prev.Phase == workspacesv1.PhaseStopped || (s.claimed != nil && s.claimed.Labels[owned.LabelStopped] == "true")
}

// releaseNamespaceStops turns a ws-<name> that is not this workspace's to use into the condition and
// the end of the pass, by one rule wherever it was found: a Conflict fails the workspace; a Terminating
// namespace is waited for, Pending, until it is gone (an admission the workspace holds stays held). A
// usable or absent namespace goes on.
func (r *Reconciler) releaseNamespaceStops(s *scope, out childns.Outcome) stepResult {
	switch out.Kind {
	case childns.Conflict:
		s.failed(workspacesv1.ReleaseNamespaceReadyCondition, out.Reason, out.Message)
		return stop
	case childns.Terminating:
		s.waitFor(workspacesv1.ReleaseNamespaceReadyCondition, workspacesv1.ReasonReleaseNamespaceTerminating,
			fmt.Sprintf("namespace %s on the child of ClusterDeployment %s is still being deleted; it is made again once it is gone", out.Namespace.Name, s.cdKey))
		return stopAfter(r.Options.UnreachableRetry)
	}
	return next
}

// childUnreachable reports a child that cannot be reached. An installed workspace keeps its phase
// (its release is untouched, and the rest of the pass needs no child); a GPU waiter stays Waiting,
// in its place in the queue; any other waits Pending (waitForChild).
func (r *Reconciler) childUnreachable(s *scope, err error) stepResult {
	msg := fmt.Sprintf("cannot reach the child cluster of ClusterDeployment %s: %v", s.cdKey, err)
	if s.installed() {
		s.setCondition(workspacesv1.ReleaseNamespaceReadyCondition, metav1.ConditionFalse, workspacesv1.ReasonClusterUnreachable, msg)
		return next
	}
	s.waitForChild(workspacesv1.ReleaseNamespaceReadyCondition, msg)
	return stopAfter(r.Options.UnreachableRetry)
}

// childContext bounds the requests to a child: a child that stops answering mid-request (its API
// server hung, the network gone) must not hold a worker.
func (r *Reconciler) childContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.Options.ChildRequestTimeout)
}

// podRefusal reads why the release's pods are not running (childns.PodRefusal) from the child's
// cache: a pod the child refused to create (its workload events; read on the child when the cache
// does not hold them), or one Unschedulable for longer than UnschedulableAfter (its pods).
func (r *Reconciler) podRefusal(ctx context.Context, s *scope) childns.Refusal {
	ctx, cancel := r.childContext(ctx)
	defer cancel()
	cl, err := r.Children.Client(ctx, s.cdKey)
	if err != nil {
		return childns.Refusal{}
	}
	cached, err := r.Children.Refusals(ctx, s.cdKey, s.releaseNamespace())
	if err != nil {
		return childns.Refusal{}
	}
	return r.namespaces(s, cl).PodRefusalFrom(ctx, s.releaseNamespace(), cached, s.now, r.Options.UnschedulableAfter)
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
