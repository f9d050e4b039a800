package colony

import (
	"context"
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/bootstrap"
)

func TestColonyChangedPredicate(t *testing.T) {
	base := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Name: "c", ResourceVersion: "1", Generation: 1}}
	p := colonyChanged()
	update := func(mutate func(*infrav1.Colony)) bool {
		n := base.DeepCopy()
		n.ResourceVersion = "2"
		mutate(n)
		return p.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: n})
	}
	if update(func(c *infrav1.Colony) {
		c.Status.GPUInventory = map[string]infrav1.ClusterGPUInventory{"x": {Reachable: true}}
	}) {
		t.Error("a gpuInventory-only update triggers a reconcile")
	}
	if update(func(c *infrav1.Colony) { c.Labels = map[string]string{"a": "b"} }) {
		t.Error("a label-only update triggers a reconcile")
	}
	for name, mutate := range map[string]func(*infrav1.Colony){
		"generation":      func(c *infrav1.Colony) { c.Generation = 2 },
		"deletion":        func(c *infrav1.Colony) { now := metav1.Now(); c.DeletionTimestamp = &now },
		"finalizers":      func(c *infrav1.Colony) { c.Finalizers = []string{"x"} },
		"owned status":    func(c *infrav1.Colony) { c.Status.Phase = infrav1.ColonyPhaseReady },
		"resync":          func(c *infrav1.Colony) { c.ResourceVersion = "1" },
		"owned condition": func(c *infrav1.Colony) { c.Status.Conditions = []metav1.Condition{{Type: "Ready"}} },
	} {
		if !update(mutate) {
			t.Errorf("%s change does not trigger a reconcile", name)
		}
	}
}

// TestRestartPartWay: a manager stopped part-way and a new one started converge on the same
// ClusterDeployments, without duplicates and without recreating what exists.
func TestRestartPartWay(t *testing.T) {
	ns := newNamespace(t)
	first := startManager(t, ns)
	createColony(t, ns, "col", entry(t, "a", nil), entry(t, "b", nil))
	uidA := waitCD(t, ns, "col-a", "col-a", nil).UID
	waitCD(t, ns, "col-b", "col-b", nil)
	first.stop()

	// While no controller runs: a new entry, one removed, one changed.
	updateColony(t, ns, "col", func(c *infrav1.Colony) {
		c.Spec.ColonyClusters = []infrav1.ColonyCluster{
			entry(t, "a", map[string]any{"template": "tmpl-2"}),
			entry(t, "c", nil),
		}
	})

	startManager(t, ns)
	waitCD(t, ns, "col-c", "col-c", nil)
	waitCDGone(t, ns, "col-b")
	cd := waitCD(t, ns, "col-a", "col-a updated", func(cd *k0rdentv1beta1.ClusterDeployment) error {
		if cd.Spec.Template != "tmpl-2" {
			return fmt.Errorf("template %q", cd.Spec.Template)
		}
		return nil
	})
	if cd.UID != uidA {
		t.Error("col-a was recreated")
	}
	waitColony(t, ns, "col", "status of the new generation", func(c *infrav1.Colony) error {
		if c.Status.ObservedGeneration != c.Generation || c.Status.TotalClusters != 2 {
			return fmt.Errorf("status %+v", c.Status)
		}
		return nil
	})
	list := &k0rdentv1beta1.ClusterDeploymentList{}
	if err := mgmt.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("%d ClusterDeployments, want 2", len(list.Items))
	}
	for _, item := range list.Items {
		if n := len(item.OwnerReferences); n != 1 {
			t.Errorf("%s has %d owner references", item.Name, n)
		}
	}
}

// gaugeValue reads a gauge of the controller-runtime registry; found is false when the series does
// not exist.
func gaugeValue(t *testing.T, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			if matches(m, labels) {
				if m.Gauge != nil {
					return m.Gauge.GetValue(), true
				}
				return m.Counter.GetValue(), true
			}
		}
	}
	return 0, false
}

func matches(m *dto.Metric, labels map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.Label {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range labels {
		if got[k] != v {
			return false
		}
	}
	return len(got) == len(labels)
}

// TestMetrics: the per-Colony gauges follow the status and disappear with the Colony; Colonies are
// counted by phase.
func TestMetrics(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns)
	createColony(t, ns, "col", entry(t, "a", nil), entry(t, "b", nil))
	labels := map[string]string{"namespace": ns, "colony": "col"}
	eventually(t, "cluster gauges", func() error {
		total, ok := gaugeValue(t, bootstrap.MetricName(Component, "clusters"), labels)
		ready, okReady := gaugeValue(t, bootstrap.MetricName(Component, "clusters_ready"), labels)
		if !ok || !okReady || total != 2 || ready != 0 {
			return fmt.Errorf("clusters %v (%v), ready %v (%v)", total, ok, ready, okReady)
		}
		if n, _ := gaugeValue(t, bootstrap.MetricName(Component, "colonies"), map[string]string{"phase": "Provisioning"}); n < 1 {
			return fmt.Errorf("colonies{phase=Provisioning} = %v", n)
		}
		return nil
	})
	waitCD(t, ns, "col-a", "col-a", nil)
	setCDConditions(t, ns, "col-a", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, k0rdentv1beta1.SucceededReason))
	if err := mgmt.WriteKubeconfigSecret(context.Background(), ns, "col-a", fakeKubeconfig(t, "https://a.example", "t")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ready gauge", func() error {
		if ready, _ := gaugeValue(t, bootstrap.MetricName(Component, "clusters_ready"), labels); ready != 1 {
			return fmt.Errorf("ready %v", ready)
		}
		return nil
	})

	if err := mgmt.Client.Delete(context.Background(), &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "col"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "series removed with the Colony", func() error {
		if _, ok := gaugeValue(t, bootstrap.MetricName(Component, "clusters"), labels); ok {
			return fmt.Errorf("exalsius_colony_controller_clusters still exported for %v", types.NamespacedName{Namespace: ns, Name: "col"})
		}
		return nil
	})
}
