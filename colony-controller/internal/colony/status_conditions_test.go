package colony

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
)

func TestTallyEntries(t *testing.T) {
	colony := colonyWith(5)
	obs := &observation{
		entries: []*entryState{
			{clusterName: "c0", cdName: "col-c0", exists: true, phase: clusterReady},
			{clusterName: "c1", cdName: "col-c1", exists: true, phase: clusterReady},
			{clusterName: "c2", cdName: "col-c2", exists: true, phase: clusterFailed, message: "boom"},
			{clusterName: "c3", cdName: "col-c3", invalid: "field c3"},
			{clusterName: "c4", cdName: "col-c4", applyError: "refused", phase: clusterProvisioning, message: "m"},
		},
		kubeconfig: kubeconfigResult{included: map[string]bool{"c0": true}, problems: map[string]string{"c1": "no value key"}},
	}
	got := tallyEntries(colony, obs)
	if got.ready != 1 {
		t.Errorf("ready %d, want 1 (c1 is left out of the kubeconfig)", got.ready)
	}
	if len(got.refs) != 3 || got.refs[0].Name != "col-c0" || got.refs[2].Name != "col-c2" || got.refs[0].Namespace != "ns" {
		t.Errorf("refs %+v, want the three existing ClusterDeployments in entry order", got.refs)
	}
	if want := []string{"field c3"}; strings.Join(got.invalid, "|") != strings.Join(want, "|") {
		t.Errorf("invalid %q, want %q", got.invalid, want)
	}
	if want := "c2 (ClusterDeployment col-c2): boom"; len(got.failed) != 1 || got.failed[0] != want {
		t.Errorf("failed %q, want [%q]", got.failed, want)
	}
	want := []string{"c1 (ClusterDeployment col-c1): no value key", "c4 (ClusterDeployment col-c4): refused"}
	if strings.Join(got.notReady, "|") != strings.Join(want, "|") {
		t.Errorf("notReady %q, want %q", got.notReady, want)
	}
	// A ready cluster with no problem recorded is waiting for the aggregation.
	obs.kubeconfig.problems = nil
	if got := tallyEntries(colony, obs); !strings.Contains(got.notReady[0], "kubeconfig not aggregated yet") {
		t.Errorf("notReady %q", got.notReady)
	}
}

func TestClustersReadyCondition(t *testing.T) {
	cases := []struct {
		name    string
		n       int
		tally   entryTally
		obs     observation
		status  metav1.ConditionStatus
		reason  string
		message []string
	}{
		{name: "no entries", n: 0, status: metav1.ConditionTrue, reason: infrav1.ColonyReasonNoClusters,
			message: []string{"the Colony has no clusters"}},
		{name: "all ready", n: 2, tally: entryTally{ready: 2}, status: metav1.ConditionTrue,
			reason: infrav1.ColonyReasonAllClustersReady, message: []string{"2/2 clusters ready"}},
		{name: "not ready", n: 2, tally: entryTally{ready: 1, notReady: []string{"c1: x"}},
			obs: observation{removing: []string{"col-old"}}, status: metav1.ConditionFalse,
			reason: infrav1.ColonyReasonClustersNotReady, message: []string{"1/2 clusters ready",
				"not ready, left out of Secret col-kubeconfig: c1: x", "deleting ClusterDeployments of removed entries: col-old"}},
		{name: "failed before not ready", n: 2, tally: entryTally{failed: []string{"c0: f"}, notReady: []string{"c1: x"}},
			status: metav1.ConditionFalse, reason: infrav1.ColonyReasonClusterFailed, message: []string{"failed: c0: f"}},
		{name: "invalid before failed", n: 2, tally: entryTally{invalid: []string{"bad"}, failed: []string{"c0: f"}},
			status: metav1.ConditionFalse, reason: infrav1.ColonyReasonInvalidEntry, message: []string{"invalid entries: bad", "failed: c0: f"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := clustersReadyCondition(colonyWith(tc.n), &tc.obs, tc.tally)
			if c.Type != infrav1.ColonyClustersReadyCondition || c.Status != tc.status || c.Reason != tc.reason {
				t.Errorf("%s %s/%s, want ClustersReady %s/%s", c.Type, c.Status, c.Reason, tc.status, tc.reason)
			}
			for _, m := range tc.message {
				if !strings.Contains(c.Message, m) {
					t.Errorf("message %q lacks %q", c.Message, m)
				}
			}
		})
	}
}

