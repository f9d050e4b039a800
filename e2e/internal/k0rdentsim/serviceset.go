package k0rdentsim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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

	mu sync.Mutex
	// failed remembers the failed attempts of each release (per ServiceSet), so that a failed release
	// is retried with backoff as Sveltos does, and not at all after maxConsecutiveFailures.
	failed map[string]failure
	// collected is when the status of each ServiceSet was last written (status interval).
	collected map[types.NamespacedName]time.Time
}

// failure is a failed Helm attempt: the fingerprint of its inputs, its error, how many attempts in a
// row failed and when the next one may run.
type failure struct {
	fingerprint, message string
	count                int
	next                 time.Time
}

// StatusIntervalAnnotation on a namespace sets the status-collection interval (a Go duration, e.g.
// "10s" for KCM's cadence) of the ServiceSets in it.
const StatusIntervalAnnotation = "k0rdent-sim.exalsius.ai/status-interval"

// Retry backoff of a failed release: Sveltos requeues a failed ClusterSummary with a growing delay.
const (
	retryBase = 5 * time.Second
	retryMax  = 2 * time.Minute
)

// providerConfig is the part of a ServiceSet's spec.provider.config the simulator honours.
type providerConfig struct {
	ContinueOnError        bool   `json:"continueOnError"`
	MaxConsecutiveFailures *int64 `json:"maxConsecutiveFailures"`
}

func parseProviderConfig(ss *k0rdentv1beta1.ServiceSet) (providerConfig, error) {
	var pc providerConfig
	if ss.Spec.Provider.Config == nil || len(ss.Spec.Provider.Config.Raw) == 0 {
		return pc, nil
	}
	if err := json.Unmarshal(ss.Spec.Provider.Config.Raw, &pc); err != nil {
		return pc, fmt.Errorf("spec.provider.config: %w", err)
	}
	return pc, nil
}

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

// plan is what one service needs.
type plan struct {
	svc         k0rdentv1beta1.ServiceWithValues
	state       k0rdentv1beta1.ServiceDeploymentState
	message     string
	fingerprint string
	// uninstall is set when work removes the release (the state meanwhile is Deleting).
	uninstall bool
	work      func() error
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
	busy := false
	for _, p := range plans {
		switch {
		case p.work != nil && p.uninstall:
			busy = true
			setState(status, p.svc, k0rdentv1beta1.ServiceStateDeleting, "")
		case p.work != nil:
			busy = true
			setState(status, p.svc, k0rdentv1beta1.ServiceStateProvisioning, "")
		default:
			setState(status, p.svc, p.state, p.message)
		}
	}
	r.pruneStates(ctx, ss, status, h)
	finish(ss, status)
	requeue := r.retryAfter(child.Name, ss, plans)
	if buildErr != nil || pcErr != nil {
		// KCM requeues a ServiceSet whose Profile could not be built (a template not valid yet).
		requeue = minPositive(requeue, 10*time.Second)
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
		} else {
			setState(status, p.svc, k0rdentv1beta1.ServiceStateDeployed, "")
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

// failureKey identifies a release of a ServiceSet: failure records belong to the ServiceSet (by
// UID), so a recreated ServiceSet starts with a clean slate, as a new Sveltos ClusterSummary does.
func failureKey(child string, ss *k0rdentv1beta1.ServiceSet, svc k0rdentv1beta1.ServiceWithValues) string {
	return string(ss.UID) + "/" + child + "/" + svc.Namespace + "/" + svc.Name
}

// retryAfter returns when the earliest waiting retry of a failed service is due (zero: none waits).
func (r *serviceSetReconciler) retryAfter(child string, ss *k0rdentv1beta1.ServiceSet, plans []plan) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var d time.Duration
	for _, p := range plans {
		if p.state != k0rdentv1beta1.ServiceStateFailed || p.fingerprint == "" {
			continue
		}
		if f, ok := r.failed[failureKey(child, ss, p.svc)]; ok && f.fingerprint == p.fingerprint && time.Now().Before(f.next) {
			d = minPositive(d, time.Until(f.next)+100*time.Millisecond)
		}
	}
	return d
}

// plan decides, per service, whether Helm must act and what state to report meanwhile.
func (r *serviceSetReconciler) plan(ctx context.Context, ss *k0rdentv1beta1.ServiceSet, h helmClient, childName string, pc providerConfig) ([]plan, error) {
	var buildErr error
	plans := make([]plan, 0, len(ss.Spec.Services))
	for _, svc := range ss.Spec.Services {
		p := plan{svc: svc}
		plans = append(plans, p)
		pp := &plans[len(plans)-1]
		var tmpl k0rdentv1beta1.ServiceTemplate
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: svc.Template}, &tmpl); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, err
			}
			buildErr = fmt.Errorf("ServiceTemplate %s/%s not found", ss.Namespace, svc.Template)
			pp.state, pp.message = k0rdentv1beta1.ServiceStateProvisioning, buildErr.Error()
			continue
		}
		if !tmpl.Status.Valid {
			buildErr = fmt.Errorf("ServiceTemplate %s/%s is not valid: %s", ss.Namespace, svc.Template, tmpl.Status.ValidationError)
			pp.state, pp.message = k0rdentv1beta1.ServiceStateProvisioning, buildErr.Error()
			continue
		}
		opts, err := parseHelmOptions(mergeHelmOptions(tmpl.Spec.HelmOptions, svc.HelmOptions))
		if err != nil {
			pp.state, pp.message = k0rdentv1beta1.ServiceStateFailed, err.Error()
			continue
		}
		if svc.HelmAction != nil && *svc.HelmAction == k0rdentv1beta1.HelmActionUninstall {
			rel, err := h.release(svc.Namespace, svc.Name)
			if err != nil {
				pp.state, pp.message = k0rdentv1beta1.ServiceStateFailed, err.Error()
				continue
			}
			pp.state = k0rdentv1beta1.ServiceStateDeleted
			if rel != nil {
				pp.uninstall = true
				pp.fingerprint = "uninstall"
				pp.work = func() error { return h.uninstall(svc.Namespace, svc.Name, opts.Timeout) }
				r.gate(failureKey(childName, ss, svc), pp, pc)
			}
			continue
		}
		chrt, err := loadChart(r.chartsDir, &tmpl)
		if err != nil {
			pp.state, pp.message = k0rdentv1beta1.ServiceStateFailed, err.Error()
			continue
		}
		vals, err := serviceValues(ctx, r.reader, ss.Namespace, ss.Spec.Cluster, svc)
		if err != nil {
			pp.state, pp.message = k0rdentv1beta1.ServiceStateFailed, err.Error()
			continue
		}
		rel, err := h.release(svc.Namespace, svc.Name)
		if err != nil {
			pp.state, pp.message = k0rdentv1beta1.ServiceStateFailed, err.Error()
			continue
		}
		if upToDate(rel, chrt, vals) {
			pp.state = k0rdentv1beta1.ServiceStateDeployed
			continue
		}
		fp, _ := json.Marshal([]interface{}{chrt.Metadata.Name, chrt.Metadata.Version, vals, opts})
		pp.fingerprint = string(fp)
		pp.work = func() error {
			_, err := h.apply(svc.Namespace, svc.Name, chrt, vals, opts)
			return err
		}
		r.gate(failureKey(childName, ss, svc), pp, pc)
	}
	return plans, buildErr
}

