package k0rdentsim

import (
	"context"
	"encoding/json"
	"fmt"
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
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// serviceSetReconciler plays KCM's Sveltos adapter and Sveltos itself: for each ServiceSet carrying
// the adapter label it installs, upgrades or uninstalls each service's chart on the child with the
// Helm SDK and maps the outcome to the ServiceSet status of the contract.
type serviceSetReconciler struct {
	client    client.Client
	reader    client.Reader // uncached, for valuesFrom Secrets and ConfigMaps
	world     *world.World
	chartsDir string

	mu sync.Mutex
	// failed remembers the last failed attempt of each release, so that a failed release is not
	// retried until its inputs change (Sveltos stops after consecutive failures).
	failed map[string]failure
}

// failure is a failed Helm attempt: the fingerprint of its inputs and its error.
type failure struct {
	fingerprint, message string
}

func (r *serviceSetReconciler) setup(mgr ctrl.Manager) error {
	r.failed = map[string]failure{}
	adapter := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[k0rdentv1beta1.StateManagementProviderAdapterLabel] == k0rdentv1beta1.StateManagementProviderAdapterValue
	})
	return ctrl.NewControllerManagedBy(mgr).Named("sim-serviceset").
		For(&k0rdentv1beta1.ServiceSet{}, builder.WithPredicates(adapter)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
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
	work        func() error
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
	h := helmClient{kubeconfig: child.KubeconfigPath, log: log.FromContext(ctx)}
	plans, buildErr := r.plan(ctx, ss, h, child.Name)
	if buildErr != nil {
		setSSCond(status, ss.Generation, k0rdentv1beta1.ServiceSetProfileCondition, false, k0rdentv1beta1.ServiceSetHelmChartsBuildFailedReason, buildErr.Error())
	} else {
		setSSCond(status, ss.Generation, k0rdentv1beta1.ServiceSetProfileCondition, true, k0rdentv1beta1.ServiceSetProfileReadyReason, "")
	}
	// Show Provisioning before the (possibly long) Helm operations.
	busy := false
	for _, p := range plans {
		if p.work != nil {
			busy = true
			setState(status, p.svc, k0rdentv1beta1.ServiceStateProvisioning, "")
		} else {
			setState(status, p.svc, p.state, p.message)
		}
	}
	r.pruneStates(ctx, ss, status, h)
	finish(ss, status)
	if err := r.patchStatus(ctx, ss, status); err != nil || !busy {
		return ctrl.Result{}, err
	}
	for _, p := range plans {
		if p.work == nil {
			continue
		}
		key := child.Name + "/" + p.svc.Namespace + "/" + p.svc.Name
		if err := p.work(); err != nil {
			r.setFailed(key, failure{fingerprint: p.fingerprint, message: err.Error()})
			setState(status, p.svc, k0rdentv1beta1.ServiceStateFailed, err.Error())
			continue
		}
		r.setFailed(key, failure{})
		setState(status, p.svc, k0rdentv1beta1.ServiceStateDeployed, "")
	}
	finish(ss, status)
	return ctrl.Result{}, r.patchStatus(ctx, ss, status)
}

// plan decides, per service, whether Helm must act and what state to report meanwhile.
func (r *serviceSetReconciler) plan(ctx context.Context, ss *k0rdentv1beta1.ServiceSet, h helmClient, childName string) ([]plan, error) {
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
				pp.work = func() error { return h.uninstall(svc.Namespace, svc.Name, opts.Timeout) }
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
		if msg, failed := r.failedBefore(childName+"/"+svc.Namespace+"/"+svc.Name, pp.fingerprint); failed {
			pp.state, pp.message = k0rdentv1beta1.ServiceStateFailed, msg
			continue
		}
		pp.work = func() error {
			_, err := h.apply(svc.Namespace, svc.Name, chrt, vals, opts)
			return err
		}
	}
	return plans, buildErr
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

// failedBefore reports whether the same inputs failed before, with that failure's message.
func (r *serviceSetReconciler) failedBefore(key, fp string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.failed[key]
	return f.message, ok && fp != "" && f.fingerprint == fp
}

// setFailed records a failure; a zero failure clears the record.
func (r *serviceSetReconciler) setFailed(key string, f failure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f.fingerprint == "" {
		delete(r.failed, key)
		return
	}
	r.failed[key] = f
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
	controllerutil.RemoveFinalizer(ss, k0rdentv1beta1.ServiceSetFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.client.Update(ctx, ss))
}
