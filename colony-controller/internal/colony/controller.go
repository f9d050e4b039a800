// Package colony reconciles Colonies: each entry becomes a k0rdent ClusterDeployment, the Colony's
// status follows their readiness, the kubeconfigs of the ready clusters are merged into one Secret,
// and deleting a Colony deletes its ClusterDeployments before the Colony goes.
package colony

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/common/kubeconfig"
)

const (
	// Component is the colony-controller's word: its logger name, leader-election lease, metrics
	// prefix and event reporter.
	Component = "colony-controller"
	// FieldManager is the server-side apply field manager of everything the colony-controller writes.
	FieldManager = Component
)

// Reconciler reconciles Colonies.
type Reconciler struct {
	// Client reads from the manager's cache (Colonies, ClusterDeployments, Secret metadata only) and
	// writes to the API server.
	Client client.Client
	// APIReader reads Secret data straight from the API server, only when a kubeconfig must be built.
	APIReader client.Reader
	// Recorder records events.k8s.io/v1 Events on condition transitions.
	Recorder events.EventRecorder
	// ShardBytes is the budget of kubeconfig bytes per kubeconfig Secret of a Colony (default
	// DefaultShardBytes); more clusters go to further Secrets.
	ShardBytes int
	// APIEndpointConfigMap turns on the API-endpoint ConfigMap kube-system/cp-api-endpoint on each
	// ready child whose control plane k0smotron hosts (see apiendpoint.go).
	APIEndpointConfigMap bool
	// RetryRefused is the longest an entry whose ClusterDeployment the API server refused waits before
	// it is sent again; the retries start at refusedFirstRetry and double up to it (Options.RetryRefused,
	// default 2m).
	RetryRefused time.Duration

	// SystemNamespace is k0rdent's system namespace, where a Region's kubeconfig Secret lives
	// (default kcm-system).
	SystemNamespace string
	// Kubeconfig is what a kubeconfig Secret may ask for beyond inline credentials (Options.Kubeconfig).
	Kubeconfig kubeconfig.Policy

	// capiClusters is set by SetupWithManager when the management cluster serves Cluster API's
	// v1beta2 Clusters: entries then read their Cluster's conditions too (capicluster.go).
	capiClusters bool

	applied     *appliedCache
	kubeconfigs *kubeconfigMemo
	endpoints   endpointMemo
	refusals    refusalBackoff
}

// NewReconciler returns a Reconciler wired to the manager's client, API reader and event recorder.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return newReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder(Component))
}

func newReconciler(c client.Client, apiReader client.Reader, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{
		Client:      c,
		APIReader:   apiReader,
		Recorder:    recorder,
		applied:     newAppliedCache(),
		kubeconfigs: newKubeconfigMemo(),
	}
}

