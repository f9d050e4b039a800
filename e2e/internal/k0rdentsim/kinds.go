package k0rdentsim

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
)

// k0rdent's other cluster kinds, as the simulator plays them (docs/LOCAL_WORLD.md):
//
//   - adopted: a ClusterDeployment of a ClusterTemplate whose provider is infrastructure-internal
//     (KCM's adopted-cluster templates). KCM's chart makes a SveltosCluster of the ClusterDeployment's
//     name whose kubeconfig is the Credential's identity Secret (key `value`); there is no
//     `<cd>-kubeconfig`. The simulator starts the child (the "existing" cluster) itself and writes its
//     kubeconfig into that identity Secret when the Secret does not exist yet, playing the admin who
//     registered the cluster;
//   - regional: a ClusterDeployment whose Credential has spec.region. Its `<cd>-kubeconfig` Secret is
//     written on the regional cluster, reached through the Region's kubeconfig (spec.kubeConfig, a
//     Secret key in kcm-system, or spec.clusterDeployment, whose own `<cd>-kubeconfig` is on the
//     management cluster), and status.region names the Region.

// AdoptedClusterTemplateName is the simulator's ClusterTemplate for adopted clusters.
const AdoptedClusterTemplateName = "sim-adopted-cluster"

// AdoptedProvider is the provider of KCM's adopted-cluster templates.
const AdoptedProvider = "infrastructure-internal"

// SystemNamespace is k0rdent's system namespace, where a Region's kubeconfig Secret lives.
const SystemNamespace = "kcm-system"

var (
	// SveltosClusterGVK is the kind of Sveltos' SveltosCluster.
	SveltosClusterGVK = schema.GroupVersionKind{Group: "lib.projectsveltos.io", Version: "v1beta1", Kind: "SveltosCluster"}
	regionGVK         = k0rdentv1beta1.GroupVersion.WithKind("Region")
)

// AdoptedClusterTemplate returns the simulator's ClusterTemplate for adopted clusters in a namespace;
// its config is world.ClusterConfig, like ClusterTemplate's.
func AdoptedClusterTemplate(namespace string) *k0rdentv1beta1.ClusterTemplate {
	t := ClusterTemplate(namespace)
	t.Name = AdoptedClusterTemplateName
	t.Spec.Helm.ChartSpec.Chart = AdoptedClusterTemplateName
	t.Spec.Providers = []string{AdoptedProvider}
	return t
}

// sveltosClusterCRD is a minimal CRD of Sveltos' SveltosCluster (free-form spec), installed when the
// management cluster has none, so that the local world can adopt clusters without Sveltos.
func sveltosClusterCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "sveltosclusters.lib.projectsveltos.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: SveltosClusterGVK.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "sveltosclusters", Singular: "sveltoscluster",
				Kind: "SveltosCluster", ListKind: "SveltosClusterList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
}

// EnsureKindCRDs installs minimal SveltosCluster and Region CRDs on the management cluster when it
// has none (a real or shared CRD installed before is kept) and waits until they are served.
func EnsureKindCRDs(ctx context.Context, cfg *rest.Config) error {
	sch := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(sch); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		return err
	}
	crds := []*apiextensionsv1.CustomResourceDefinition{sveltosClusterCRD(), childtest.RegionCRD()}
	for _, crd := range crds {
		if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
	}
	var served []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
			return err
		}
		served = append(served, got)
	}
	return envtest.WaitForCRDs(cfg, served, envtest.CRDInstallOptions{MaxTime: time.Minute, PollInterval: 100 * time.Millisecond})
}

// clusterKind says how a ClusterDeployment's kubeconfig is published.
type clusterKind struct {
	adopted bool
	// region is the Credential's spec.region ("" on the management cluster).
	region string
}

func kindOf(tmpl *k0rdentv1beta1.ClusterTemplate, cred *k0rdentv1beta1.Credential) clusterKind {
	return clusterKind{adopted: slices.Contains(tmpl.Status.Providers, AdoptedProvider), region: cred.Spec.Region}
}

// publishKubeconfig publishes a child's kubeconfig where k0rdent would have it for the kind.
func (r *clusterDeploymentReconciler) publishKubeconfig(ctx context.Context, cd *k0rdentv1beta1.ClusterDeployment, cred *k0rdentv1beta1.Credential, kind clusterKind, kubeconfig []byte) error {
	switch {
	case kind.adopted:
		return r.publishAdopted(ctx, cd, cred, kubeconfig)
	case kind.region != "":
		rc, err := r.regionalClient(ctx, kind.region)
		if err != nil {
			return err
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cd.Namespace}}
		if err := rc.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("Region %s: %w", kind.region, err)
		}
		return writeKubeconfigSecret(ctx, rc, cd, kubeconfig)
	}
	return writeKubeconfigSecret(ctx, r.client, cd, kubeconfig)
}

