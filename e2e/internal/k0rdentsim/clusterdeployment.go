package k0rdentsim

import (
	"context"
	"fmt"
	"time"

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
	kind := kindOf(&tmpl, &cred) // adopted or regional (kinds.go)
	status.Region = kind.region
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
	capi := !kind.adopted && kind.region == "" // a Cluster API Cluster on the management cluster (capicluster.go)
	if capi {
		if err := r.ensureCAPICluster(ctx, cd); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !kind.adopted && meta.FindStatusCondition(status.Conditions, k0rdentv1beta1.CAPIClusterSummaryCondition) == nil {
		setCond(status, gen, k0rdentv1beta1.CAPIClusterSummaryCondition, false, k0rdentv1beta1.ProgressingReason, "provisioning the child cluster")
		setCond(status, gen, k0rdentv1beta1.ReadyCondition, false, k0rdentv1beta1.ProgressingReason, "provisioning the child cluster")
		// Show the Provisioning state before the (seconds long) start of the child.
		if err := r.patchStatus(ctx, cd, status); err != nil {
			return ctrl.Result{}, err
		}
	}
	// Cluster API writes the kubeconfig Secret as soon as the control plane answers, well before the
	// cluster is ready; GPUs appear once the device plugin runs on a Ready node.
	child, err := r.world.StartChildWith(ctx, ChildName(cd.Namespace, cd.Name), cfg, world.ChildOptions{
		OnAPIServerUp: func(c *world.ChildCluster) error { return r.publishKubeconfig(ctx, cd, &cred, kind, c.Kubeconfig) },
		DeferDevices:  true,
	})
	upCond := k0rdentv1beta1.CAPIClusterSummaryCondition
	if kind.adopted {
		upCond = k0rdentv1beta1.SveltosClusterReadyCondition // no Cluster API cluster: KCM follows the SveltosCluster
	}
	if err != nil {
		setCond(status, gen, upCond, false, k0rdentv1beta1.FailedReason, err.Error())
		setCond(status, gen, k0rdentv1beta1.ReadyCondition, false, k0rdentv1beta1.FailedReason, err.Error())
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	if err := r.publishKubeconfig(ctx, cd, &cred, kind, child.Kubeconfig); err != nil {
		return ctrl.Result{}, err
	}
	if capi {
		if err := r.setCAPIClusterStatus(ctx, cd, true); err != nil {
			return ctrl.Result{}, err
		}
	}
	setCond(status, gen, upCond, true, k0rdentv1beta1.SucceededReason, "")
	status.KubernetesVersion = "v1.37.2"
	if err := r.patchStatus(ctx, cd, status); err != nil {
		return ctrl.Result{}, err
	}
	if err := child.AdvertiseDevices(ctx); err != nil {
		return ctrl.Result{}, err
	}
	res := ctrl.Result{}
	if ok, _ := child.DevicesAdvertised(ctx); !ok {
		// A node added to the config is not Ready yet: its GPUs come once it is.
		res.RequeueAfter = time.Second
	}
	if err := r.reconcileServiceSpec(ctx, cd); err != nil {
		return ctrl.Result{}, err
	}
	return res, r.aggregateServices(ctx, cd, status)
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
	if err := r.deleteCAPICluster(ctx, cd); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.world.StopChild(ChildName(cd.Namespace, cd.Name)); err != nil {
		log.FromContext(ctx).Error(err, "stopping the child cluster")
	}
	if err := r.unpublishKubeconfig(ctx, cd); err != nil {
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

// reconcileServiceSpec deploys a ClusterDeployment's spec.serviceSpec as KCM does: through a
// ServiceSet named after the ClusterDeployment, controlled by it and labelled for the default
// StateManagementProvider. Disabled services are left out; a release namespace defaults to
// `default`.
func (r *clusterDeploymentReconciler) reconcileServiceSpec(ctx context.Context, cd *k0rdentv1beta1.ClusterDeployment) error {
	var services []k0rdentv1beta1.ServiceWithValues
	for _, s := range cd.Spec.ServiceSpec.Services {
		if s.Disable {
			continue
		}
		ns := s.Namespace
		if ns == "" {
			ns = "default"
		}
		svc := k0rdentv1beta1.ServiceWithValues{Name: s.Name, Namespace: ns, Template: s.Template, Values: s.Values,
			ValuesFrom: s.ValuesFrom, HelmAction: s.HelmAction, HelmOptions: s.HelmOptions}
		if s.Version != "" {
			v := s.Version
			svc.Version = &v
		}
		services = append(services, svc)
	}
	ss := &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Namespace: cd.Namespace, Name: cd.Name}}
	err := r.client.Get(ctx, client.ObjectKeyFromObject(ss), ss)
	if apierrors.IsNotFound(err) && len(services) == 0 {
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	_, err = controllerutil.CreateOrPatch(ctx, r.client, ss, func() error {
		if ss.Labels == nil {
			ss.Labels = map[string]string{}
		}
		ss.Labels[k0rdentv1beta1.StateManagementProviderAdapterLabel] = k0rdentv1beta1.StateManagementProviderAdapterValue
		ss.Spec.Cluster = cd.Name
		provider := cd.Spec.ServiceSpec.Provider
		if provider.Name == "" {
			provider.Name = k0rdentv1beta1.DefaultStateManagementProvider
		}
		if ss.Spec.Provider.Name != "" {
			provider.Name = ss.Spec.Provider.Name // immutable once set
		}
		ss.Spec.Provider = provider
		ss.Spec.Services = services
		return controllerutil.SetControllerReference(cd, ss, r.client.Scheme())
	})
	return err
}
