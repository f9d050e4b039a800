package colony

import (
	"context"
	"fmt"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

func TestReadiness(t *testing.T) {
	T, F, U := metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown
	c := func(typ string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg}
	}
	cases := []struct {
		name   string
		conds  []metav1.Condition
		secret bool
		want   clusterPhase
		msg    string
	}{
		{"no conditions", nil, true, clusterProvisioning, "no Ready condition yet"},
		{"ready and secret", []metav1.Condition{c("Ready", T, "Succeeded", "")}, true, clusterReady, ""},
		{"ready without secret", []metav1.Condition{c("Ready", T, "Succeeded", "")}, false, clusterProvisioning, "kubeconfig Secret s not found"},
		{"CAPI summary is enough", []metav1.Condition{c("Ready", F, "Progressing", "services 0/1"), c("CAPIClusterSummary", T, "Succeeded", "")}, true, clusterReady, ""},
		{"progressing", []metav1.Condition{c("Ready", F, "Progressing", "waiting for control plane")}, true, clusterProvisioning, "Ready=False (Progressing): waiting for control plane"},
		{"failed", []metav1.Condition{c("Ready", F, "Failed", "credential missing")}, true, clusterFailed, "Ready=False (Failed): credential missing"},
		{"up beats a service failure", []metav1.Condition{c("Ready", F, "Failed", "service x failed"), c("CAPIClusterSummary", T, "Succeeded", "")}, true, clusterReady, ""},
		{"unknown", []metav1.Condition{c("Ready", U, "Progressing", "")}, true, clusterProvisioning, "Ready=Unknown (Progressing)"},
		{"only CAPI summary false", []metav1.Condition{c("CAPIClusterSummary", F, "Progressing", "infra")}, true, clusterProvisioning, "CAPIClusterSummary=False (Progressing): infra"},
		{"other conditions only", []metav1.Condition{c("TemplateReady", T, "Succeeded", "")}, true, clusterProvisioning, "no Ready condition yet"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			missing := ""
			if !tc.secret {
				missing = "kubeconfig Secret s not found"
			}
			got, msg := readiness(tc.conds, nil, missing)
			if got != tc.want || msg != tc.msg {
				t.Errorf("readiness = %v %q, want %v %q", got, msg, tc.want, tc.msg)
			}
		})
	}
}

// TestReadinessWithCAPICluster: where a ClusterDeployment has a Cluster API Cluster, its conditions
// take part (clusterUp); without one, TestReadiness's rules hold.
func TestReadinessWithCAPICluster(t *testing.T) {
	T, F := metav1.ConditionTrue, metav1.ConditionFalse
	c := func(typ string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg}
	}
	capi := func(conds ...metav1.Condition) *clusterv1.Cluster {
		return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "cd"}, Status: clusterv1.ClusterStatus{Conditions: conds}}
	}
	deleting := capi(c("Available", T, "Available", ""))
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	cdReady := []metav1.Condition{c("Ready", T, "Succeeded", "")}
	cdProgressing := []metav1.Condition{c("Ready", F, "Progressing", "services 0/1")}
	cases := []struct {
		name  string
		conds []metav1.Condition
		capi  *clusterv1.Cluster
		want  clusterPhase
		msg   string
	}{
		{"Available before KCM summarises it", cdProgressing, capi(c("Available", T, "Available", "")), clusterReady, ""},
		{"probe failed beats a stale Ready", cdReady, capi(c("Available", T, "Available", ""),
			c("RemoteConnectionProbe", F, "ProbeFailed", "Remote connection probe failed, probe last succeeded at 2026-12-05T08:00:00Z")),
			clusterProvisioning, "Cluster API Cluster cd: RemoteConnectionProbe=False (ProbeFailed): Remote connection probe failed, probe last succeeded at 2026-12-05T08:00:00Z"},
		{"not Available but KCM says up", cdReady, capi(c("Available", F, "NotAvailable", "* WorkersAvailable: 1 of 2 available"),
			c("RemoteConnectionProbe", T, "ProbeSucceeded", "")), clusterReady, ""},
		{"not up: Cluster API's words, one line", cdProgressing, capi(c("Available", F, "NotAvailable",
			"* ControlPlaneAvailable: Control plane not yet initialized\n* WorkersAvailable: 0 of 2 available")),
			clusterProvisioning, "Cluster API Cluster cd: Available=False (NotAvailable): ControlPlaneAvailable: Control plane not yet initialized; WorkersAvailable: 0 of 2 available"},
		{"no Cluster API conditions yet: KCM's words", cdProgressing, capi(), clusterProvisioning, "Ready=False (Progressing): services 0/1"},
		{"being deleted", cdReady, deleting, clusterProvisioning, "Cluster API Cluster cd is being deleted"},
		{"KCM's failure still wins when the cluster is not up", []metav1.Condition{c("Ready", F, "Failed", "credential missing")},
			capi(c("Available", F, "NotAvailable", "x")), clusterFailed, "Ready=False (Failed): credential missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := readiness(tc.conds, tc.capi, "")
			if got != tc.want || msg != tc.msg {
				t.Errorf("readiness = %v %q, want %v %q", got, msg, tc.want, tc.msg)
			}
		})
	}
}

func TestDescribeBoundsMessage(t *testing.T) {
	long := strings.Repeat("x", 500)
	if got := describe(&metav1.Condition{Type: "Ready", Status: "False", Message: long}); len(got) > maxQuotedMessage+40 {
		t.Errorf("describe does not bound the message: %d bytes", len(got))
	}
}

