package colony

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// TestUpstreamPointerSecret: the upstream operator's `<colony>-kubeconfigs` Secret (unowned, one
// ObjectReference per cluster) is taken over by its Colony and kept in step with the ready clusters, in
// upstream's exact format; a Colony without one gets none.
func TestUpstreamPointerSecret(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	// As upstream left it: no owner, no labels, a pointer to a cluster that is gone.
	stale := `{"kind":"Secret","namespace":"` + ns + `","name":"col-old-kubeconfig","apiVersion":"v1"}`
	if err := mgmt.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "col-kubeconfigs"},
		Data: map[string][]byte{"col-old": []byte(stale)}}); err != nil {
		t.Fatal(err)
	}
	startManager(t, ns)
	createColony(t, ns, "col", entry(t, "a", nil), entry(t, "b", nil))
	createColony(t, ns, "other", entry(t, "c", nil))
	for _, cd := range []string{"col-a", "col-b", "other-c"} {
		waitCD(t, ns, cd, cd, nil)
	}
	setCDConditions(t, ns, "col-a", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, k0rdentv1beta1.SucceededReason))
	if err := mgmt.WriteKubeconfigSecret(ctx, ns, "col-a", fakeKubeconfig(t, "https://a.example", "t")); err != nil {
		t.Fatal(err)
	}
	setCDConditions(t, ns, "other-c", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, k0rdentv1beta1.SucceededReason))
	if err := mgmt.WriteKubeconfigSecret(ctx, ns, "other-c", fakeKubeconfig(t, "https://c.example", "t")); err != nil {
		t.Fatal(err)
	}
	want := func(cds ...string) func() error {
		return func() error {
			s, err := readSecret(t, ns, "col-kubeconfigs")
			if err != nil {
				return err
			}
			if infrav1.ControllingColony(s) != "col" || s.Labels[infrav1.ColonyLabel] != "col" {
				return fmt.Errorf("not taken over: owners %v, labels %v", s.OwnerReferences, s.Labels)
			}
			if len(s.Data) != len(cds) {
				return fmt.Errorf("keys %d, want %v", len(s.Data), cds)
			}
			for _, cd := range cds {
				want := `{"kind":"Secret","namespace":"` + ns + `","name":"` + cd + `-kubeconfig","apiVersion":"v1"}`
				if got := string(s.Data[cd]); got != want {
					return fmt.Errorf("%s: %s, want %s", cd, got, want)
				}
				var ref corev1.ObjectReference
				if err := json.Unmarshal(s.Data[cd], &ref); err != nil || ref.Name != cd+"-kubeconfig" {
					return fmt.Errorf("%s: %v %+v", cd, err, ref)
				}
			}
			return nil
		}
	}
	eventually(t, "the pointer Secret names the ready cluster a", want("col-a"))

	setCDConditions(t, ns, "col-b", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, k0rdentv1beta1.SucceededReason))
	if err := mgmt.WriteKubeconfigSecret(ctx, ns, "col-b", fakeKubeconfig(t, "https://b.example", "t")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pointer Secret follows b becoming ready", want("col-a", "col-b"))

	waitColony(t, ns, "other", "Ready", phaseIs(infrav1.ColonyPhaseReady))
	if _, err := readSecret(t, ns, "other-kubeconfigs"); !apierrors.IsNotFound(err) {
		t.Errorf("a Colony without an upstream pointer Secret got one: %v", err)
	}
}
