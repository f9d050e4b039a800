package workspace

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// setupPlacement adds what placement and quotas need to the workspace controller: the Colony,
// WorkspaceQuota and cohort-label watches that wake the waiters, and the WorkspaceQuota status
// controller.
func (r *Reconciler) setupPlacement(mgr manager.Manager, b *builder.TypedBuilder[reconcile.Request]) (*builder.TypedBuilder[reconcile.Request], error) {
	if err := (&gate.QuotaReconciler{Client: mgr.GetClient(), Cache: mgr.GetCache()}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the WorkspaceQuota controller: %w", err)
	}
	return b.
		Watches(&infrav1.Colony{}, handler.EnqueueRequestsFromMapFunc(r.forColony)).
		Watches(&workspacesv1.WorkspaceQuota{}, handler.EnqueueRequestsFromMapFunc(r.forQuota),
			builder.WithPredicates(quotaSpecChanged{})).
		Watches(&workspacesv1.WorkspaceQuota{}, handler.EnqueueRequestsFromMapFunc(r.forPriorityCap),
			builder.WithPredicates(maxPriorityChanged{})).
		// Typed, not metadata only: the gate reads cohorts from this informer's cache, which shows the
		// change before its handlers run, so a waiter woken here never decides on the old cohort.
		Watches(&corev1.Namespace{}, handler.Funcs{UpdateFunc: r.cohortChanged}), nil
}

// cohortChanged brings back, when a namespace joins or leaves a cohort (its workspaces.exalsius.ai/cohort
// label), its own waiters and the quota waiters of the other members of the cohort it left and of the
// one it joined: a member that joins lends what its guarantees leave unused, one that leaves takes its
// borrowing with it.
func (r *Reconciler) cohortChanged(ctx context.Context, e event.UpdateEvent, wq workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	was, is := e.ObjectOld.GetLabels()[workspacesv1.CohortLabel], e.ObjectNew.GetLabels()[workspacesv1.CohortLabel]
	if was == is {
		return
	}
	namespaces := append([]string{e.ObjectNew.GetName()}, gate.CohortMembersBut(ctx, r.Client, was, e.ObjectNew.GetName())...)
	for _, ns := range append(namespaces, gate.CohortMembersBut(ctx, r.Client, is, e.ObjectNew.GetName())...) {
		for _, req := range r.namespaceWaiters(ctx, ns, client.ObjectKey{}) {
			wq.Add(req)
		}
	}
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

// forColony brings back the unplaced workspaces that name the Colony (its clusters changed), of its
// namespace and of the namespaces it is shared with.
func (r *Reconciler) forColony(ctx context.Context, o client.Object) []reconcile.Request {
	return r.workspaces(ctx, owned.IndexNamespaceWaiter, o.GetNamespace(), func(w *workspacesv1.WorkspaceDeployment) bool {
		from, _ := w.PlacementNamespace()
		return gate.Unplaced(w) && w.Spec.ColonyRef != nil && w.Spec.ColonyRef.Name == o.GetName() && from == o.GetNamespace()
	})
}

// forQuota brings back the namespace's waiting workspaces when a quota changes: a raised limit frees
// room, a changed maxPriority reorders the queues (the waiters of other namespaces in those queues
// are brought back by forPriorityCap); and the quota waiters of the other members of its cohort.
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
	// A guarantee changed in a cohort changes what the other members may borrow.
	for _, peer := range gate.CohortPeers(ctx, r.Client, o.GetNamespace()) {
		out = append(out, r.namespaceWaiters(ctx, peer, client.ObjectKey{})...)
	}
	return out
}

// quotaSpecChanged passes the WorkspaceQuota events that can let a waiter in: a quota created or
// deleted, or its spec changed (a raised limit, a guarantee changed in a cohort). Its status does not
// pass: the quota controller writes it as the namespace's use changes, up to once a second through a
// burst, and no waiter reads it (the gate counts the use itself); passing it woke every waiter of the
// namespace and of its cohort each time. A release wakes the waiters through the workspace watch.
type quotaSpecChanged struct {
	predicate.GenerationChangedPredicate
}

// maxPriorityChanged passes the WorkspaceQuota events that change the namespace's priority cap
// (spec.maxPriority): a quota with a cap created or deleted, or its cap changed. The quota's status,
// written on every change of its use, does not pass.
type maxPriorityChanged struct{ predicate.Funcs }

func capOf(o client.Object) *int32 {
	if q, ok := o.(*workspacesv1.WorkspaceQuota); ok {
		return q.Spec.MaxPriority
	}
	return nil
}

func (maxPriorityChanged) Create(e event.CreateEvent) bool { return capOf(e.Object) != nil }
func (maxPriorityChanged) Delete(e event.DeleteEvent) bool { return capOf(e.Object) != nil }
func (maxPriorityChanged) Generic(event.GenericEvent) bool { return false }
func (maxPriorityChanged) Update(e event.UpdateEvent) bool {
	o, n := capOf(e.ObjectOld), capOf(e.ObjectNew)
	return (o == nil) != (n == nil) || (o != nil && *o != *n)
}

// forPriorityCap brings back, when a namespace's priority cap changes, the waiters of every queue
// its waiting workspaces stand in: a lowered cap moves them back, so a waiter of another namespace
// may now go first (priority.go), with no other event to wake it. The waiters are those on each such
// cluster and the unplaced waiters of the cluster's namespace, which the gate counts the queue for
// when it places them.
func (r *Reconciler) forPriorityCap(ctx context.Context, o client.Object) []reconcile.Request {
	var list workspacesv1.WorkspaceDeploymentList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil { // read-only
		return nil
	}
	clusters := map[client.ObjectKey]bool{}
	for i := range list.Items {
		if w := &list.Items[i]; gate.Queued(&w.Status) && !gate.Unplaced(w) {
			clusters[owned.ClusterKey(w)] = true
		}
	}
	seen := map[reconcile.Request]bool{}
	var out []reconcile.Request
	for cd := range clusters {
		for _, req := range append(r.queueOf(ctx, cd, client.ObjectKey{}), r.namespaceWaiters(ctx, cd.Namespace, client.ObjectKey{})...) {
			if !seen[req] {
				seen[req] = true
				out = append(out, req)
			}
		}
	}
	return out
}

// queueOf lists the Waiting workspaces on a cluster, but skip: those of its ClusterDeployment and of
// the others connected to the same child cluster (one child is one gate). It reads the waiters' index
// (owned.IndexClusterWaiter), so that its cost follows the queue, not the cluster's workspaces: it runs
// on every admission.
func (r *Reconciler) queueOf(ctx context.Context, cd, skip client.ObjectKey) []reconcile.Request {
	notSkipped := func(w *workspacesv1.WorkspaceDeployment) bool { return client.ObjectKeyFromObject(w) != skip }
	out := r.workspaces(ctx, owned.IndexClusterWaiter, cd.String(), notSkipped)
	if r.Children != nil {
		for _, p := range r.Children.Peers(cd) {
			out = append(out, r.workspaces(ctx, owned.IndexClusterWaiter, p.String(), notSkipped)...)
		}
	}
	return out
}
