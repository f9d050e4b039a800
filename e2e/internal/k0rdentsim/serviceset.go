package k0rdentsim

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// serviceSetReconciler plays KCM's Sveltos adapter and Sveltos itself: for each ServiceSet carrying
// the adapter label it installs, upgrades or uninstalls each service's chart on the child with the
// Helm SDK and maps the outcome to the ServiceSet status of the k0rdent contract
// (docs/design/k0rdent-contract.md).
type serviceSetReconciler struct {
	client    client.Client
	reader    client.Reader // uncached, for valuesFrom Secrets and ConfigMaps
	world     *world.World
	chartsDir string

	// statusInterval is how often service states are collected into the status (KCM polls Sveltos's
	// ClusterSummaries every 10 s); zero writes every change at once. A namespace annotated with
	// StatusIntervalAnnotation overrides it for its ServiceSets.
	statusInterval time.Duration
	// kcm is the KCM release whose status the simulator writes (Options.KCM).
	kcm KCMRelease

	mu sync.Mutex
	// failed remembers the failed attempts of each release (per ServiceSet), so that a failed release
	// is retried with backoff as Sveltos does, and not at all after maxConsecutiveFailures.
	failed map[string]failure
	// collected is when the status of each ServiceSet was last written (status interval).
	collected map[types.NamespacedName]time.Time
}

// StatusIntervalAnnotation on a namespace sets the status-collection interval (a Go duration, e.g.
// "10s" for KCM's cadence) of the ServiceSets in it.
const StatusIntervalAnnotation = "k0rdent-sim.exalsius.ai/status-interval"

func (r *serviceSetReconciler) setup(mgr ctrl.Manager) error {
	r.failed = map[string]failure{}
	r.collected = map[types.NamespacedName]time.Time{}
	adapter := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[k0rdentv1beta1.StateManagementProviderAdapterLabel] == k0rdentv1beta1.StateManagementProviderAdapterValue
	})
	// A ServiceTemplate that becomes valid (or invalid) requeues the ServiceSets using it.
	byTemplate := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var sets k0rdentv1beta1.ServiceSetList
		if err := r.client.List(ctx, &sets, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for _, ss := range sets.Items {
			for _, svc := range ss.Spec.Services {
				if svc.Template == o.GetName() {
					reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ss)})
					break
				}
			}
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).Named("sim-serviceset").
		For(&k0rdentv1beta1.ServiceSet{}, builder.WithPredicates(adapter)).
		Watches(&k0rdentv1beta1.ServiceTemplate{}, byTemplate).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// interval returns the status-collection interval of a namespace.
func (r *serviceSetReconciler) interval(ctx context.Context, namespace string) time.Duration {
	var ns corev1.Namespace
	if err := r.client.Get(ctx, types.NamespacedName{Name: namespace}, &ns); err == nil {
		if v, ok := ns.Annotations[StatusIntervalAnnotation]; ok {
			if d, err := time.ParseDuration(v); err == nil && d >= 0 {
				return d
			}
			log.FromContext(ctx).Info("ignoring a bad status interval annotation", "namespace", namespace, "value", v)
		}
	}
	return r.statusInterval
}

