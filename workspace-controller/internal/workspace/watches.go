package workspace

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/metrics"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspaceclass"
)

// SetupWithManager registers the indexes, the metrics and the controller. childChanges is the
// child-cluster cache's Source (childcluster.Cache.Source): the ClusterDeployments whose child Nodes
// or Pods changed, or that became (un)reachable (nil: no child events).
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr manager.Manager, opts controller.Options, childChanges func(handler.EventHandler) source.Source) error {
	r.gateFor()
	if err := r.Options.validateTimings(); err != nil {
		return err
	}
	if err := registerIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := metrics.Register(mgr.GetClient(), mgr.GetCache(), r.Children.Size); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}

	b := builder.ControllerManagedBy(mgr).
		Named("workspacedeployment").
		For(&workspacesv1.WorkspaceDeployment{}, builder.WithPredicates(workspaceChanged{writes: &r.writes})).
		Watches(&k0rdentv1beta1.ServiceSet{}, handler.EnqueueRequestsFromMapFunc(r.forServiceSet),
			builder.WithPredicates(hasLabel(workspacesv1.ClusterDeploymentLabel), notOwnServiceSetCreate{})).
		Watches(&k0rdentv1beta1.ClusterDeployment{}, handler.EnqueueRequestsFromMapFunc(r.forCluster), builder.WithPredicates(clusterChanged{})).
		Watches(&workspacesv1.WorkspaceDeployment{}, handler.EnqueueRequestsFromMapFunc(r.forWaiters),
			builder.WithPredicates(releasesGPUs{})).
		Watches(&workspacesv1.WorkspaceDeployment{}, reclaimedBorrowers{}).
		Watches(&workspacesv1.WorkspaceClass{}, handler.EnqueueRequestsFromMapFunc(r.forClass), builder.WithPredicates(classChanged{})).
		Watches(&k0rdentv1beta1.ServiceTemplate{}, handler.EnqueueRequestsFromMapFunc(r.forTemplate)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.forKubeconfigSecret),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				return strings.HasSuffix(o.GetName(), k0rdentv1beta1.KubeconfigSecretSuffix)
			}), predicate.ResourceVersionChangedPredicate{})).
		// Secrets and ConfigMaps are watched by metadata only: a change of a valuesFrom source (a
		// rotated password) or of a workspace's values Secret brings the workspace back, and the
		// content is read from the API server, never cached.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.forValuesSource("Secret")),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		WatchesMetadata(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.forValuesSource("ConfigMap")),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.forNamespace),
			builder.WithPredicates(predicate.Or(predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		WithOptions(opts)
	b, err := r.setupPlacement(mgr, b)
	if err != nil {
		return err
	}
	if childChanges != nil {
		b = b.WatchesRawSource(childChanges(childEvents{split: r.childEventRequests}))
	}
	return b.Complete(r)
}

// registerIndexes registers the field indexes the reconciler, its watches and the GPU gate read
// (owned.Index*, and the WorkspaceClass controller's index of workspaces by class) with idx: the
// manager's cache, or in tests a cache of their own.
func registerIndexes(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, &workspacesv1.WorkspaceDeployment{}, owned.IndexCluster, func(o client.Object) []string {
		return []string{owned.ClusterKey(o.(*workspacesv1.WorkspaceDeployment)).String()}
	}); err != nil {
		return fmt.Errorf("indexing workspaces by cluster: %w", err)
	}
	if err := idx.IndexField(ctx, &workspacesv1.WorkspaceDeployment{}, owned.IndexClusterWaiter, func(o client.Object) []string {
		return owned.ClusterWaiterKeys(o.(*workspacesv1.WorkspaceDeployment))
	}); err != nil {
		return fmt.Errorf("indexing the Waiting workspaces by cluster: %w", err)
	}
	if err := idx.IndexField(ctx, &k0rdentv1beta1.ServiceSet{}, owned.IndexServiceSetCluster, func(o client.Object) []string {
		return owned.ServiceSetClusterKeys(o)
	}); err != nil {
		return fmt.Errorf("indexing ServiceSets by cluster: %w", err)
	}
	if err := idx.IndexField(ctx, &k0rdentv1beta1.ServiceSet{}, owned.IndexServiceSetWorkspaceNamespace, func(o client.Object) []string {
		if ns := o.GetLabels()[workspacesv1.WorkspaceNamespaceLabel]; ns != "" {
			return []string{ns}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing ServiceSets by their workspace's namespace: %w", err)
	}
	if err := idx.IndexField(ctx, &workspacesv1.WorkspaceDeployment{}, owned.IndexClusterNamespace, func(o client.Object) []string {
		return []string{owned.ClusterKey(o.(*workspacesv1.WorkspaceDeployment)).Namespace}
	}); err != nil {
		return fmt.Errorf("indexing workspaces by cluster namespace: %w", err)
	}
	if err := idx.IndexField(ctx, &workspacesv1.WorkspaceDeployment{}, owned.IndexClusterIdentity, func(o client.Object) []string {
		if ad := o.(*workspacesv1.WorkspaceDeployment).Status.Admission; ad != nil && ad.ClusterIdentity != "" {
			return []string{string(ad.ClusterIdentity)}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing workspaces by child cluster identity: %w", err)
	}
	if err := idx.IndexField(ctx, &workspacesv1.WorkspaceDeployment{}, owned.IndexNamespaceWaiter, func(o client.Object) []string {
		ws := o.(*workspacesv1.WorkspaceDeployment)
		// A workspace a reclaim stopped waits to start again on its namespace's quota as well (in a
		// cohort, on what the other members leave unused): freed quota brings it back, whatever
		// cluster the workspace that freed it is on.
		if !gate.Unplaced(ws) && !gate.WaitingForQuota(ws) && !owned.RestartsAfterReclaim(&ws.Status) {
			return nil
		}
		// An unplaced workspace is also found by the namespace it is placed from: a change of the
		// clusters there (a platform team's shared fleet) brings it back.
		if from, _ := ws.PlacementNamespace(); gate.Unplaced(ws) && from != ws.Namespace {
			return []string{ws.Namespace, from}
		}
		return []string{ws.Namespace}
	}); err != nil {
		return fmt.Errorf("indexing the workspaces waiting in a namespace: %w", err)
	}
	if err := idx.IndexField(ctx, &workspacesv1.WorkspaceDeployment{}, owned.IndexReclaimedBy, func(o client.Object) []string {
		return owned.ReclaimedByKeys(o.(*workspacesv1.WorkspaceDeployment))
	}); err != nil {
		return fmt.Errorf("indexing the workspaces that reclaim GPUs by their borrowers: %w", err)
	}
	if err := idx.IndexField(ctx, &workspacesv1.WorkspaceDeployment{}, owned.IndexName, func(o client.Object) []string {
		return []string{o.GetName()}
	}); err != nil {
		return fmt.Errorf("indexing workspaces by name: %w", err)
	}
	if err := idx.IndexField(ctx, &workspacesv1.WorkspaceDeployment{}, owned.IndexValuesFrom, func(o client.Object) []string {
		ws := o.(*workspacesv1.WorkspaceDeployment)
		keys := make([]string, 0, len(ws.Spec.ValuesFrom))
		for _, v := range ws.Spec.ValuesFrom {
			keys = append(keys, owned.ValuesFromKey(string(v.Kind), ws.Namespace, v.Name))
		}
		return keys
	}); err != nil {
		return fmt.Errorf("indexing workspaces by valuesFrom: %w", err)
	}
	return workspaceclass.IndexClassRefField(ctx, idx)
}

func hasLabel(key string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { _, ok := o.GetLabels()[key]; return ok })
}

// workspaces lists workspaces by an index, filtered, as requests.
func (r *Reconciler) workspaces(ctx context.Context, index, value string, keep func(*workspacesv1.WorkspaceDeployment) bool) []reconcile.Request {
	var list workspacesv1.WorkspaceDeploymentList
	if err := r.Client.List(ctx, &list, client.MatchingFields{index: value}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing workspaces for a watch event", "index", index)
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		if keep == nil || keep(&list.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// forServiceSet maps a workspace's ServiceSet to its workspace, and a prerequisite ServiceSet to the
// workspaces on its cluster.
func (r *Reconciler) forServiceSet(ctx context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if name, ok := l[workspacesv1.WorkspaceLabel]; ok {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[workspacesv1.WorkspaceNamespaceLabel], Name: name}}}
	}
	if _, ok := l[workspacesv1.PrerequisiteLabel]; ok {
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: l[workspacesv1.ClusterDeploymentLabel]}
		return r.workspaces(ctx, owned.IndexCluster, key.String(), nil)
	}
	return nil
}

func (r *Reconciler) forCluster(ctx context.Context, o client.Object) []reconcile.Request {
	return append(r.workspaces(ctx, owned.IndexCluster, client.ObjectKeyFromObject(o).String(), nil),
		r.namespaceWaiters(ctx, o.GetNamespace(), client.ObjectKey{})...)
}

func (r *Reconciler) forClass(ctx context.Context, o client.Object) []reconcile.Request {
	return r.workspaces(ctx, workspaceclass.IndexClassRef, o.GetName(), nil)
}

// forTemplate brings back the workspaces waiting for a template in their cluster's namespace.
func (r *Reconciler) forTemplate(ctx context.Context, o client.Object) []reconcile.Request {
	return r.workspaces(ctx, owned.IndexClusterNamespace, o.GetNamespace(), func(ws *workspacesv1.WorkspaceDeployment) bool {
		return ws.Status.Phase != workspacesv1.PhaseRunning
	})
}

// forValuesSource maps a Secret or ConfigMap to the workspaces that read values from it, and a
// workspace's own values Secret to its workspace.
func (r *Reconciler) forValuesSource(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		out := r.workspaces(ctx, owned.IndexValuesFrom, owned.ValuesFromKey(kind, o.GetNamespace(), o.GetName()), nil)
		if l := o.GetLabels(); kind == "Secret" && l[owned.LabelValuesSecret] == "true" && l[workspacesv1.WorkspaceLabel] != "" {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{
				Namespace: l[workspacesv1.WorkspaceNamespaceLabel], Name: l[workspacesv1.WorkspaceLabel]}})
		}
		return out
	}
}

