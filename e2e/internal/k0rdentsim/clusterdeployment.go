package k0rdentsim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// ChildName is the world name of the child cluster of a ClusterDeployment.
func ChildName(namespace, cd string) string { return namespace + "-" + cd }

// clusterDeploymentReconciler plays KCM's ClusterDeployment controller plus Cluster API: it starts a
// child cluster for each ClusterDeployment, publishes `<cd>-kubeconfig`, and reports conditions.
type clusterDeploymentReconciler struct {
	client client.Client
	world  *world.World
}

func (r *clusterDeploymentReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim-clusterdeployment").
		For(&k0rdentv1beta1.ClusterDeployment{}).
		Watches(&k0rdentv1beta1.ServiceSet{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			ss := o.(*k0rdentv1beta1.ServiceSet)
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ss.Namespace, Name: ss.Spec.Cluster}}}
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *clusterDeploymentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cd k0rdentv1beta1.ClusterDeployment
	if err := r.client.Get(ctx, req.NamespacedName, &cd); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cd.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, &cd)
	}
	if controllerutil.AddFinalizer(&cd, k0rdentv1beta1.ClusterDeploymentFinalizer) {
		if err := r.client.Update(ctx, &cd); err != nil {
			return ctrl.Result{}, err
		}
	}
	status := cd.Status.DeepCopy()
	res, err := r.reconcileNormal(ctx, &cd, status)
	if perr := r.patchStatus(ctx, &cd, status); perr != nil && err == nil {
		err = perr
	}
	return res, err
}

func (r *clusterDeploymentReconciler) patchStatus(ctx context.Context, cd *k0rdentv1beta1.ClusterDeployment, status *k0rdentv1beta1.ClusterDeploymentStatus) error {
	if equality.Semantic.DeepEqual(*status, cd.Status) {
		return nil
	}
	patch := client.MergeFrom(cd.DeepCopy())
	cd.Status = *status.DeepCopy()
	return client.IgnoreNotFound(r.client.Status().Patch(ctx, cd, patch))
}

func setCond(status *k0rdentv1beta1.ClusterDeploymentStatus, gen int64, t string, ok bool, reason, msg string) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
}

func (r *clusterDeploymentReconciler) reconcileNormal(ctx context.Context, cd *k0rdentv1beta1.ClusterDeployment, status *k0rdentv1beta1.ClusterDeploymentStatus) (ctrl.Result, error) {
	gen := cd.Generation
	status.ObservedGeneration = gen
	fail := func(cond, msg string) (ctrl.Result, error) {
		setCond(status, gen, cond, false, k0rdentv1beta1.FailedReason, msg)
		setCond(status, gen, k0rdentv1beta1.ReadyCondition, false, k0rdentv1beta1.FailedReason, msg)
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	var tmpl k0rdentv1beta1.ClusterTemplate
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: cd.Namespace, Name: cd.Spec.Template}, &tmpl); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		return fail(k0rdentv1beta1.TemplateReadyCondition, fmt.Sprintf("ClusterTemplate %s/%s not found", cd.Namespace, cd.Spec.Template))
	}
	if !tmpl.Status.Valid {
		return fail(k0rdentv1beta1.TemplateReadyCondition, fmt.Sprintf("ClusterTemplate %s/%s is not valid: %s", cd.Namespace, cd.Spec.Template, tmpl.Status.ValidationError))
	}
	setCond(status, gen, k0rdentv1beta1.TemplateReadyCondition, true, k0rdentv1beta1.SucceededReason, "")
	if cd.Spec.Credential == "" {
		return fail(k0rdentv1beta1.CredentialReadyCondition, "spec.credential is empty")
	}
	var cred k0rdentv1beta1.Credential
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: cd.Namespace, Name: cd.Spec.Credential}, &cred); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		return fail(k0rdentv1beta1.CredentialReadyCondition, fmt.Sprintf("Credential %s/%s not found", cd.Namespace, cd.Spec.Credential))
	}
	if !cred.Status.Ready {
		return fail(k0rdentv1beta1.CredentialReadyCondition, fmt.Sprintf("Credential %s/%s is not ready", cd.Namespace, cd.Spec.Credential))
	}
	setCond(status, gen, k0rdentv1beta1.CredentialReadyCondition, true, k0rdentv1beta1.SucceededReason, "")
	if cd.Spec.DryRun {
		setCond(status, gen, k0rdentv1beta1.ReadyCondition, false, k0rdentv1beta1.ProgressingReason, "dry run: nothing is provisioned")
		return ctrl.Result{}, nil
	}
	var raw []byte
	if cd.Spec.Config != nil {
		raw = cd.Spec.Config.Raw
	}
	cfg, err := world.ParseClusterConfig(raw)
	if err == nil {
		_, err = cfg.BuildNodes()
	}
	if err != nil {
		return fail(k0rdentv1beta1.HelmReleaseReadyCondition, err.Error())
	}
	setCond(status, gen, k0rdentv1beta1.HelmReleaseReadyCondition, true, k0rdentv1beta1.SucceededReason, "")
	if meta.FindStatusCondition(status.Conditions, k0rdentv1beta1.CAPIClusterSummaryCondition) == nil {
		setCond(status, gen, k0rdentv1beta1.CAPIClusterSummaryCondition, false, k0rdentv1beta1.ProgressingReason, "provisioning the child cluster")
		setCond(status, gen, k0rdentv1beta1.ReadyCondition, false, k0rdentv1beta1.ProgressingReason, "provisioning the child cluster")
		// Show the Provisioning state before the (seconds long) start of the child.
		if err := r.patchStatus(ctx, cd, status); err != nil {
			return ctrl.Result{}, err
		}
	}
	child, err := r.world.StartChild(ctx, ChildName(cd.Namespace, cd.Name), cfg)
	if err != nil {
		setCond(status, gen, k0rdentv1beta1.CAPIClusterSummaryCondition, false, k0rdentv1beta1.FailedReason, err.Error())
		setCond(status, gen, k0rdentv1beta1.ReadyCondition, false, k0rdentv1beta1.FailedReason, err.Error())
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	if err := r.writeKubeconfig(ctx, cd, child.Kubeconfig); err != nil {
		return ctrl.Result{}, err
	}
	setCond(status, gen, k0rdentv1beta1.CAPIClusterSummaryCondition, true, k0rdentv1beta1.SucceededReason, "")
	status.KubernetesVersion = "v1.37.2"
	return ctrl.Result{}, r.aggregateServices(ctx, cd, status)
}