// publishAdopted writes the identity Secret (when missing) and the SveltosCluster of an adopted
// cluster.
func (r *clusterDeploymentReconciler) publishAdopted(ctx context.Context, cd *k0rdentv1beta1.ClusterDeployment, cred *k0rdentv1beta1.Credential, kubeconfig []byte) error {
	ref := cred.Spec.IdentityRef
	if ref == nil || ref.Name == "" || (ref.Namespace != "" && ref.Namespace != cd.Namespace) {
		return fmt.Errorf("Credential %s/%s of an adopted cluster must name an identity Secret in namespace %s", cred.Namespace, cred.Name, cd.Namespace)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cd.Namespace, Name: ref.Name},
		Data: map[string][]byte{k0rdentv1beta1.KubeconfigSecretKey: kubeconfig}}
	if err := r.client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	sc := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"kubeconfigName": ref.Name, "kubeconfigKeyName": k0rdentv1beta1.KubeconfigSecretKey}}}
	sc.SetGroupVersionKind(SveltosClusterGVK)
	sc.SetNamespace(cd.Namespace)
	sc.SetName(cd.Name)
	sc.SetLabels(map[string]string{"k0rdent.mirantis.com/managed": "true"})
	if err := r.client.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating SveltosCluster %s/%s: %w", cd.Namespace, cd.Name, err)
	}
	return nil
}

// unpublishKubeconfig removes what publishKubeconfig made, on deletion. An adopted cluster's identity
// Secret belongs to the admin and stays.
func (r *clusterDeploymentReconciler) unpublishKubeconfig(ctx context.Context, cd *k0rdentv1beta1.ClusterDeployment) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cd.Namespace, Name: k0rdentv1beta1.KubeconfigSecretName(cd.Name)}}
	if cd.Status.Region != "" {
		rc, err := r.regionalClient(ctx, cd.Status.Region)
		if err != nil {
			return err
		}
		return client.IgnoreNotFound(rc.Delete(ctx, s))
	}
	sc := &unstructured.Unstructured{}
	sc.SetGroupVersionKind(SveltosClusterGVK)
	sc.SetNamespace(cd.Namespace)
	sc.SetName(cd.Name)
	if err := r.client.Delete(ctx, sc); err != nil && !apierrors.IsNotFound(err) && !isNoKind(err) {
		return err
	}
	return client.IgnoreNotFound(r.client.Delete(ctx, s))
}

// regionalClient returns an admin client of a Region's cluster.
func (r *clusterDeploymentReconciler) regionalClient(ctx context.Context, region string) (client.Client, error) {
	reg := &unstructured.Unstructured{}
	reg.SetGroupVersionKind(regionGVK)
	if err := r.client.Get(ctx, types.NamespacedName{Name: region}, reg); err != nil {
		return nil, fmt.Errorf("Region %s: %w", region, err)
	}
	var ref types.NamespacedName
	key := k0rdentv1beta1.KubeconfigSecretKey
	if name, _, _ := unstructured.NestedString(reg.Object, "spec", "kubeConfig", "name"); name != "" {
		ref = types.NamespacedName{Namespace: SystemNamespace, Name: name}
		if k, _, _ := unstructured.NestedString(reg.Object, "spec", "kubeConfig", "key"); k != "" {
			key = k
		}
	} else if name, _, _ := unstructured.NestedString(reg.Object, "spec", "clusterDeployment", "name"); name != "" {
		ns, _, _ := unstructured.NestedString(reg.Object, "spec", "clusterDeployment", "namespace")
		if ns == "" {
			ns = SystemNamespace
		}
		ref = types.NamespacedName{Namespace: ns, Name: k0rdentv1beta1.KubeconfigSecretName(name)}
	} else {
		return nil, fmt.Errorf("Region %s names neither spec.kubeConfig nor spec.clusterDeployment", region)
	}
	s := &corev1.Secret{}
	if err := r.client.Get(ctx, ref, s); err != nil {
		return nil, fmt.Errorf("the kubeconfig Secret %s of Region %s: %w", ref, region, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[key])
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig of Region %s: %w", region, err)
	}
	return client.New(cfg, client.Options{Scheme: Scheme()})
}

// writeKubeconfigSecret publishes a kubeconfig as Cluster API does: Secret `<cd>-kubeconfig`, key
// value, type cluster.x-k8s.io/secret, label cluster.x-k8s.io/cluster-name. An existing Secret is
// kept as it is: a kubeconfig rotated by hand stays.
func writeKubeconfigSecret(ctx context.Context, c client.Client, cd *k0rdentv1beta1.ClusterDeployment, kubeconfig []byte) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cd.Namespace, Name: k0rdentv1beta1.KubeconfigSecretName(cd.Name),
			Labels: map[string]string{"cluster.x-k8s.io/cluster-name": cd.Name}},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{k0rdentv1beta1.KubeconfigSecretKey: kubeconfig},
	}
	if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// isNoKind reports a kind the management cluster does not serve.
func isNoKind(err error) bool {
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err)
}
