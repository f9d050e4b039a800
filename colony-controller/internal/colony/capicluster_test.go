package colony

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// setCAPIConditions writes a Cluster API Cluster's status conditions, as Cluster API would.
func setCAPIConditions(t *testing.T, namespace, name string, conds ...metav1.Condition) {
	t.Helper()
	eventually(t, "writing Cluster API Cluster status", func() error {
		c := &clusterv1.Cluster{}
		if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, c); err != nil {
			return err
		}
		for _, x := range conds {
			x.LastTransitionTime = metav1.Now()
			meta.SetStatusCondition(&c.Status.Conditions, x)
		}
		return mgmt.Client.Status().Update(context.Background(), c)
	})
}

// TestReadinessFromCAPICluster: an entry whose ClusterDeployment has a Cluster API Cluster follows the
// Cluster's own conditions, and a change of the Cluster alone (nothing else changes) updates the
// Colony: Available makes the entry ready before KCM summarises it, a failed remote connection probe
// takes it out of the Colony's kubeconfig with Cluster API's words, and without the Cluster the
// ClusterDeployment decides again.
func TestReadinessFromCAPICluster(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns)
	createColony(t, ns, "col", entry(t, "a", nil))
	waitCD(t, ns, "col-a", "col-a", nil)
	if err := mgmt.WriteKubeconfigSecret(context.Background(), ns, "col-a", fakeKubeconfig(t, "https://a.example:6443", "ta")); err != nil {
		t.Fatal(err)
	}
	// KCM: the services are not deployed yet, so Ready is False, and it has not summarised the
	// Cluster API Cluster.
	setCDConditions(t, ns, "col-a", metav1.Condition{Type: k0rdentv1beta1.ReadyCondition, Status: metav1.ConditionFalse,
		Reason: k0rdentv1beta1.ProgressingReason, Message: "services 0/1"})
	waitColony(t, ns, "col", "KCM's words without a Cluster", conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse,
		infrav1.ColonyReasonClustersNotReady, "a (ClusterDeployment col-a): Ready=False (Progressing): services 0/1"))

	capi := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "col-a"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(false)}}
	if err := mgmt.Client.Create(context.Background(), capi); err != nil {
		t.Fatal(err)
	}
	setCAPIConditions(t, ns, "col-a", metav1.Condition{Type: clusterv1.ClusterAvailableCondition, Status: metav1.ConditionFalse,
		Reason: "NotAvailable", Message: "* ControlPlaneAvailable: Control plane not yet initialized"})
	waitColony(t, ns, "col", "Cluster API's words", conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse,
		infrav1.ColonyReasonClustersNotReady,
		"a (ClusterDeployment col-a): Cluster API Cluster col-a: Available=False (NotAvailable): ControlPlaneAvailable: Control plane not yet initialized"))

	setCAPIConditions(t, ns, "col-a",
		metav1.Condition{Type: clusterv1.ClusterAvailableCondition, Status: metav1.ConditionTrue, Reason: "Available"},
		metav1.Condition{Type: clusterv1.ClusterRemoteConnectionProbeCondition, Status: metav1.ConditionTrue, Reason: "ProbeSucceeded"})
	waitColony(t, ns, "col", "ready once Cluster API says Available", all(phaseIs(infrav1.ColonyPhaseReady), func(c *infrav1.Colony) error {
		if c.Status.ReadyClusters != 1 {
			return fmt.Errorf("ready clusters %d", c.Status.ReadyClusters)
		}
		return nil
	}))

	setCAPIConditions(t, ns, "col-a", metav1.Condition{Type: clusterv1.ClusterRemoteConnectionProbeCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.ClusterRemoteConnectionProbeFailedReason, Message: "Remote connection probe failed"})
	waitColony(t, ns, "col", "out once Cluster API cannot reach it", all(
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonClustersNotReady,
			"a (ClusterDeployment col-a): Cluster API Cluster col-a: RemoteConnectionProbe=False (ProbeFailed): Remote connection probe failed"),
		func(c *infrav1.Colony) error {
			if c.Status.ReadyClusters != 0 {
				return fmt.Errorf("ready clusters %d", c.Status.ReadyClusters)
			}
			return nil
		}))

	if err := mgmt.Client.Delete(context.Background(), capi); err != nil {
		t.Fatal(err)
	}
	waitColony(t, ns, "col", "KCM's words again once the Cluster is gone", conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse,
		infrav1.ColonyReasonClustersNotReady, "a (ClusterDeployment col-a): Ready=False (Progressing): services 0/1"))
}

// TestCAPIClustersServed: the Colony reads Cluster API Clusters only where v1beta2 is served; an older
// Cluster API (v1beta1 only) or none means the ClusterDeployments' conditions alone.
func TestCAPIClustersServed(t *testing.T) {
	v1beta1 := schema.GroupVersion{Group: clusterv1.GroupVersion.Group, Version: "v1beta1"}
	for _, tc := range []struct {
		name   string
		served []schema.GroupVersion
		want   bool
	}{
		{"no Cluster API", nil, false},
		{"Cluster API before v1.11: v1beta1 only", []schema.GroupVersion{v1beta1}, false},
		{"v1beta2", []schema.GroupVersion{v1beta1, clusterv1.GroupVersion}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := meta.NewDefaultRESTMapper(tc.served)
			for _, gv := range tc.served {
				m.Add(gv.WithKind("Cluster"), meta.RESTScopeNamespace)
			}
			got, err := capiClustersServed(m)
			if err != nil || got != tc.want {
				t.Errorf("capiClustersServed = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