// Reconcile implements reconcile.Reconciler.
func (r *serviceSetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ss k0rdentv1beta1.ServiceSet
	if err := r.client.Get(ctx, req.NamespacedName, &ss); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ss.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, &ss)
	}
	// KCM acts only on ServiceSets of a StateManagementProvider it runs the adapter of; the
	// simulator knows only KCM's default one. Others are left alone, without a status.
	if ss.Spec.Provider.Name != k0rdentv1beta1.DefaultStateManagementProvider {
		log.FromContext(ctx).Info("skipping a ServiceSet of an unknown StateManagementProvider", "provider", ss.Spec.Provider.Name)
		return ctrl.Result{}, nil
	}
	if _, paused := ss.Annotations[k0rdentv1beta1.ServiceSetPausedAnnotation]; paused {
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(&ss, k0rdentv1beta1.ServiceSetFinalizer) {
		if err := r.client.Update(ctx, &ss); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.reconcileNormal(ctx, &ss)
}

func (r *serviceSetReconciler) reconcileNormal(ctx context.Context, ss *k0rdentv1beta1.ServiceSet) (ctrl.Result, error) {
	status := ss.Status.DeepCopy()
	status.Cluster = &corev1.ObjectReference{APIVersion: k0rdentv1beta1.GroupVersion.String(), Kind: "ClusterDeployment", Namespace: ss.Namespace, Name: ss.Spec.Cluster}
	status.Provider = k0rdentv1beta1.ServiceSetProviderStatus{Ready: true}
	var cd k0rdentv1beta1.ClusterDeployment
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: ss.Spec.Cluster}, &cd); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.seed(ss, status, fmt.Sprintf("ClusterDeployment %s/%s not found", ss.Namespace, ss.Spec.Cluster))
		return ctrl.Result{RequeueAfter: 5 * time.Second}, r.patchStatus(ctx, ss, status)
	}
	child := r.world.Child(ChildName(ss.Namespace, ss.Spec.Cluster))
	if child == nil {
		r.seed(ss, status, fmt.Sprintf("ClusterDeployment %s/%s has no running cluster yet", ss.Namespace, ss.Spec.Cluster))
		return ctrl.Result{RequeueAfter: 2 * time.Second}, r.patchStatus(ctx, ss, status)
	}
	interval := r.interval(ctx, ss.Namespace)
	key := client.ObjectKeyFromObject(ss)
	// KCM seeds new services at once when it creates the Profile; everything after that it learns
	// from Sveltos on its collection interval.
	seeded := len(status.Services) > 0
	write := func(status *k0rdentv1beta1.ServiceSetStatus) (time.Duration, error) {
		if interval > 0 && seeded {
			r.mu.Lock()
			last := r.collected[key]
			r.mu.Unlock()
			if wait := time.Until(last.Add(interval)); wait > 0 {
				return wait, nil
			}
		}
		if err := r.patchStatus(ctx, ss, status); err != nil {
			return 0, err
		}
		r.mu.Lock()
		r.collected[key] = time.Now()
		r.mu.Unlock()
		seeded = true
		return interval, nil
	}
	pc, pcErr := parseProviderConfig(ss)
	h := helmClient{kubeconfig: child.KubeconfigPath, log: log.FromContext(ctx)}
	plans, buildErr := r.plan(ctx, ss, h, child.Name, pc)
	switch {
	case pcErr != nil:
		setSSCond(status, ss.Generation, k0rdentv1beta1.ServiceSetProfileCondition, false, k0rdentv1beta1.ServiceSetProfileBuildFailedReason, pcErr.Error())
		plans = nil
	case buildErr != nil:
		setSSCond(status, ss.Generation, k0rdentv1beta1.ServiceSetProfileCondition, false, k0rdentv1beta1.ServiceSetHelmChartsBuildFailedReason, buildErr.Error())
	default:
		setSSCond(status, ss.Generation, k0rdentv1beta1.ServiceSetProfileCondition, true, k0rdentv1beta1.ServiceSetProfileReadyReason, "")
	}
	// Show Provisioning (Deleting for an uninstall) before the (possibly long) Helm operations.
	busy, unhealthy := false, false
	for _, p := range plans {
		switch {
		case p.work != nil && p.uninstall:
			busy = true
			setState(status, p.svc, k0rdentv1beta1.ServiceStateDeleting, "")
		case p.work != nil:
			busy = true
			setState(status, p.svc, k0rdentv1beta1.ServiceStateProvisioning, "")
		case p.state == k0rdentv1beta1.ServiceStateDeployed:
			unhealthy = r.confirm(ctx, child, status, p) || unhealthy
		default:
			setState(status, p.svc, p.state, p.message)
		}
	}
	r.pruneStates(ctx, ss, status, h)
	finish(ss, status)
	requeue := minPositive(r.retryAfter(child.Name, ss, plans), r.retryPlanFailures(child.Name, ss, plans))
	if buildErr != nil || pcErr != nil {
		// KCM requeues a ServiceSet whose Profile could not be built (a template not valid yet).
		requeue = minPositive(requeue, 10*time.Second)
	}
	if unhealthy {
		requeue = minPositive(requeue, healthPoll(interval))
	}
	if !busy {
		wait, err := write(status)
		if interval > 0 {
			requeue = minPositive(requeue, wait)
		}
		return ctrl.Result{RequeueAfter: requeue}, err
	}
	if interval == 0 || !seeded {
		if _, err := write(status); err != nil {
			return ctrl.Result{}, err
		}
	}
	failed := false
	for _, p := range plans {
		if p.work == nil {
			// A service failing (and waiting for its retry) stops the ones after it, too.
			failed = failed || p.state == k0rdentv1beta1.ServiceStateFailed
			continue
		}
		if failed && !pc.ContinueOnError {
			// Sveltos stops at the first failing chart unless continueOnError is set: the charts
			// after it are not deployed.
			setState(status, p.svc, k0rdentv1beta1.ServiceStatePending, "")
			continue
		}
		fkey := failureKey(child.Name, ss, p.svc)
		if err := p.work(); err != nil {
			failed = true
			r.recordFailure(fkey, p.fingerprint, err.Error())
			setState(status, p.svc, k0rdentv1beta1.ServiceStateFailed, err.Error())
			continue
		}
		r.forget(fkey)
		if p.uninstall {
			setState(status, p.svc, k0rdentv1beta1.ServiceStateDeleted, "")
		} else if r.confirm(ctx, child, status, p) {
			requeue = minPositive(requeue, healthPoll(interval))
		}
	}
	finish(ss, status)
	requeue = minPositive(requeue, r.retryAfter(child.Name, ss, plans))
	wait, err := write(status)
	if interval > 0 {
		requeue = minPositive(requeue, wait)
	}
	if failed {
		requeue = minPositive(requeue, retryBase)
	}
	return ctrl.Result{RequeueAfter: requeue}, err
}