// aggregateServices copies the states of every ServiceSet of this ClusterDeployment into its status
// and derives ServicesInReadyState and Ready, as KCM does: pending services make Ready False.
func (r *clusterDeploymentReconciler) aggregateServices(ctx context.Context, cd *k0rdentv1beta1.ClusterDeployment, status *k0rdentv1beta1.ClusterDeploymentStatus) error {
	var sets k0rdentv1beta1.ServiceSetList
	if err := r.client.List(ctx, &sets, client.InNamespace(cd.Namespace)); err != nil {
		return err
	}
	var services []k0rdentv1beta1.ServiceState
	total, ready := 0, 0
	for _, ss := range sets.Items {
		if ss.Spec.Cluster != cd.Name {
			continue
		}
		total += len(ss.Spec.Services)
		for _, s := range ss.Status.Services {
			services = append(services, s)
			if s.State == k0rdentv1beta1.ServiceStateDeployed {
				ready++
			}
		}
	}
	status.Services = services
	gen := cd.Generation
	msg := fmt.Sprintf("%d/%d", ready, total)
	if ready >= total {
		setCond(status, gen, k0rdentv1beta1.ServicesInReadyStateCondition, true, k0rdentv1beta1.SucceededReason, msg)
		setCond(status, gen, k0rdentv1beta1.ReadyCondition, true, k0rdentv1beta1.SucceededReason, "")
		return nil
	}
	setCond(status, gen, k0rdentv1beta1.ServicesInReadyStateCondition, false, k0rdentv1beta1.ProgressingReason, msg)
	setCond(status, gen, k0rdentv1beta1.ReadyCondition, false, k0rdentv1beta1.ProgressingReason, "services not ready: "+msg)
	return nil
}

// writeKubeconfig publishes the child's kubeconfig as Cluster API does: Secret `<cd>-kubeconfig`,
// key value, type cluster.x-k8s.io/secret, label cluster.x-k8s.io/cluster-name.
func (r *clusterDeploymentReconciler) writeKubeconfig(ctx context.Context, cd *k0rdentv1beta1.ClusterDeployment, kubeconfig []byte) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cd.Namespace, Name: k0rdentv1beta1.KubeconfigSecretName(cd.Name)}}
	_, err := controllerutil.CreateOrPatch(ctx, r.client, s, func() error {
		if s.CreationTimestamp.IsZero() {
			s.Type = "cluster.x-k8s.io/secret"
		}
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels["cluster.x-k8s.io/cluster-name"] = cd.Name
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[k0rdentv1beta1.KubeconfigSecretKey] = kubeconfig
		return nil
	})
	return err
}

// reconcileDelete deletes the ServiceSets owned by the ClusterDeployment (ownerReferences naming it)
// and waits for them, then tears the child down and drops the finalizer.
func (r *clusterDeploymentReconciler) reconcileDelete(ctx context.Context, cd *k0rdentv1beta1.ClusterDeployment) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(cd, k0rdentv1beta1.ClusterDeploymentFinalizer) {
		return ctrl.Result{}, nil
	}
	var sets k0rdentv1beta1.ServiceSetList
	if err := r.client.List(ctx, &sets, client.InNamespace(cd.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	waiting := 0
	for i := range sets.Items {
		ss := &sets.Items[i]
		if !ownedBy(ss, cd.Name) {
			continue
		}
		waiting++
		if ss.DeletionTimestamp.IsZero() {
			if err := r.client.Delete(ctx, ss); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
		}
	}
	status := cd.Status.DeepCopy()
	if waiting > 0 {
		msg := fmt.Sprintf("waiting for %d ServiceSet(s) to be deleted", waiting)
		setCond(status, cd.Generation, k0rdentv1beta1.DeletingCondition, true, k0rdentv1beta1.WaitingForServiceSetsDeletionReason, msg)
		setCond(status, cd.Generation, k0rdentv1beta1.ReadyCondition, false, k0rdentv1beta1.DeletingReason, msg)
		return ctrl.Result{RequeueAfter: 2 * time.Second}, r.patchStatus(ctx, cd, status)
	}
	setCond(status, cd.Generation, k0rdentv1beta1.DeletingCondition, true, k0rdentv1beta1.DeletingReason, "tearing down the child cluster")
	setCond(status, cd.Generation, k0rdentv1beta1.ReadyCondition, false, k0rdentv1beta1.DeletingReason, "tearing down the child cluster")
	if err := r.patchStatus(ctx, cd, status); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.world.StopChild(ChildName(cd.Namespace, cd.Name)); err != nil {
		log.FromContext(ctx).Error(err, "stopping the child cluster")
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cd.Namespace, Name: k0rdentv1beta1.KubeconfigSecretName(cd.Name)}}
	if err := r.client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	controllerutil.RemoveFinalizer(cd, k0rdentv1beta1.ClusterDeploymentFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.client.Update(ctx, cd))
}

func ownedBy(o metav1.Object, name string) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Name == name {
			return true
		}
	}
	return false
}
