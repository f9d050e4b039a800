// Package inventory publishes the GPU inventory of every child cluster of a Colony on the Colony's
// status.gpuInventory, from live watches of the child's Nodes and Pods.
package inventory

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/text"
	"github.com/exalsius/exalsius-operator/inventory-collector/internal/sharding"
)

// FieldManager is the server-side apply field manager of status.gpuInventory.
const (
	// Component is the component word: logger name, field manager, event reporter, metrics prefix,
	// leader-election lease and user agent.
	Component = "inventory-collector"
	// FieldManager owns status.gpuInventory in server-side apply.
	FieldManager = Component
)

// Requeue intervals for children that cannot be watched right now. Recovery of a connected child is
// notified by the child-cluster cache; these are safety nets.
const (
	recheckUnhealthy = time.Minute
	recheckMissing   = time.Minute
	retryConflict    = 200 * time.Millisecond
)

// +kubebuilder:rbac:groups=infra.exalsius.ai,resources=colonies,verbs=get;list;watch
// The inventory is written by server-side apply on the status subresource (a patch).
// +kubebuilder:rbac:groups=infra.exalsius.ai,resources=colonies/status,verbs=patch
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=clusterdeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=credentials;regions,verbs=get
// +kubebuilder:rbac:groups=lib.projectsveltos.io,resources=sveltosclusters,verbs=get
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler keeps a Colony's status.gpuInventory current for the ClusterDeployments of this shard.
type Reconciler struct {
	// Client is the manager's client: Colonies and ClusterDeployment metadata come from its cache.
	Client client.Client
	// Clusters holds the watches of the child clusters.
	Clusters *childcluster.Cache
	// Shard picks the ClusterDeployments this replica watches.
	Shard sharding.Shard
	// Recorder, when set, records an Event on the Colony when a child becomes unreachable or
	// reachable again (transitions only).
	Recorder events.EventRecorder
	// Now is the clock of lastUpdated (default time.Now).
	Now func() time.Time
	// ContactRefresh is how old a reachable, unchanged child's stored lastContact may get before it
	// is rewritten (Options.ContactRefresh, default 10m). Every refresh is a status write.
	ContactRefresh time.Duration

	mu sync.Mutex
	// tracked maps a Colony to the ClusterDeployments watched for it.
	tracked map[types.NamespacedName]map[types.NamespacedName]struct{}
	// colonyOf maps a watched ClusterDeployment to its Colony.
	colonyOf map[types.NamespacedName]types.NamespacedName
}

// SetupWithManager registers the reconciler: Colonies, ClusterDeployment and Secret metadata (never
// Secret data), and the change notifications of the child-cluster cache.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Client == nil || r.Clusters == nil {
		return fmt.Errorf("inventory: Client and Clusters are required")
	}
	if err := r.Shard.Validate(); err != nil {
		return err
	}
	r.tracked = map[types.NamespacedName]map[types.NamespacedName]struct{}{}
	r.colonyOf = map[types.NamespacedName]types.NamespacedName{}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.ContactRefresh <= 0 {
		return fmt.Errorf("inventory: ContactRefresh must be positive, got %s (DefaultOptions sets it)", r.ContactRefresh)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("inventory").
		For(&infrav1.Colony{}, builder.WithPredicates(colonyChanged())).
		WatchesMetadata(&k0rdentv1beta1.ClusterDeployment{}, handler.EnqueueRequestsFromMapFunc(r.colonyForClusterDeployment)).
		// Every Secret's metadata: `<cd>-kubeconfig`, and the Secrets the lookup of an adopted or
		// regional cluster read, whatever their name (colonyForSecret).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.colonyForSecret),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		WatchesRawSource(r.Clusters.Source(handler.EnqueueRequestsFromMapFunc(r.colonyForClusterDeployment))).
		WithOptions(opts).
		Complete(r)
}

// colonyChanged passes Colony events that change which clusters to watch: creation, deletion, spec
// changes and changes of status.clusterDeploymentRefs; not this controller's own status writes.
func colonyChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*infrav1.Colony)
			n, ok2 := e.ObjectNew.(*infrav1.Colony)
			if !ok1 || !ok2 {
				return true
			}
			return o.Generation != n.Generation ||
				!o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
				!refsEqual(o.Status.ClusterDeploymentRefs, n.Status.ClusterDeploymentRefs)
		},
	}
}

func refsEqual(a, b []infrav1.ObjectRef) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// colonyForClusterDeployment maps a ClusterDeployment (or a child-cluster notification naming one) to
// its Colony: the one watching it, else its controller owner or Colony label.
func (r *Reconciler) colonyForClusterDeployment(ctx context.Context, obj client.Object) []reconcile.Request {
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	r.mu.Lock()
	colony, ok := r.colonyOf[key]
	r.mu.Unlock()
	if ok {
		return []reconcile.Request{{NamespacedName: colony}}
	}
	if name := colonyNameOf(obj); name != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
	}
	return nil
}

