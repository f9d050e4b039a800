package k0rdentsim

import (
	"context"
	"encoding/json"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// templateReconciler plays KCM's template and credential controllers: a ServiceTemplate is valid when
// its chart exists under the charts directory (status.chartVersion, description and config come from
// the chart); every ClusterTemplate is valid (the simulator provisions any of them); a Credential with
// an identityRef is ready.
type templateReconciler struct {
	client    client.Client
	chartsDir string
}

func (r *templateReconciler) setup(mgr ctrl.Manager) error {
	if err := ctrl.NewControllerManagedBy(mgr).Named("sim-servicetemplate").For(&k0rdentv1beta1.ServiceTemplate{}).
		Complete(reconcilerFunc(r.serviceTemplate)); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("sim-clustertemplate").For(&k0rdentv1beta1.ClusterTemplate{}).
		Complete(reconcilerFunc(r.clusterTemplate)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("sim-credential").For(&k0rdentv1beta1.Credential{}).
		Complete(reconcilerFunc(r.credential))
}

type reconcilerFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f reconcilerFunc) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return f(ctx, req)
}

func (r *templateReconciler) serviceTemplate(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var t k0rdentv1beta1.ServiceTemplate
	if err := r.client.Get(ctx, req.NamespacedName, &t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	want := t.Status.DeepCopy()
	want.ObservedGeneration = t.Generation
	chrt, err := loadChart(r.chartsDir, &t)
	if err != nil {
		want.Valid, want.ValidationError = false, err.Error()
		want.ChartVersion, want.Description, want.Config = "", "", nil
	} else {
		want.Valid, want.ValidationError = true, ""
		want.ChartVersion, want.Description = chrt.Metadata.Version, chrt.Metadata.Description
		want.Config = nil
		if len(chrt.Values) > 0 {
			if b, err := json.Marshal(chrt.Values); err == nil {
				want.Config = &apiextensionsv1.JSON{Raw: b}
			}
		}
	}
	if equality.Semantic.DeepEqual(*want, t.Status) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(t.DeepCopy())
	t.Status = *want
	return ctrl.Result{}, r.client.Status().Patch(ctx, &t, patch)
}

func (r *templateReconciler) clusterTemplate(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var t k0rdentv1beta1.ClusterTemplate
	if err := r.client.Get(ctx, req.NamespacedName, &t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if t.Status.Valid && t.Status.ObservedGeneration == t.Generation && equality.Semantic.DeepEqual(t.Status.Providers, t.Spec.Providers) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(t.DeepCopy())
	t.Status.Valid, t.Status.ValidationError, t.Status.ObservedGeneration = true, "", t.Generation
	t.Status.Providers = t.Spec.Providers
	t.Status.Description = "simulated cluster (k0rdent simulator, test tooling)"
	t.Status.KubernetesVersion = "v1.37.2"
	return ctrl.Result{}, r.client.Status().Patch(ctx, &t, patch)
}

func (r *templateReconciler) credential(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var c k0rdentv1beta1.Credential
	if err := r.client.Get(ctx, req.NamespacedName, &c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ready := c.Spec.IdentityRef != nil
	if c.Status.Ready == ready {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Status.Ready = ready
	return ctrl.Result{}, r.client.Status().Patch(ctx, &c, patch)
}