// forKubeconfigSecret maps `<cd>-kubeconfig` to the workspaces on cd, and an adopted cluster's
// default `<cd>-sveltos-kubeconfig` to those on cd too.
func (r *Reconciler) forKubeconfigSecret(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, cd := range childcluster.ClustersForSecret(client.ObjectKeyFromObject(o)) {
		out = append(out, r.workspaces(ctx, owned.IndexCluster, cd.String(), nil)...)
	}
	return out
}

// forNamespace brings back, when a namespace's annotations or labels change, the workspaces of other
// namespaces that target clusters in it (its tenancy annotation), and its own workspaces (its labels,
// which a class's spec.allowedNamespaces selects).
func (r *Reconciler) forNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	out := r.workspaces(ctx, owned.IndexClusterNamespace, o.GetName(), func(ws *workspacesv1.WorkspaceDeployment) bool {
		return ws.Namespace != o.GetName()
	})
	var own workspacesv1.WorkspaceDeploymentList
	if err := r.Client.List(ctx, &own, client.InNamespace(o.GetName()), client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing workspaces for a namespace event", "namespace", o.GetName())
		return out
	}
	for i := range own.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&own.Items[i])})
	}
	return out
}

// releasesGPUs passes the workspace events after which GPUs may be free for a waiter: a workspace
// deleted or being deleted, its admission changed or dropped, it failed or its failed release passed
// its deploy deadline (deployTimedOut), or its suspension changed (a suspended waiter keeps no place
// in the queue); and those after which a waiter behind another may go first: a waiter leaves its
// cluster's queue (admitted, Pending, Failed, or Waiting for its namespace's quota instead) or its
// quota's queue (the quota waiters behind it, in its namespace and its cohort, count it ahead while
// their quotas would admit it: gate.chargeWaitersAhead), or a waiter lowers its priority or changes
// its request (a smaller or another request reserves less of what the waiters behind it need;
// priority.go).
type releasesGPUs struct{ predicate.Funcs }