// Colonies change only by patches (the finalizer) and their status by server-side apply (a patch);
// the finalizers subresource lets the ClusterDeployments and Secrets a Colony owns carry
// blockOwnerDeletion. ClusterDeployments are server-side applied (patch, and create when absent) and
// deleted, never updated.
// +kubebuilder:rbac:groups=infra.exalsius.ai,resources=colonies,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=infra.exalsius.ai,resources=colonies/status,verbs=patch
// +kubebuilder:rbac:groups=infra.exalsius.ai,resources=colonies/finalizers,verbs=update
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=clusterdeployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=clustertemplates;credentials,verbs=get;list;watch
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=regions,verbs=get
// +kubebuilder:rbac:groups=lib.projectsveltos.io,resources=sveltosclusters,verbs=get
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the controller: it watches Colonies, the ClusterDeployments they control
// and, metadata only, Secrets (each ClusterDeployment's `<cd>-kubeconfig` and the Colony's own
// `<colony>-kubeconfig`). Secret data are never cached.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.applied == nil {
		r.applied = newAppliedCache()
	}
	if r.kubeconfigs == nil {
		r.kubeconfigs = newKubeconfigMemo()
	}
	if r.RetryRefused <= 0 {
		return fmt.Errorf("colony: RetryRefused must be positive, got %s (DefaultOptions sets it)", r.RetryRefused)
	}
	b := ctrl.NewControllerManagedBy(mgr)
	served, err := capiClustersServed(mgr.GetRESTMapper())
	if err != nil {
		return err
	}
	r.capiClusters = served
	if served {
		b = b.Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.capiClusterToColony),
			builder.WithPredicates(capiClusterChanged()))
	} else {
		mgr.GetLogger().WithName(Component).Info("the management cluster serves no Cluster API Clusters at " + clusterv1.GroupVersion.String() +
			": Colonies read their ClusterDeployments' conditions alone (restart the colony-controller once Cluster API is installed or upgraded)")
	}
	if r.APIEndpointConfigMap {
		b = b.Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.serviceToColony),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()["app"] == "k0smotron" })))
	}
	return b.
		Named("colony").
		WithOptions(opts).
		For(&infrav1.Colony{}, builder.WithPredicates(colonyChanged())).
		Owns(&k0rdentv1beta1.ClusterDeployment{}).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.secretToColony)).
		// What KCM's admission checks a ClusterDeployment against: a refused entry is retried as soon
		// as its template or credential changes (created, made valid or ready), not on a slow requeue.
		WatchesMetadata(&k0rdentv1beta1.ClusterTemplate{}, handler.EnqueueRequestsFromMapFunc(r.referencingColonies(specTemplate))).
		WatchesMetadata(&k0rdentv1beta1.Credential{}, handler.EnqueueRequestsFromMapFunc(r.referencingColonies(specCredential))).
		Complete(r)
}

// specTemplate and specCredential pick the name of the ClusterTemplate or the Credential out of an
// entry's clusterDeploymentSpec.
func specTemplate(s *k0rdentv1beta1.ClusterDeploymentSpec) string   { return s.Template }
func specCredential(s *k0rdentv1beta1.ClusterDeploymentSpec) string { return s.Credential }

// referencingColonies returns a map function from a ClusterTemplate or Credential to the Colonies of
// its namespace with an entry that names it, read from the Colony cache.
func (r *Reconciler) referencingColonies(ref func(*k0rdentv1beta1.ClusterDeploymentSpec) string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := &infrav1.ColonyList{}
		if err := r.Client.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			c := &list.Items[i]
			for _, e := range c.Spec.ColonyClusters {
				var spec k0rdentv1beta1.ClusterDeploymentSpec
				if json.Unmarshal(e.ClusterDeploymentSpec.Raw, &spec) == nil && ref(&spec) == obj.GetName() {
					key := client.ObjectKeyFromObject(c)
					r.refusals.reset(key) // the change may be what makes the refusal go: retry soon
					out = append(out, reconcile.Request{NamespacedName: key})
					break
				}
			}
		}
		return out
	}
}

// colonyChanged lets through the Colony updates the controller acts on: spec (generation), deletion,
// finalizers, and the status fields it owns (so that someone else's edit is corrected). Updates of
// gpuInventory alone, written by the inventory-collector, are ignored. Periodic resyncs pass.
func colonyChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldC, okOld := e.ObjectOld.(*infrav1.Colony)
		newC, okNew := e.ObjectNew.(*infrav1.Colony)
		if !okOld || !okNew {
			return true
		}
		return oldC.ResourceVersion == newC.ResourceVersion ||
			oldC.Generation != newC.Generation ||
			!oldC.DeletionTimestamp.Equal(newC.DeletionTimestamp) ||
			!slices.Equal(oldC.Finalizers, newC.Finalizers) ||
			!ownedStatusEqual(oldC.Status, newC.Status)
	}}
}

