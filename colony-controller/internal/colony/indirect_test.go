package colony

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// TestAdoptedAndRegionalEntries: a Colony entry whose cluster is adopted (a SveltosCluster, no
// `<cd>-kubeconfig`) or regional (its Credential has a region; `<cd>-kubeconfig` lives on the
// regional cluster) becomes ready once its kubeconfig is found the way common/childcluster finds it,
// and its context in the Colony's kubeconfig reaches the cluster. Before the kubeconfig exists, the
// entry says what it waits for.
func TestAdoptedAndRegionalEntries(t *testing.T) {
	ctx := context.Background()
	haveSveltos, note, err := childtest.InstallKindCRDs(ctx, mgmt.Config, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if note != "" {
		t.Log(note)
	}
	children := map[string]*testenv.Child{}
	for _, name := range []string{"leaf", "regional"} {
		ch, err := testenv.StartChild(name)
		if err != nil {
			t.Fatalf("starting child %s: %v", name, err)
		}
		t.Cleanup(func() { _ = ch.Stop() })
		children[name] = ch
		if err := ch.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-on-" + name}}); err != nil {
			t.Fatal(err)
		}
	}
	ns := newNamespace(t)
	create := func(c client.Client, o client.Object) {
		t.Helper()
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	region := createRegion(t, ns, children["regional"].Kubeconfig)
	entries := []infrav1.ColonyCluster{entry(t, "regional", map[string]any{"template": "tmpl-1-0-0", "credential": "cred-eu"})}
	if haveSveltos {
		entries = append(entries, entry(t, "adopted", nil))
	}
	startManager(t, ns)
	createColony(t, ns, "fleet", entries...)
	for _, e := range entries {
		waitCD(t, ns, "fleet-"+e.ClusterName, e.ClusterName, nil)
		setCDConditions(t, ns, "fleet-"+e.ClusterName, cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, k0rdentv1beta1.SucceededReason))
	}
	// Up, but the regional cluster has no kubeconfig Secret for it yet.
	waitColony(t, ns, "fleet", "regional entry waiting for its kubeconfig", all(phaseIs(infrav1.ColonyPhaseProvisioning),
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonClustersNotReady,
			"not found on the cluster of Region "+region)))

	// The ClusterDeployment's kubeconfig Secret on the regional cluster, and the adopted cluster's.
	create(children["regional"].Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	// First a kubeconfig that does not parse: found, so the entry is up, but left out of the Colony's
	// kubeconfig, saying why; then a good one, picked up without any change on the management cluster.
	regionalSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet-regional-kubeconfig"},
		Data: map[string][]byte{"value": []byte("not a kubeconfig")}}
	create(children["regional"].Client, regionalSecret)
	waitColony(t, ns, "fleet", "regional kubeconfig unusable", conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse,
		infrav1.ColonyReasonClustersNotReady, "regional (ClusterDeployment fleet-regional): the kubeconfig of the adopted or regional cluster: its kubeconfig does not parse"))
	regionalSecret.Data = map[string][]byte{"value": children["leaf"].Kubeconfig}
	if err := children["regional"].Client.Update(ctx, regionalSecret); err != nil {
		t.Fatal(err)
	}
	if haveSveltos {
		sc := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
		sc.SetAPIVersion("lib.projectsveltos.io/v1beta1")
		sc.SetKind("SveltosCluster")
		sc.SetNamespace(ns)
		sc.SetName("fleet-adopted")
		create(mgmt.Client, sc)
		create(mgmt.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet-adopted-sveltos-kubeconfig"},
			Data: map[string][]byte{"kubeconfig": children["regional"].Kubeconfig}})
	}
	want := len(entries)
	waitColony(t, ns, "fleet", "all entries ready", all(phaseIs(infrav1.ColonyPhaseReady), func(c *infrav1.Colony) error {
		if c.Status.ReadyClusters != int32(want) {
			return fmt.Errorf("%d ready clusters, want %d", c.Status.ReadyClusters, want)
		}
		return nil
	}))
	var seen map[string]map[string]bool
	eventually(t, "a context per entry in the Colony's kubeconfig", func() error {
		secret, err := readSecret(t, ns, "fleet-kubeconfig")
		if err != nil {
			return err
		}
		cfg, err := clientcmd.Load(secret.Data[KubeconfigKey])
		if err != nil {
			return err
		}
		if len(cfg.Contexts) != want {
			return fmt.Errorf("contexts %v", cfg.Contexts)
		}
		seen = reachAll(t, secret.Data[KubeconfigKey])
		return nil
	})
	// The regional entry's context reaches the leaf (its own cluster), not the regional cluster.
	if !seen["regional"]["only-on-leaf"] || seen["regional"]["only-on-regional"] {
		t.Errorf("context regional sees %v: it must reach the leaf cluster", seen["regional"])
	}
	if haveSveltos && !seen["adopted"]["only-on-regional"] {
		t.Errorf("context adopted sees %v: it must reach the SveltosCluster's cluster", seen["adopted"])
	}
}

// createRegion makes a Region (cluster-scoped, so named after the test's namespace) whose kubeconfig
// is regional, in a Secret of kcm-system, and the Credential cred-eu in ns that names it. It returns
// the Region's name. It installs the Region kind first (childtest.InstallKindCRDs).
func createRegion(t *testing.T, ns string, regional []byte) string {
	t.Helper()
	ctx := context.Background()
	if _, _, err := childtest.InstallKindCRDs(ctx, mgmt.Config, waitTimeout); err != nil {
		t.Fatal(err)
	}
	create := func(o client.Object) {
		t.Helper()
		if err := mgmt.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	region := "region-" + ns
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kcm-system"}})
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kcm-system", Name: region},
		Data: map[string][]byte{"kubeconfig": regional}})
	r := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"kubeConfig": map[string]any{"name": region, "key": "kubeconfig"}}}}
	r.SetAPIVersion(k0rdentv1beta1.GroupVersion.String())
	r.SetKind("Region")
	r.SetName(region)
	create(r)
	create(&k0rdentv1beta1.Credential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cred-eu"},
		Spec: k0rdentv1beta1.CredentialSpec{Region: region, IdentityRef: &corev1.ObjectReference{Kind: "Secret", Name: "x", Namespace: ns}}})
	return region
}