// gate holds back the work of a release that failed before with the same inputs: until its backoff
// has passed, or for good once maxConsecutiveFailures attempts in a row failed (Sveltos's
// FailedNonRetriable). Changed inputs retry at once.
func (r *serviceSetReconciler) gate(key string, pp *plan, pc providerConfig) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.failed[key]
	if !ok || f.fingerprint != pp.fingerprint {
		return
	}
	if pc.MaxConsecutiveFailures != nil && int64(f.count) >= *pc.MaxConsecutiveFailures {
		pp.state, pp.message, pp.work = k0rdentv1beta1.ServiceStateFailed, fmt.Sprintf("%s (not retried after %d consecutive failures)", f.message, f.count), nil
		return
	}
	if time.Now().Before(f.next) {
		pp.state, pp.message, pp.work = k0rdentv1beta1.ServiceStateFailed, f.message, nil
	}
}

// mergeHelmOptions lays a service's helmOptions over its template's, key by key.
func mergeHelmOptions(tmpl, svc *apiextensionsJSON) *apiextensionsJSON {
	if tmpl == nil || len(tmpl.Raw) == 0 {
		return svc
	}
	if svc == nil || len(svc.Raw) == 0 {
		return tmpl
	}
	var a, b map[string]interface{}
	if json.Unmarshal(tmpl.Raw, &a) != nil || json.Unmarshal(svc.Raw, &b) != nil {
		return svc
	}
	for k, v := range b {
		a[k] = v
	}
	raw, _ := json.Marshal(a)
	return &apiextensionsJSON{Raw: raw}
}

// recordFailure counts a failed attempt and schedules the next one with backoff; an attempt with
// other inputs starts counting anew.
func (r *serviceSetReconciler) recordFailure(key, fingerprint, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.failed[key]
	if f.fingerprint != fingerprint {
		f = failure{fingerprint: fingerprint}
	}
	f.count++
	f.message = message
	backoff := retryBase << min(f.count-1, 10)
	f.next = time.Now().Add(min(backoff, retryMax))
	r.failed[key] = f
}

// forget drops the failure record of a release.
func (r *serviceSetReconciler) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failed, key)
}