// colonyForSecret maps a kubeconfig Secret to the Colony of its ClusterDeployment: `<cd>-kubeconfig`
// by its name, an adopted cluster's default `<cd>-sveltos-kubeconfig` by its name too, and any other
// Secret the last lookup of an adopted or regional cluster read or looked for (a SveltosCluster's
// named Secret, a Region's kubeconfig) through the cache's record of it (childcluster.Cache.Using).
func (r *Reconciler) colonyForSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	cds := r.Clusters.ClustersForSecret(client.ObjectKeyFromObject(obj))
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	for _, key := range cds {
		for _, req := range r.colonyForClusterDeploymentKey(ctx, key) {
			if !seen[req.NamespacedName] {
				seen[req.NamespacedName] = true
				out = append(out, req)
			}
		}
	}
	return out
}

// colonyForClusterDeploymentKey maps a ClusterDeployment known by its key to its Colony, reading its
// metadata from the cache when it is not watched yet.
func (r *Reconciler) colonyForClusterDeploymentKey(ctx context.Context, key types.NamespacedName) []reconcile.Request {
	cd := &metav1.PartialObjectMetadata{}
	cd.SetGroupVersionKind(k0rdentv1beta1.GroupVersion.WithKind("ClusterDeployment"))
	cd.SetNamespace(key.Namespace)
	cd.SetName(key.Name)
	if reqs := r.colonyForClusterDeployment(ctx, cd); len(reqs) > 0 {
		return reqs
	}
	if err := r.Client.Get(ctx, key, cd); err != nil {
		return nil
	}
	return r.colonyForClusterDeployment(ctx, cd)
}

// colonyNameOf returns the Colony that controls a ClusterDeployment, by controller owner reference or
// label.
func colonyNameOf(obj client.Object) string {
	if owner := infrav1.ControllingColony(obj); owner != "" {
		return owner
	}
	return obj.GetLabels()[infrav1.ColonyLabel]
}