func (releasesGPUs) Create(event.CreateEvent) bool   { return false }
func (releasesGPUs) Delete(event.DeleteEvent) bool   { return true }
func (releasesGPUs) Generic(event.GenericEvent) bool { return false }
func (releasesGPUs) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*workspacesv1.WorkspaceDeployment)
	n, ok2 := e.ObjectNew.(*workspacesv1.WorkspaceDeployment)
	if !ok1 || !ok2 {
		return false
	}
	return o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() || o.Spec.Suspend != n.Spec.Suspend ||
		!equality.Semantic.DeepEqual(o.Status.Admission, n.Status.Admission) ||
		(o.Status.Phase != n.Status.Phase && (n.Status.Phase == workspacesv1.PhaseFailed || o.Status.Phase == workspacesv1.PhaseWaiting)) ||
		(gate.Queued(&o.Status) && !gate.Queued(&n.Status)) || deployTimedOut(o, n) ||
		(gate.WaitingForQuota(o) && !gate.WaitingForQuota(n)) ||
		(gate.Queued(&n.Status) && (o.Spec.Priority != n.Spec.Priority ||
			!equality.Semantic.DeepEqual(o.Status.ResolvedResources, n.Status.ResolvedResources)))
}

// deployTimedOut reports whether a Failed workspace's release passed its deploy deadline in this
// update (HelmReleaseReady turned DeployTimeout): its replicas not bound yet stopped reserving GPUs
// (gate: bindsNoMore).
func deployTimedOut(o, n *workspacesv1.WorkspaceDeployment) bool {
	reason := func(ws *workspacesv1.WorkspaceDeployment) string {
		if c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.HelmReleaseReadyCondition); c != nil {
			return c.Reason
		}
		return ""
	}
	return n.Status.Phase == workspacesv1.PhaseFailed && reason(n) == workspacesv1.ReasonDeployTimeout && reason(o) != workspacesv1.ReasonDeployTimeout
}

