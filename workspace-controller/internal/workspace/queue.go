package workspace

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// setupPlacement adds what placement and quotas need to the workspace controller: the Colony and
// WorkspaceQuota watches that wake the waiters, and the WorkspaceQuota status controller.
func (r *Reconciler) setupPlacement(mgr manager.Manager, b *builder.TypedBuilder[reconcile.Request]) (*builder.TypedBuilder[reconcile.Request], error) {
	if err := (&gate.QuotaReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the WorkspaceQuota controller: %w", err)
	}
	return b.
		Watches(&infrav1.Colony{}, handler.EnqueueRequestsFromMapFunc(r.forColony)).
		Watches(&workspacesv1.WorkspaceQuota{}, handler.EnqueueRequestsFromMapFunc(r.forQuota)), nil
}

// namespaceWaiters lists the workspaces of a namespace that wait for placement or for the namespace's
// quota, but skip: a cluster's GPUs freed, a workspace released its admission, a ClusterDeployment
// changed.
// They are found through an index (IndexNamespaceWaiter): every admission wakes this, and listing a
// namespace of many workspaces each time made a burst of admissions quadratic.
func (r *Reconciler) namespaceWaiters(ctx context.Context, namespace string, skip client.ObjectKey) []reconcile.Request {
	return r.workspaces(ctx, owned.IndexNamespaceWaiter, namespace, func(w *workspacesv1.WorkspaceDeployment) bool {
		return client.ObjectKeyFromObject(w) != skip
	})
}

// forColony brings back the unplaced workspaces that name the Colony (its clusters changed).
func (r *Reconciler) forColony(ctx context.Context, o client.Object) []reconcile.Request {
	var list workspacesv1.WorkspaceDeploymentList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil { // read-only
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		w := &list.Items[i]
		if gate.Unplaced(w) && w.Spec.ColonyRef != nil && w.Spec.ColonyRef.Name == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
		}
	}
	return out
}

// forQuota brings back the namespace's waiting workspaces when a quota changes: a raised limit frees
// room, a changed maxPriority reorders the queues.
func (r *Reconciler) forQuota(ctx context.Context, o client.Object) []reconcile.Request {
	var list workspacesv1.WorkspaceDeploymentList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil { // read-only
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if w := &list.Items[i]; w.Status.Phase == workspacesv1.PhaseWaiting || gate.Unplaced(w) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
		}
	}
	return out
}