// forgetServiceSet drops every record of a ServiceSet (on delete), as Sveltos forgets a deleted
// ClusterSummary.
func (r *serviceSetReconciler) forgetServiceSet(ss *k0rdentv1beta1.ServiceSet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.failed {
		if strings.HasPrefix(k, string(ss.UID)+"/") {
			delete(r.failed, k)
		}
	}
	delete(r.collected, client.ObjectKeyFromObject(ss))
}

// seed gives every service without a state the Provisioning state KCM seeds new services with.
func (r *serviceSetReconciler) seed(ss *k0rdentv1beta1.ServiceSet, status *k0rdentv1beta1.ServiceSetStatus, msg string) {
	for _, svc := range ss.Spec.Services {
		if findState(status, svc) == nil {
			setState(status, svc, k0rdentv1beta1.ServiceStateProvisioning, "")
		}
	}
	setSSCond(status, ss.Generation, k0rdentv1beta1.ServiceSetProfileCondition, false, k0rdentv1beta1.ServiceSetProfileNotReadyReason, msg)
	finish(ss, status)
}

// pruneStates uninstalls releases of services removed from the spec and drops their states.
func (r *serviceSetReconciler) pruneStates(ctx context.Context, ss *k0rdentv1beta1.ServiceSet, status *k0rdentv1beta1.ServiceSetStatus, h helmClient) {
	kept := status.Services[:0]
	for _, s := range status.Services {
		if inSpec(ss, s.Name, s.Namespace) {
			kept = append(kept, s)
			continue
		}
		if err := h.uninstall(s.Namespace, s.Name, 2*time.Minute); err != nil {
			log.FromContext(ctx).Error(err, "uninstalling a removed service", "release", s.Name, "namespace", s.Namespace)
			kept = append(kept, s)
		}
	}
	status.Services = kept
}

func inSpec(ss *k0rdentv1beta1.ServiceSet, name, namespace string) bool {
	for _, svc := range ss.Spec.Services {
		if svc.Name == name && svc.Namespace == namespace {
			return true
		}
	}
	return false
}

func findState(status *k0rdentv1beta1.ServiceSetStatus, svc k0rdentv1beta1.ServiceWithValues) *k0rdentv1beta1.ServiceState {
	for i := range status.Services {
		if status.Services[i].Name == svc.Name && status.Services[i].Namespace == svc.Namespace {
			return &status.Services[i]
		}
	}
	return nil
}

// setState records a service's state; the transition time moves only when the state changes.
func setState(status *k0rdentv1beta1.ServiceSetStatus, svc k0rdentv1beta1.ServiceWithValues, state k0rdentv1beta1.ServiceDeploymentState, msg string) {
	s := findState(status, svc)
	if s == nil {
		status.Services = append(status.Services, k0rdentv1beta1.ServiceState{Type: k0rdentv1beta1.ServiceTypeHelm, Name: svc.Name, Namespace: svc.Namespace})
		s = &status.Services[len(status.Services)-1]
	}
	s.Type, s.Template = k0rdentv1beta1.ServiceTypeHelm, svc.Template
	if s.State != state || s.LastStateTransitionTime == nil {
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		s.LastStateTransitionTime = &now
	}
	s.State, s.FailureMessage = state, msg
	if state == k0rdentv1beta1.ServiceStateDeployed && svc.Version != nil {
		v := *svc.Version
		s.Version = &v
	}
}

// finish derives deployed and the collected/ready conditions from the service states.
func finish(ss *k0rdentv1beta1.ServiceSet, status *k0rdentv1beta1.ServiceSetStatus) {
	deployed := 0
	for _, s := range status.Services {
		if s.State == k0rdentv1beta1.ServiceStateDeployed {
			deployed++
		}
	}
	total := len(ss.Spec.Services)
	status.Deployed = deployed == total && len(status.Services) == total
	setSSCond(status, ss.Generation, k0rdentv1beta1.ServiceSetStatusesCollectedCondition, true, k0rdentv1beta1.ServiceSetStatusesCollectedReason, "")
	reason := k0rdentv1beta1.SucceededReason
	if !status.Deployed {
		reason = k0rdentv1beta1.ProgressingReason
	}
	setSSCond(status, ss.Generation, k0rdentv1beta1.ServicesInReadyStateCondition, status.Deployed, reason, fmt.Sprintf("%d/%d", deployed, total))
}

func setSSCond(status *k0rdentv1beta1.ServiceSetStatus, gen int64, t string, ok bool, reason, msg string) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
}

func (r *serviceSetReconciler) patchStatus(ctx context.Context, ss *k0rdentv1beta1.ServiceSet, status *k0rdentv1beta1.ServiceSetStatus) error {
	if equality.Semantic.DeepEqual(*status, ss.Status) {
		return nil
	}
	patch := client.MergeFrom(ss.DeepCopy())
	ss.Status = *status.DeepCopy()
	return client.IgnoreNotFound(r.client.Status().Patch(ctx, ss, patch))
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