// forWaiters brings back the other Waiting workspaces on the workspace's cluster, the quota waiters
// and unplaced workspaces of its namespace, and the quota waiters of the other members of its cohort.
func (r *Reconciler) forWaiters(ctx context.Context, o client.Object) []reconcile.Request {
	ws, ok := o.(*workspacesv1.WorkspaceDeployment)
	if !ok {
		return nil
	}
	self, cd := client.ObjectKeyFromObject(ws), owned.ClusterKey(ws)
	out := r.queueOf(ctx, cd, self)
	// Freed quota and freed GPUs also wake the namespace's quota waiters and unplaced workspaces, and
	// the unplaced workspaces of the cluster's namespace, which may be placed there now.
	out = append(out, r.namespaceWaiters(ctx, ws.Namespace, self)...)
	if cd.Namespace != "" && cd.Namespace != ws.Namespace {
		out = append(out, r.namespaceWaiters(ctx, cd.Namespace, self)...)
	}
	// In a cohort, GPUs a member holds or frees change what the other members may borrow.
	for _, peer := range gate.CohortPeers(ctx, r.Client, ws.Namespace) {
		out = append(out, r.namespaceWaiters(ctx, peer, self)...)
	}
	return out
}

// childEventPriority is the workqueue priority of the workspaces whose admission a child event took
// away: ahead of the other workspaces the same event brings back (default priority 0), which are
// only checked again, so that a lost admission shows in the status without waiting behind them.
const childEventPriority = 10

// childEvents enqueues what a child event brings back (split: the workspaces whose admission the
// change took away, then the others), the former ahead of the latter when the controller's queue is
// a priority queue (controller-runtime's default).
type childEvents struct {
	split func(context.Context, client.Object) (lost, others []reconcile.Request)
}

func (h childEvents) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(ctx, e.Object, q)
}

func (h childEvents) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(ctx, e.ObjectNew, q)
}

func (h childEvents) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(ctx, e.Object, q)
}

func (h childEvents) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(ctx, e.Object, q)
}

func (h childEvents) enqueue(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if o == nil {
		return
	}
	lost, others := h.split(ctx, o)
	pq, isPQ := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if isPQ && len(lost) > 0 {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: new(childEventPriority)}, lost...)
	} else {
		for _, req := range lost {
			q.Add(req)
		}
	}
	for _, req := range others {
		q.Add(req)
	}
}

// childEventRequests brings back, when a child's Nodes or Pods changed or it became (un)reachable,
// the admitted workspaces whose admission the change took away (an admitted node gone, or unable to
// take their pods: gate.Lost), which are gated again (lost); the workspaces of the cluster whose
// state depends on what changed (others: bringsBack); and the unplaced workspaces of the cluster's
// namespace.
func (r *Reconciler) childEventRequests(ctx context.Context, o client.Object) (lost, others []reconcile.Request) {
	cd := client.ObjectKeyFromObject(o)
	change := childcluster.ChangeOf(o)
	isLost := r.lostOn(ctx, cd)
	// The unplaced workspaces of the cluster's namespace may fit on it now.
	others = r.namespaceWaiters(ctx, o.GetNamespace(), client.ObjectKey{})
	others = append(others, r.workspaces(ctx, owned.IndexCluster, cd.String(), func(ws *workspacesv1.WorkspaceDeployment) bool {
		if ws.DeletionTimestamp.IsZero() && isLost(ws) {
			lost = append(lost, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ws)})
			return false
		}
		return bringsBack(ws, change)
	})...)
	return lost, others
}