// Reconcile watches the Colony's child clusters of this shard and publishes their inventory.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	colony := &infrav1.Colony{}
	if err := r.Client.Get(ctx, req.NamespacedName, colony); err != nil {
		if apierrors.IsNotFound(err) {
			r.reconcileDelete(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !colony.DeletionTimestamp.IsZero() {
		r.reconcileDelete(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, colony)
}

// reconcileDelete stops every watch of a Colony that is gone or going, and drops its metrics. The
// status is left alone: the Colony is on its way out.
func (r *Reconciler) reconcileDelete(colony types.NamespacedName) {
	r.track(colony, nil)
}

func (r *Reconciler) reconcileNormal(ctx context.Context, colony *infrav1.Colony) (ctrl.Result, error) {
	colonyKey := client.ObjectKeyFromObject(colony)
	all, err := r.clusterDeployments(ctx, colony)
	if err != nil {
		return ctrl.Result{}, err
	}
	var mine []types.NamespacedName
	for _, cd := range all {
		if r.Shard.Owns(cd) {
			mine = append(mine, cd)
		}
	}
	r.track(colonyKey, mine)

	collected, requeue, errs := r.collect(ctx, colony, mine)
	desired := desiredInventory(colony, all, collected)
	if !inventoriesEqual(colony.Status.GPUInventory, desired) || !sameTotals(colony.Status.GPUs, gpuTotals(desired)) {
		if err := r.applyInventory(ctx, colony, desired); err != nil {
			if apierrors.IsConflict(err) {
				statusWrites.WithLabelValues("conflict").Inc()
				return ctrl.Result{RequeueAfter: retryConflict}, nil
			}
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, nil
			}
			statusWrites.WithLabelValues("error").Inc()
			return ctrl.Result{}, fmt.Errorf("applying status.gpuInventory of Colony %s: %w", colonyKey, err)
		}
		statusWrites.WithLabelValues("success").Inc()
		r.recordTransitions(colony, desired)
	}
	if len(errs) > 0 {
		return ctrl.Result{}, fmt.Errorf("collecting the inventory of Colony %s: %s", colonyKey, strings.Join(errs, "; "))
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// clusterDeployments returns the Colony's ClusterDeployments, sorted: those named in
// status.clusterDeploymentRefs or controlled by the Colony, that exist and are not being deleted.
func (r *Reconciler) clusterDeployments(ctx context.Context, colony *infrav1.Colony) ([]types.NamespacedName, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(k0rdentv1beta1.GroupVersion.WithKind("ClusterDeploymentList"))
	if err := r.Client.List(ctx, list, client.InNamespace(colony.Namespace)); err != nil {
		return nil, fmt.Errorf("listing ClusterDeployments: %w", err)
	}
	referenced := map[types.NamespacedName]bool{}
	for _, ref := range colony.Status.ClusterDeploymentRefs {
		ns := ref.Namespace
		if ns == "" {
			ns = colony.Namespace
		}
		referenced[types.NamespacedName{Namespace: ns, Name: ref.Name}] = true
	}
	var out []types.NamespacedName
	seen := map[types.NamespacedName]bool{}
	add := func(cd *metav1.PartialObjectMetadata) {
		key := client.ObjectKeyFromObject(cd)
		if seen[key] || !cd.DeletionTimestamp.IsZero() {
			return
		}
		seen[key] = true
		out = append(out, key)
	}
	for i := range list.Items {
		cd := &list.Items[i]
		if referenced[client.ObjectKeyFromObject(cd)] || colonyNameOf(cd) == colony.Name {
			add(cd)
		}
	}
	// References into other namespaces.
	for key := range referenced {
		if key.Namespace == colony.Namespace || seen[key] {
			continue
		}
		cd := &metav1.PartialObjectMetadata{}
		cd.SetGroupVersionKind(k0rdentv1beta1.GroupVersion.WithKind("ClusterDeployment"))
		if err := r.Client.Get(ctx, key, cd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("reading ClusterDeployment %s: %w", key, err)
		}
		add(cd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// track records the ClusterDeployments watched for a Colony and stops the watches of those no longer
// in the list (nil stops them all).
//
// Order matters to readers of Watched: a dropped ClusterDeployment's metrics are deleted and its
// connection is stopped first, and only then does it leave the tracked set. So once Watched no longer
// lists it, nothing of it is left (no series, no watch).
func (r *Reconciler) track(colony types.NamespacedName, cds []types.NamespacedName) {
	want := make(map[types.NamespacedName]struct{}, len(cds))
	for _, cd := range cds {
		want[cd] = struct{}{}
	}
	r.mu.Lock()
	var dropped []types.NamespacedName
	for cd := range r.tracked[colony] {
		if _, ok := want[cd]; !ok {
			dropped = append(dropped, cd)
		}
	}
	// New ClusterDeployments are tracked before anything is collected for them.
	if len(want) > 0 {
		if r.tracked[colony] == nil {
			r.tracked[colony] = map[types.NamespacedName]struct{}{}
		}
		for cd := range want {
			r.tracked[colony][cd] = struct{}{}
			r.colonyOf[cd] = colony
		}
	}
	r.mu.Unlock()

	for _, cd := range dropped {
		forgetCluster(colony, cd.Name)
		r.Clusters.Forget(cd)
	}
	if len(want) == 0 {
		forgetColony(colony)
	}

	r.mu.Lock()
	for _, cd := range dropped {
		if r.colonyOf[cd] == colony {
			delete(r.colonyOf, cd)
		}
	}
	if len(want) == 0 {
		delete(r.tracked, colony)
	} else {
		r.tracked[colony] = want
	}
	watchedClusters.Set(float64(len(r.colonyOf)))
	r.mu.Unlock()
}

// Watched returns the ClusterDeployments this reconciler watches, for tests and debugging.
func (r *Reconciler) Watched() []types.NamespacedName {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(r.colonyOf))
	for cd := range r.colonyOf {
		out = append(out, cd)
	}
	return out
}

// Event reasons of reachability transitions.
const (
	EventClusterUnreachable = "ClusterUnreachable"
	EventClusterReachable   = "ClusterReachable"
)

// recordTransitions records an Event for each child whose reachability differs between the Colony's
// stored inventory and the one just written. Children seen for the first time are not transitions.
// Each Event is about the Colony and related to the child's ClusterDeployment: the event recorder
// folds Events with the same reason about the same object version into one series, so without the
// related object two children changing in the same write would leave one Event naming only the first.
func (r *Reconciler) recordTransitions(colony *infrav1.Colony, written map[string]infrav1.ClusterGPUInventory) {
	if r.Recorder == nil {
		return
	}
	names := make([]string, 0, len(written))
	for name := range written {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		now := written[name]
		prev, ok := colony.Status.GPUInventory[name]
		if !ok || prev.Reachable == now.Reachable {
			continue
		}
		cd := &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: colony.Namespace}}
		switch {
		case now.Reachable:
			r.Recorder.Eventf(colony, cd, corev1.EventTypeNormal, EventClusterReachable, "CollectInventory",
				"child cluster of ClusterDeployment %s is reachable again", name)
		default:
			r.Recorder.Eventf(colony, cd, corev1.EventTypeWarning, EventClusterUnreachable, "CollectInventory",
				"child cluster of ClusterDeployment %s is unreachable; its last inventory is kept: %s", name, text.Truncate(now.Message, 512))
		}
	}
}
