package inventory

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/inventory-collector/internal/sharding"
)

// TestRotationOfAdoptedAndRegionalSecrets: the Secrets an adopted or regional cluster is reached
// through are watched like `<cd>-kubeconfig`: the default `<cd>-sveltos-kubeconfig`, a SveltosCluster's
// own Secret of any name, and a Region's kubeconfig Secret in kcm-system. Pointing each at another
// child shows that child's GPUs on the Colony. The collector here refreshes quiet children only every
// hour, so nothing but the Secret watch can bring the change in.
func TestRotationOfAdoptedAndRegionalSecrets(t *testing.T) {
	fleet(t)
	ctx := context.Background()
	ns := "inventory-kinds"
	haveSveltos, note, err := childtest.InstallKindCRDs(ctx, mgmt.Config, wait)
	if err != nil {
		t.Fatal(err)
	}
	if note != "" {
		t.Log(note)
	}
	_, stop, err := startCollectorWith([]string{ns, childcluster.DefaultSystemNamespace}, sharding.Shard{Count: 1},
		func(o *Options) { o.ContactRefresh = time.Hour })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	create := func(c client.Client, o client.Object) {
		t.Helper()
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	update := func(c client.Client, ns, name string, data map[string][]byte) {
		t.Helper()
		s := &corev1.Secret{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
			t.Fatal(err)
		}
		s.Data = data
		if err := c.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	colony := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kinds"}}
	create(mgmt.Client, colony)
	want := expectedFleet()
	var refs []any
	var names []string
	if haveSveltos {
		names = append(names, "kinds-adopted", "kinds-named")
	}
	names = append(names, "kinds-regional")
	for _, n := range names {
		createClusterDeployment(t, colony, n)
		refs = append(refs, map[string]any{"name": n, "namespace": ns})
	}
	if haveSveltos {
		// Adopted: the default Secret (first key), and a named Secret and key.
		for _, sc := range []struct {
			name string
			spec map[string]any
		}{{"kinds-adopted", map[string]any{}}, {"kinds-named", map[string]any{"kubeconfigName": "named-kc", "kubeconfigKeyName": "kc"}}} {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": sc.spec}}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: "lib.projectsveltos.io", Version: "v1beta1", Kind: "SveltosCluster"})
			u.SetNamespace(ns)
			u.SetName(sc.name)
			create(mgmt.Client, u)
		}
		create(mgmt.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kinds-adopted-sveltos-kubeconfig"},
			Data: map[string][]byte{"kubeconfig": children[0].Kubeconfig}})
		create(mgmt.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "named-kc"},
			Data: map[string][]byte{"kc": children[0].Kubeconfig}})
	}
	// Regional: child-1 and child-2 each serve as a regional cluster holding the leaf's Secret
	// `kinds-regional-kubeconfig`: on child-1 it reaches child-1, on child-2 child-2.
	for _, i := range []int{1, 2} {
		for _, n := range []string{ns} {
			if err := children[i].Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); client.IgnoreAlreadyExists(err) != nil {
				t.Fatal(err)
			}
		}
		create(children[i].Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: k0rdentv1beta1.KubeconfigSecretName("kinds-regional")},
			Data: map[string][]byte{k0rdentv1beta1.KubeconfigSecretKey: children[i].Kubeconfig}})
	}
	create(mgmt.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: childcluster.DefaultSystemNamespace, Name: "kinds-region"},
		Data: map[string][]byte{"value": children[1].Kubeconfig}})
	region := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"kubeConfig": map[string]any{"name": "kinds-region"}}}}
	region.SetGroupVersionKind(k0rdentv1beta1.GroupVersion.WithKind("Region"))
	region.SetName("kinds-region")
	create(mgmt.Client, region)
	create(mgmt.Client, &k0rdentv1beta1.Credential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kinds-cred"},
		Spec: k0rdentv1beta1.CredentialSpec{Region: "kinds-region", IdentityRef: &corev1.ObjectReference{Kind: "Secret", Name: "x", Namespace: ns}}})
	cd := &k0rdentv1beta1.ClusterDeployment{}
	if err := mgmt.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "kinds-regional"}, cd); err != nil {
		t.Fatal(err)
	}
	cd.Spec.Credential = "kinds-cred"
	if err := mgmt.Client.Update(ctx, cd); err != nil {
		t.Fatal(err)
	}
	applyColonyControllerStatus(t, colony, refs)
	key := client.ObjectKeyFromObject(colony)

	shows := func(entry, fleetName string) func(map[string]infrav1.ClusterGPUInventory) bool {
		return func(inv map[string]infrav1.ClusterGPUInventory) bool {
			return inv[entry].Reachable && offeringsEqual(inv[entry].Offerings, want[fleetName])
		}
	}
	if haveSveltos {
		waitInventory(t, key, "adopted on child-0", shows("kinds-adopted", "fleet-a"))
		waitInventory(t, key, "named adopted on child-0", shows("kinds-named", "fleet-a"))
	}
	waitInventory(t, key, "regional through child-1", shows("kinds-regional", "fleet-b"))

	if haveSveltos {
		update(mgmt.Client, ns, "kinds-adopted-sveltos-kubeconfig", map[string][]byte{"kubeconfig": children[2].Kubeconfig})
		waitInventory(t, key, "adopted follows its rotated default Secret to child-2", shows("kinds-adopted", "fleet-c"))
		update(mgmt.Client, ns, "named-kc", map[string][]byte{"kc": children[2].Kubeconfig})
		waitInventory(t, key, "adopted follows its rotated named Secret to child-2", shows("kinds-named", "fleet-c"))
	}
	update(mgmt.Client, childcluster.DefaultSystemNamespace, "kinds-region", map[string][]byte{"value": children[2].Kubeconfig})
	waitInventory(t, key, "regional follows its rotated Region Secret to child-2", shows("kinds-regional", "fleet-c"))
}