// bringsBack reports whether a change on a workspace's child may change the workspace's state, so
// that it is reconciled for it. A deploying or stopping workspace waits for its release's pods, so
// only a change of the Pods in its release namespace (or of anything) matters to it: a child event
// then brings back the workspaces it concerns, not every workspace of the cluster. An installed
// workspace (Deploying, Running or Stopped) also comes back when its release namespace, quota or
// network policy changed on the child, to put them right; and any installed workspace (its ServiceSet
// made) when the child stopped answering or answers again, to say so.
func bringsBack(ws *workspacesv1.WorkspaceDeployment, change childcluster.Change) bool {
	if !ws.DeletionTimestamp.IsZero() {
		return true // a deletion may wait for the child
	}
	if change.Reach && ws.Status.ServiceSetName != "" {
		// The child stopped answering, or answers again: an installed workspace's pass says so (its
		// release namespace is read from the child's watch, which a silent child leaves as it was).
		return true
	}
	ns := owned.ReleaseNamespace(ws)
	pods := change.PodsOf(ns)
	switch ws.Status.Phase {
	case workspacesv1.PhaseDeploying, workspacesv1.PhaseRunning, workspacesv1.PhaseStopped:
		if !change.All && change.OwnedIn(ns) {
			// Someone changed or deleted the release namespace, its quota or its network policy on
			// the child: the pass puts them right (a stopped one's stop quota included). A connect
			// or a relisting (All) does not bring back every installed workspace of the cluster.
			return true
		}
	}
	switch ws.Status.Phase {
	case workspacesv1.PhaseWaiting:
		// GPUs, nodes or the child's reachability may have come.
		return true
	case workspacesv1.PhaseDeploying:
		// Running waits for the release's pods to be Ready on the child.
		return pods
	case workspacesv1.PhaseStopped:
		// A workspace a reclaim stopped waits in the cluster's GPU queue to start again, as a Waiting
		// one does; a stop waits for the release's pods to be gone from the child.
		if owned.RestartsAfterReclaim(&ws.Status) {
			return true
		}
		c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReadyCondition)
		return c != nil && c.Reason == workspacesv1.ReasonStopping && pods
	case workspacesv1.PhaseFailed, workspacesv1.PhasePending:
		c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.FeasibleCondition)
		if c == nil {
			return false
		}
		switch c.Reason {
		case workspacesv1.ReasonGpuOfferingUnavailable, workspacesv1.ReasonGpuRequestNeverFits:
			return change.Nodes // the child's GPU kinds and sizes are its Nodes'
		case workspacesv1.ReasonClusterUnreachable:
			return change.All // reachability changes say All
		}
	}
	return false
}

// lostOn returns a filter that reports whether a workspace's admission on cluster cd is lost on the
// child's nodes as cached now (gate.Lost). The child's cached Nodes and Pods are read once per event,
// and only when a workspace with admitted nodes asks; a child that cannot be read loses nothing.
func (r *Reconciler) lostOn(ctx context.Context, cd types.NamespacedName) func(*workspacesv1.WorkspaceDeployment) bool {
	var (
		read  bool
		nodes []corev1.Node
		pods  []corev1.Pod
		err   error
	)
	return func(ws *workspacesv1.WorkspaceDeployment) bool {
		ad := ws.Status.Admission
		if ad == nil || len(ad.Nodes) == 0 || ad.Cluster != cd.String() || r.Children == nil {
			return false
		}
		if !read {
			read = true
			nodes, pods, err = r.Children.Snapshot(ctx, cd)
		}
		return err == nil && gate.Lost(ad, owned.ReleaseNamespace(ws), nodes, pods) != ""
	}
}

// reclaimedBorrowers brings back the borrowers a workspace's reclaim names, before and after a change
// of it (gate.Reclaims: recorded, changed, dropped on admission, or void once the reclaimer is
// suspended or leaves the queue) and when the reclaimer is deleted: each borrower's pass writes or
// withdraws its own notice (reclaim.go).
type reclaimedBorrowers struct{}

func (reclaimedBorrowers) Create(context.Context, event.CreateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}
func (reclaimedBorrowers) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (reclaimedBorrowers) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	o, ok1 := e.ObjectOld.(*workspacesv1.WorkspaceDeployment)
	n, ok2 := e.ObjectNew.(*workspacesv1.WorkspaceDeployment)
	if !ok1 || !ok2 {
		return
	}
	was, is := gate.Reclaims(o), gate.Reclaims(n)
	if equality.Semantic.DeepEqual(was, is) {
		return
	}
	addBorrowers(q, was)
	addBorrowers(q, is)
}

func (reclaimedBorrowers) Delete(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if ws, ok := e.Object.(*workspacesv1.WorkspaceDeployment); ok {
		addBorrowers(q, ws.Status.Reclaiming)
	}
}

func addBorrowers(q workqueue.TypedRateLimitingInterface[reconcile.Request], rc *workspacesv1.Reclaiming) {
	if rc == nil {
		return
	}
	for _, b := range rc.Borrowers {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}})
	}
}
