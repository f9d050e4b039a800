package k0rdentsim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// Fixture names.
const (
	// ClusterTemplateName is the simulator's ClusterTemplate; its config is world.ClusterConfig.
	ClusterTemplateName = "sim-cluster"
	// CredentialName is a Credential the simulator reports ready.
	CredentialName = "sim-credential"
)

// ClusterTemplate returns the simulator's ClusterTemplate in a namespace.
func ClusterTemplate(namespace string) *k0rdentv1beta1.ClusterTemplate {
	return &k0rdentv1beta1.ClusterTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ClusterTemplateName},
		Spec: k0rdentv1beta1.ClusterTemplateSpec{
			Helm: k0rdentv1beta1.HelmSpec{ChartSpec: &k0rdentv1beta1.HelmChartSpec{
				Chart:     ClusterTemplateName,
				Version:   "0.1.0",
				SourceRef: k0rdentv1beta1.LocalHelmChartSourceReference{Kind: "HelmRepository", Name: "kcm-templates"},
				Interval:  metav1.Duration{Duration: 10 * time.Minute},
			}},
			Providers: []string{"infrastructure-kwok"},
		},
	}
}

// Credential returns a Credential the simulator reports ready.
func Credential(namespace string) *k0rdentv1beta1.Credential {
	return &k0rdentv1beta1.Credential{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: CredentialName},
		Spec: k0rdentv1beta1.CredentialSpec{
			IdentityRef: &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: namespace, Name: "sim-identity"},
			Description: "simulated cloud identity (k0rdent simulator)",
		},
	}
}

// ServiceTemplate returns a ServiceTemplate for a chart folder under the charts directory; version is
// the chart's version.
func ServiceTemplate(namespace, name, chart, version string) *k0rdentv1beta1.ServiceTemplate {
	return &k0rdentv1beta1.ServiceTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: k0rdentv1beta1.ServiceTemplateSpec{
			Helm: &k0rdentv1beta1.HelmSpec{ChartSpec: &k0rdentv1beta1.HelmChartSpec{
				Chart:     chart,
				Version:   version,
				SourceRef: k0rdentv1beta1.LocalHelmChartSourceReference{Kind: "HelmRepository", Name: "kcm-templates"},
				Interval:  metav1.Duration{Duration: 10 * time.Minute},
			}},
			Version: version,
		},
	}
}

// Ensure creates the objects (and their namespaces) when missing; existing ones are left alone.
func Ensure(ctx context.Context, c client.Client, objs ...client.Object) error {
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
			if err := c.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("namespace %s: %w", ns, err)
			}
		}
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// EnsureClusterFixtures creates the ClusterTemplate, the adopted-cluster ClusterTemplate (kinds.go)
// and the Credential in each namespace and waits until the template is valid and the credential ready: KCM's admission refuses ClusterDeployments before.
func EnsureClusterFixtures(ctx context.Context, c client.Client, namespaces ...string) error {
	for _, ns := range namespaces {
		if err := Ensure(ctx, c, ClusterTemplate(ns), AdoptedClusterTemplate(ns), Credential(ns)); err != nil {
			return err
		}
	}
	for _, ns := range namespaces {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			var t k0rdentv1beta1.ClusterTemplate
			var cred k0rdentv1beta1.Credential
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ClusterTemplateName}, &t); err != nil {
				return false, nil
			}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: CredentialName}, &cred); err != nil {
				return false, nil
			}
			return t.Status.Valid && len(t.Status.Providers) > 0 && cred.Status.Ready, nil
		})
		if err != nil {
			return fmt.Errorf("the cluster fixtures of namespace %s did not become valid and ready: %w", ns, err)
		}
	}
	return nil
}