// fakeKubeconfig is a well-formed kubeconfig for a server that need not exist.
func fakeKubeconfig(t *testing.T, server, token string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["ctx"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "ctx"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadinessTransitions drives a Colony through Provisioning, Ready and Degraded by writing
// ClusterDeployment status and kubeconfig Secrets, and checks the events of the transitions.
func TestReadinessTransitions(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns)
	createColony(t, ns, "col", entry(t, "a", nil), entry(t, "b", nil))
	waitCD(t, ns, "col-a", "col-a", nil)
	waitCD(t, ns, "col-b", "col-b", nil)
	waitColony(t, ns, "col", "no condition means not ready", all(phaseIs(infrav1.ColonyPhaseProvisioning),
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonClustersNotReady,
			"a (ClusterDeployment col-a): no Ready condition yet")))

	setCDConditions(t, ns, "col-a", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionFalse, k0rdentv1beta1.ProgressingReason))
	waitColony(t, ns, "col", "progressing is named", conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse,
		infrav1.ColonyReasonClustersNotReady, "a (ClusterDeployment col-a): Ready=False (Progressing)"))

	setCDConditions(t, ns, "col-a", cond(k0rdentv1beta1.CAPIClusterSummaryCondition, metav1.ConditionTrue, k0rdentv1beta1.SucceededReason))
	waitColony(t, ns, "col", "up but no kubeconfig yet", conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse,
		infrav1.ColonyReasonClustersNotReady, "kubeconfig Secret col-a-kubeconfig not found"))

	if err := mgmt.WriteKubeconfigSecret(context.Background(), ns, "col-a", fakeKubeconfig(t, "https://a.example:6443", "ta")); err != nil {
		t.Fatal(err)
	}
	c := waitColony(t, ns, "col", "a ready", all(phaseIs(infrav1.ColonyPhaseProvisioning), func(c *infrav1.Colony) error {
		if c.Status.ReadyClusters != 1 || c.Status.KubeconfigSecretName != "col-kubeconfig" {
			return fmt.Errorf("status %+v", c.Status)
		}
		return nil
	}))
	if msg := condOf(c, infrav1.ColonyClustersReadyCondition).Message; !strings.Contains(msg, "1/2 clusters ready") ||
		!strings.Contains(msg, "left out of Secret col-kubeconfig: b (ClusterDeployment col-b)") {
		t.Errorf("ClustersReady message %q", msg)
	}

	setCDConditions(t, ns, "col-b", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, k0rdentv1beta1.SucceededReason))
	if err := mgmt.WriteKubeconfigSecret(context.Background(), ns, "col-b", fakeKubeconfig(t, "https://b.example:6443", "tb")); err != nil {
		t.Fatal(err)
	}
	waitColony(t, ns, "col", "all ready", all(phaseIs(infrav1.ColonyPhaseReady),
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionTrue, infrav1.ColonyReasonAllClustersReady, "2/2 clusters ready"),
		conditionIs(infrav1.ColonyReadyCondition, metav1.ConditionTrue, infrav1.ColonyReasonAllClustersReady, "Secret col-kubeconfig"),
		func(c *infrav1.Colony) error {
			if c.Status.ReadyClusters != 2 || c.Status.TotalClusters != 2 {
				return fmt.Errorf("counts %d/%d", c.Status.ReadyClusters, c.Status.TotalClusters)
			}
			return nil
		}))

	// b fails: Ready False with reason Failed and the cluster not up.
	setCDConditions(t, ns, "col-b", metav1.Condition{Type: k0rdentv1beta1.ReadyCondition, Status: metav1.ConditionFalse,
		Reason: k0rdentv1beta1.FailedReason, Message: "HelmRelease failed"})
	waitColony(t, ns, "col", "b failed", all(phaseIs(infrav1.ColonyPhaseDegraded),
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonClusterFailed,
			"b (ClusterDeployment col-b): Ready=False (Failed): HelmRelease failed"),
		func(c *infrav1.Colony) error {
			if c.Status.ReadyClusters != 1 {
				return fmt.Errorf("ready %d", c.Status.ReadyClusters)
			}
			return nil
		}))

	// One event per transition, with the condition's reason.
	eventually(t, "transition events", func() error {
		list := &eventsv1.EventList{}
		if err := mgmt.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		seen := map[string]string{}
		for _, e := range list.Items {
			if e.Regarding.Kind == "Colony" && e.Regarding.Name == "col" {
				seen[e.Reason+"/"+e.Action] = e.Type
			}
		}
		want := map[string]string{
			infrav1.ColonyReasonAllClustersReady + "/" + infrav1.ColonyReadyCondition: "Normal",
			infrav1.ColonyReasonClusterFailed + "/" + infrav1.ColonyReadyCondition:    "Warning",
			infrav1.ColonyReasonClustersNotReady + "/" + infrav1.ColonyReadyCondition: "Warning",
		}
		for k, typ := range want {
			if seen[k] != typ {
				return fmt.Errorf("no %s event %s; seen %v", typ, k, seen)
			}
		}
		return nil
	})
}

func condOf(c *infrav1.Colony, typ string) metav1.Condition {
	for _, x := range c.Status.Conditions {
		if x.Type == typ {
			return x
		}
	}
	return metav1.Condition{}
}