func TestReadyCondition(t *testing.T) {
	ok := metav1.Condition{Type: infrav1.ColonyClustersReadyCondition, Status: metav1.ConditionTrue,
		Reason: infrav1.ColonyReasonAllClustersReady, Message: "2/2 clusters ready"}
	notOK := metav1.Condition{Type: infrav1.ColonyClustersReadyCondition, Status: metav1.ConditionFalse,
		Reason: infrav1.ColonyReasonClustersNotReady, Message: "1/2 clusters ready"}
	cases := []struct {
		name          string
		clustersReady metav1.Condition
		kc            kubeconfigResult
		want          metav1.Condition
	}{
		{name: "ready names the Secret", clustersReady: ok, kc: kubeconfigResult{secretName: "col-kubeconfig"},
			want: metav1.Condition{Status: metav1.ConditionTrue, Reason: infrav1.ColonyReasonAllClustersReady,
				Message: "2/2 clusters ready. Kubeconfig in Secret col-kubeconfig"}},
		{name: "ready names the shards", clustersReady: ok,
			kc: kubeconfigResult{secretName: "col-kubeconfig", shards: []string{"col-kubeconfig", "col-kubeconfig-1"}},
			want: metav1.Condition{Status: metav1.ConditionTrue, Reason: infrav1.ColonyReasonAllClustersReady,
				Message: "2/2 clusters ready. Kubeconfigs in Secrets col-kubeconfig, col-kubeconfig-1 (index in col-kubeconfig)"}},
		{name: "ready without a Secret yet", clustersReady: ok,
			want: metav1.Condition{Status: metav1.ConditionTrue, Reason: infrav1.ColonyReasonAllClustersReady, Message: "2/2 clusters ready"}},
		{name: "not ready repeats ClustersReady", clustersReady: notOK, kc: kubeconfigResult{secretName: "col-kubeconfig"},
			want: metav1.Condition{Status: metav1.ConditionFalse, Reason: infrav1.ColonyReasonClustersNotReady, Message: "1/2 clusters ready"}},
		{name: "a conflict wins", clustersReady: ok, kc: kubeconfigResult{secretName: "col-kubeconfig", conflict: "Secret col-kubeconfig is not the Colony's"},
			want: metav1.Condition{Status: metav1.ConditionFalse, Reason: infrav1.ColonyReasonKubeconfigSecretFailed,
				Message: "Secret col-kubeconfig is not the Colony's"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Type = infrav1.ColonyReadyCondition
			if got := readyCondition(tc.clustersReady, tc.kc); got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDeletingCondition(t *testing.T) {
	c := deletingCondition(infrav1.ColonyReadyCondition, []remainingClusterDeployment{{name: "a"}, {name: "b", finalizers: []string{"f", "g"}}})
	want := metav1.Condition{Type: infrav1.ColonyReadyCondition, Status: metav1.ConditionFalse, Reason: infrav1.ColonyReasonDeleting,
		Message: "waiting for ClusterDeployments to be deleted: a, b (finalizers: f, g)"}
	if c != want {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
	if c := deletingCondition(infrav1.ColonyClustersReadyCondition, nil); c.Message != "all ClusterDeployments are deleted" ||
		c.Type != infrav1.ColonyClustersReadyCondition {
		t.Errorf("nothing left: %+v", c)
	}
}

func TestColonyPhase(t *testing.T) {
	trueC := metav1.Condition{Status: metav1.ConditionTrue}
	falseC := metav1.Condition{Status: metav1.ConditionFalse}
	cases := []struct {
		name string
		t    entryTally
		kc   kubeconfigResult
		cr   metav1.Condition
		want infrav1.ColonyPhase
	}{
		{"ready", entryTally{}, kubeconfigResult{}, trueC, infrav1.ColonyPhaseReady},
		{"provisioning", entryTally{}, kubeconfigResult{}, falseC, infrav1.ColonyPhaseProvisioning},
		{"invalid", entryTally{invalid: []string{"x"}}, kubeconfigResult{}, falseC, infrav1.ColonyPhaseDegraded},
		{"failed", entryTally{failed: []string{"x"}}, kubeconfigResult{}, falseC, infrav1.ColonyPhaseDegraded},
		{"Secret conflict while clusters are ready", entryTally{}, kubeconfigResult{conflict: "x"}, trueC, infrav1.ColonyPhaseDegraded},
	}
	for _, tc := range cases {
		if got := colonyPhase(tc.t, tc.kc, tc.cr); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestColonyProgress(t *testing.T) {
	for phase, want := range map[infrav1.ColonyPhase]conditions.Progress{
		infrav1.ColonyPhaseProvisioning: conditions.InProgress,
		infrav1.ColonyPhaseDeleting:     conditions.InProgress,
		infrav1.ColonyPhaseDegraded:     conditions.Failed,
		infrav1.ColonyPhaseReady:        conditions.Current,
	} {
		if got := colonyProgress(phase); got != want {
			t.Errorf("%s: %v, want %v", phase, got, want)
		}
	}
}