// secretToColony maps a Secret to the Colony it concerns: the Colony that controls it (its
// aggregated kubeconfig), or the Colony that controls the ClusterDeployment whose kubeconfig it is.
func (r *Reconciler) secretToColony(ctx context.Context, obj client.Object) []reconcile.Request {
	if owner := infrav1.ControllingColony(obj); owner != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: owner}}}
	}
	if colony, ok := strings.CutSuffix(obj.GetName(), "-kubeconfigs"); ok && colony != "" {
		// The upstream operator's pointer Secret, not taken over yet (pointers.go).
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: colony}}}
	}
	prefix, ok := strings.CutSuffix(obj.GetName(), k0rdentv1beta1.KubeconfigSecretSuffix)
	if !ok || prefix == "" {
		return nil
	}
	var out []reconcile.Request
	// `<cd>-kubeconfig` (or an adopted cluster's `<cd>-sveltos-kubeconfig`): the kubeconfig of a
	// ClusterDeployment a Colony controls.
	for _, key := range childcluster.ClustersForSecret(client.ObjectKeyFromObject(obj)) {
		cd := &k0rdentv1beta1.ClusterDeployment{}
		if err := r.Client.Get(ctx, key, cd); err == nil {
			if owner := infrav1.ControllingColony(cd); owner != "" {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: cd.Namespace, Name: owner}})
			}
		}
	}
	// `<colony>-kubeconfig` that the Colony does not control (yet): a name conflict to report, or
	// one that has just been resolved.
	if KubeconfigSecretName(prefix) == obj.GetName() {
		colony := &infrav1.Colony{} // from the Colony informer the controller already has
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: prefix}, colony); err == nil {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: prefix}})
		}
	}
	return out
}

// Reconcile brings one Colony's ClusterDeployments, kubeconfig Secret and status in line with its
// spec. The status is written once, at the end, and only when it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	colony := &infrav1.Colony{}
	if err := r.Client.Get(ctx, req.NamespacedName, colony); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		countError(stageRead)
		return ctrl.Result{}, fmt.Errorf("reading Colony: %w", err)
	}

	obs := &observation{}
	defer func() {
		if obs.skip {
			return
		}
		desired := computeStatus(colony, obs)
		if err := r.patchStatus(ctx, colony, desired); err != nil {
			countError(stageStatus)
			retErr = errors.Join(retErr, err)
		}
		tracker.observe(req.NamespacedName, desired)
	}()

	if !colony.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, colony, obs)
	}
	return r.reconcileNormal(ctx, colony, obs)
}