// minPositive returns the smaller of two durations, ignoring zeros.
func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	case a < b:
		return a
	}
	return b
}

// reconcileDelete uninstalls every release of the ServiceSet and drops the finalizer. Like KCM, it
// reads the ClusterDeployment first: when that is gone, the finalizer stays (see docs/LOCAL_WORLD.md).
func (r *serviceSetReconciler) reconcileDelete(ctx context.Context, ss *k0rdentv1beta1.ServiceSet) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(ss, k0rdentv1beta1.ServiceSetFinalizer) {
		r.forgetServiceSet(ss)
		return ctrl.Result{}, nil
	}
	status := ss.Status.DeepCopy()
	var cd k0rdentv1beta1.ClusterDeployment
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: ss.Spec.Cluster}, &cd); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		setSSCond(status, ss.Generation, k0rdentv1beta1.ServiceSetProfileCondition, false, k0rdentv1beta1.ServiceSetProfileNotReadyReason,
			fmt.Sprintf("ClusterDeployment %s/%s not found: the finalizer stays, as with KCM", ss.Namespace, ss.Spec.Cluster))
		return ctrl.Result{RequeueAfter: 30 * time.Second}, r.patchStatus(ctx, ss, status)
	}
	for i := range status.Services {
		if status.Services[i].State != k0rdentv1beta1.ServiceStateDeleting {
			status.Services[i].State = k0rdentv1beta1.ServiceStateDeleting
			now := metav1.NewTime(time.Now().Truncate(time.Second))
			status.Services[i].LastStateTransitionTime = &now
		}
	}
	if err := r.patchStatus(ctx, ss, status); err != nil {
		return ctrl.Result{}, err
	}
	if child := r.world.Child(ChildName(ss.Namespace, ss.Spec.Cluster)); child != nil {
		h := helmClient{kubeconfig: child.KubeconfigPath, log: log.FromContext(ctx)}
		seen := map[string]bool{}
		releases := append([]k0rdentv1beta1.ServiceState{}, status.Services...)
		for _, svc := range ss.Spec.Services {
			releases = append(releases, k0rdentv1beta1.ServiceState{Name: svc.Name, Namespace: svc.Namespace})
		}
		for _, s := range releases {
			if seen[s.Namespace+"/"+s.Name] {
				continue
			}
			seen[s.Namespace+"/"+s.Name] = true
			if err := h.uninstall(s.Namespace, s.Name, 2*time.Minute); err != nil {
				return ctrl.Result{}, fmt.Errorf("uninstalling %s/%s: %w", s.Namespace, s.Name, err)
			}
		}
	}
	r.forgetServiceSet(ss)
	controllerutil.RemoveFinalizer(ss, k0rdentv1beta1.ServiceSetFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.client.Update(ctx, ss))
}
