package childcluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
)

// installCRDs installs the SveltosCluster CRD (when the shared copy exists) and a minimal Region CRD.
// It reports whether SveltosCluster is installed.
func installCRDs(t *testing.T) bool {
	t.Helper()
	have, note, err := childtest.InstallKindCRDs(context.Background(), mgmt.Config, wait)
	if err != nil {
		t.Fatal(err)
	}
	if note != "" {
		t.Log(note)
	}
	return have
}

// TestAdoptedAndRegionalClusters: a ClusterDeployment without `<cd>-kubeconfig` is reached through
// its SveltosCluster (adopted, default and named Secret and key) or, when its Credential has a region,
// through the Region's kubeconfig and the `<cd>-kubeconfig` Secret on the regional cluster.
func TestAdoptedAndRegionalClusters(t *testing.T) {
	haveSveltos := installCRDs(t)
	regional := startChild(t, "regional")
	leaf := startChild(t, "leaf")
	// The deadline is for the test, not for starting its API servers, which can take most of it on a
	// loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := childtest.CreateNode(ctx, regional.Client, gpuNode("on-regional", 2)); err != nil {
		t.Fatal(err)
	}
	if err := childtest.CreateNode(ctx, leaf.Client, gpuNode("on-leaf", 4)); err != nil {
		t.Fatal(err)
	}
	ns := "kinds"
	for _, c := range []client.Client{mgmt.Client, regional.Client} {
		for _, name := range []string{ns, DefaultSystemNamespace} {
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	create := func(c client.Client, o client.Object) {
		t.Helper()
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	c := newCache(t, Options{})
	nodeNames := func(cl *Cluster) []string {
		var out []string
		for _, n := range cl.Nodes() {
			out = append(out, n.Name)
		}
		return out
	}

	if haveSveltos {
		// Adopted with the default Secret and its first key; and with a named Secret and key.
		create(mgmt.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "adopted-sveltos-kubeconfig"},
			Data: map[string][]byte{"kubeconfig": leaf.Kubeconfig}})
		for _, sc := range []map[string]any{
			{"name": "adopted", "spec": map[string]any{}},
			{"name": "adopted-named", "spec": map[string]any{"kubeconfigName": "custom", "kubeconfigKeyName": "kc"}},
		} {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": sc["spec"]}}
			u.SetGroupVersionKind(sveltosClusterGVK)
			u.SetNamespace(ns)
			u.SetName(sc["name"].(string))
			create(mgmt.Client, u)
		}
		create(mgmt.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "custom"},
			Data: map[string][]byte{"a-first": []byte("not this one"), "kc": leaf.Kubeconfig}})
		for _, name := range []string{"adopted", "adopted-named"} {
			cl, err := c.Get(ctx, ns, name)
			if err != nil {
				t.Fatalf("adopted %s: %v", name, err)
			}
			if got := nodeNames(cl); len(got) != 1 || got[0] != "on-leaf" {
				t.Fatalf("adopted %s sees %v, want the leaf's node", name, got)
			}
		}
	}

	// Regional: Credential with a region, Region with a kubeconfig Secret, the ClusterDeployment's
	// kubeconfig Secret on the regional cluster.
	create(mgmt.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultSystemNamespace, Name: "region-eu"},
		Data: map[string][]byte{"kubeconfig": regional.Kubeconfig}})
	region := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"kubeConfig": map[string]any{"name": "region-eu", "key": "kubeconfig"}}}}
	region.SetGroupVersionKind(regionGVK)
	region.SetName("eu")
	create(mgmt.Client, region)
	create(mgmt.Client, &k0rdentv1beta1.Credential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cred-eu"},
		Spec: k0rdentv1beta1.CredentialSpec{Region: "eu", IdentityRef: &corev1.ObjectReference{Kind: "Secret", Name: "x", Namespace: ns}}})
	create(mgmt.Client, &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regional-child"},
		Spec: k0rdentv1beta1.ClusterDeploymentSpec{Template: "t", Credential: "cred-eu"}})
	if _, err := c.Get(ctx, ns, "regional-child"); UnreachableReason(err) != ReasonKubeconfigMissing {
		t.Fatalf("before the regional Secret exists: want KubeconfigMissing, got %v", err)
	}
	create(regional.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: k0rdentv1beta1.KubeconfigSecretName("regional-child")},
		Data: map[string][]byte{k0rdentv1beta1.KubeconfigSecretKey: leaf.Kubeconfig}})
	cl, err := c.Get(ctx, ns, "regional-child")
	if err != nil {
		t.Fatalf("regional child: %v", err)
	}
	if got := nodeNames(cl); len(got) != 1 || got[0] != "on-leaf" {
		t.Fatalf("regional child sees %v, want the leaf's node (not the regional cluster's)", got)
	}

	// A ClusterDeployment of neither kind and without a Secret stays KubeconfigMissing.
	if _, err := c.Get(ctx, ns, "plain"); UnreachableReason(err) != ReasonKubeconfigMissing {
		t.Fatalf("plain: want KubeconfigMissing, got %v", err)
	}
}