// reconcileNormal adds the finalizer, applies every entry's ClusterDeployment, deletes those of
// removed entries, reads readiness and keeps the kubeconfig Secret current. Each entry is handled on
// its own: one that fails does not stop the others.
func (r *Reconciler) reconcileNormal(ctx context.Context, colony *infrav1.Colony, obs *observation) (ctrl.Result, error) {
	// The upstream operator's finalizer is replaced by this one in the same write: nothing would ever
	// remove it, and a deleted Colony would hang Terminating once its clusters are gone.
	if !controllerutil.ContainsFinalizer(colony, infrav1.ColonyFinalizer) || controllerutil.ContainsFinalizer(colony, infrav1.LegacyColonyFinalizer) {
		patch := client.MergeFromWithOptions(colony.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(colony, infrav1.ColonyFinalizer)
		controllerutil.RemoveFinalizer(colony, infrav1.LegacyColonyFinalizer)
		if err := r.Client.Patch(ctx, colony, patch, client.FieldOwner(FieldManager)); err != nil {
			countError(stageFinalizer)
			obs.skip = true
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	all, err := r.listClusterDeployments(ctx, colony)
	if err != nil {
		countError(stageRead)
		obs.skip = true // nothing was observed: keep the last status rather than write an empty one
		return ctrl.Result{}, err
	}
	var errs []error
	wanted := make(map[string]bool, len(colony.Spec.ColonyClusters))
	var ready []*entryState
	for _, entry := range colony.Spec.ColonyClusters {
		if !entry.HasClusterDeploymentSpec() {
			// Declared without a spec (the upstream operator allows it): no ClusterDeployment is made
			// or changed, one the Colony already controls is kept, and the entry is not counted.
			wanted[ClusterDeploymentName(colony.Name, entry.ClusterName)] = true
			continue
		}
		st, err := r.reconcileEntry(ctx, colony, entry, all)
		if err != nil {
			errs = append(errs, err)
		}
		wanted[st.cdName] = true
		obs.entries = append(obs.entries, st)
		if st.phase == clusterReady {
			ready = append(ready, st)
		}
	}

	removing, err := r.deleteRemovedClusterDeployments(ctx, colony, all, wanted)
	if err != nil {
		countError(stageDelete)
		errs = append(errs, err)
	}
	obs.removing = removing

	obs.kubeconfig, err = r.reconcileKubeconfigSecret(ctx, colony, ready)
	if err != nil {
		countError(stageKubeconfig)
		errs = append(errs, err)
		obs.kubeconfig.secretName = colony.Status.KubeconfigSecretName
	}
	if err := r.reconcilePointerSecret(ctx, colony, ready); err != nil {
		countError(stageKubeconfig)
		errs = append(errs, err)
	}
	res := ctrl.Result{RequeueAfter: r.reconcileAPIEndpoints(ctx, colony, ready)}
	refused := false
	for _, st := range obs.entries {
		refused = refused || st.refused
	}
	if refused {
		// The ClusterTemplate and Credential watches retry a refusal at once when they change. The
		// refusing admission (KCM's webhook, a policy) reads them from its own cache, which may not
		// show the change yet: the retries start short and grow to RetryRefused, which also catches
		// causes nothing here watches (KCM's Management object, a webhook policy).
		if d := r.refusals.next(client.ObjectKeyFromObject(colony), r.RetryRefused); res.RequeueAfter == 0 || d < res.RequeueAfter {
			res.RequeueAfter = d
		}
	} else {
		r.refusals.reset(client.ObjectKeyFromObject(colony))
	}
	for _, st := range obs.entries {
		if st.recheck && (res.RequeueAfter == 0 || recheckIndirect < res.RequeueAfter) {
			// Nothing here watches SveltosClusters, Regions or Secrets on a regional cluster: look
			// again for a kubeconfig still missing, and for a rotated one.
			res.RequeueAfter = recheckIndirect
		}
	}
	return res, errors.Join(errs...)
}

// recheckIndirect is how often a Colony with a cluster up but without `<cd>-kubeconfig` on the
// management cluster (adopted, regional, or not written yet) looks for its kubeconfig again.
const recheckIndirect = 30 * time.Second

// reconcileEntry applies one entry's ClusterDeployment and reads its readiness. An entry the API
// server (or the decoder) refuses is reported in the state, not returned: retrying cannot fix it,
// a Colony edit (a new generation) will. Transient errors are returned for a retry with backoff.
func (r *Reconciler) reconcileEntry(ctx context.Context, colony *infrav1.Colony, entry infrav1.ColonyCluster,
	all map[string]*k0rdentv1beta1.ClusterDeployment) (*entryState, error) {
	st := &entryState{clusterName: entry.ClusterName, cdName: ClusterDeploymentName(colony.Name, entry.ClusterName)}
	live := all[st.cdName]
	var retErr error
	if err := r.applyClusterDeployment(ctx, colony, entry, live); err != nil {
		if isEntryError(err) {
			st.invalid = err.Error()
			st.refused = isRefusedEntry(err)
		} else {
			countError(stageApply)
			st.applyError = err.Error()
			retErr = err
		}
	}
	st.exists = live != nil && isControlledBy(live, colony)
	if st.invalid == "" && st.applyError == "" {
		st.exists = true
	}
	if !st.exists {
		st.phase, st.message = clusterProvisioning, "ClusterDeployment not created"
		return st, retErr
	}
	secretName := k0rdentv1beta1.KubeconfigSecretName(st.cdName)
	secret, err := r.secretMetadata(ctx, colony.Namespace, secretName)
	if err != nil {
		countError(stageRead)
		st.phase, st.message = clusterProvisioning, err.Error()
		return st, errors.Join(retErr, err)
	}
	if secret != nil && infrav1.ControllingColony(secret) != "" {
		owner := infrav1.ControllingColony(secret)
		// Colony `a`'s cluster `b` and Colony `a-b` both want the Secret `a-b-kubeconfig`; the
		// webhook refuses such names, but Colonies made without it (or before it) can still clash.
		st.invalid = fmt.Sprintf("%s: the kubeconfig Secret %s of ClusterDeployment %s is Colony %s's own kubeconfig Secret: "+
			"the names clash; rename this entry or that Colony", entryField(entry.ClusterName, "clusterName"), secretName, st.cdName, owner)
		secret = nil
	}
	st.secret = secret
	var conds []metav1.Condition
	if live != nil {
		conds = live.Status.Conditions
	}
	capi, err := r.capiCluster(ctx, colony.Namespace, st.cdName)
	if err != nil {
		countError(stageRead)
		st.phase, st.message = clusterProvisioning, err.Error()
		return st, errors.Join(retErr, err)
	}
	up, _ := clusterUp(conds, capi)
	missing := ""
	if secret == nil {
		missing = fmt.Sprintf("kubeconfig Secret %s not found", secretName)
		if st.invalid == "" && up {
			// An adopted or a regional cluster has no `<cd>-kubeconfig` here: find its kubeconfig the
			// way the workspace-controller and the inventory-collector do.
			data, found, err := r.locator().Locate(ctx, types.NamespacedName{Namespace: colony.Namespace, Name: st.cdName})
			st.recheck = true
			switch {
			case found && err != nil:
				missing = locateMessage(err)
			case found:
				missing, st.indirect = "", data
			}
		}
	}
	st.phase, st.message = readiness(conds, capi, missing)
	return st, retErr
}

// recordTransitions emits an event for each of the Colony's condition transitions.
func (r *Reconciler) recordTransitions(colony *infrav1.Colony, desired infrav1.ColonyStatus) {
	conditions.RecordTransitions(r.Recorder, colony, colony.Status.Conditions, desired.Conditions,
		conditions.WithoutEvents(infrav1.ColonyReconcilingCondition, infrav1.ColonyStalledCondition))
}

// forget drops what the reconciler remembers about a Colony that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.refusals.reset(key)
	if r.kubeconfigs != nil {
		r.kubeconfigs.forget(key)
	}
	tracker.forget(key)
}

// refusedFirstRetry is the first retry of a refused entry after its template or credential changed (or
// after the first refusal); each further refusal doubles it, up to RetryRefused.
const refusedFirstRetry = 2 * time.Second

// refusalBackoff counts, per Colony, the refusals since its entries were last accepted or their
// template or credential last changed.
type refusalBackoff struct {
	mu sync.Mutex
	n  map[types.NamespacedName]int
}

// next returns how long to wait before the next retry of a refused Colony, and counts the refusal.
func (b *refusalBackoff) next(key types.NamespacedName, ceiling time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == nil {
		b.n = map[types.NamespacedName]int{}
	}
	n := b.n[key]
	b.n[key] = n + 1
	return refusalDelay(n, ceiling)
}

// reset starts the retries of a Colony short again.
func (b *refusalBackoff) reset(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.n, key)
}

// refusalDelay is refusedFirstRetry doubled n times, at most ceiling.
func refusalDelay(n int, ceiling time.Duration) time.Duration {
	d := refusedFirstRetry
	for range n {
		if d >= ceiling {
			break
		}
		d *= 2
	}
	return min(d, ceiling)
}
