package colony

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
)

// TestKstatusHealth: what Flux and other kstatus readers (sigs.k8s.io/cli-utils' status.Compute) see
// of a Colony in each phase, with the status computeStatus writes: Current when Ready, InProgress while
// Provisioning or Deleting or while the controller has not observed the latest generation, Failed when
// Degraded, Terminating once deleted.
func TestKstatusHealth(t *testing.T) {
	entry := func(phase clusterPhase) *entryState {
		return &entryState{clusterName: "c0", cdName: "col-c0", exists: true, phase: phase, message: "m"}
	}
	readyObs := observation{
		entries:    []*entryState{entry(clusterReady)},
		kubeconfig: kubeconfigResult{secretName: "col-kubeconfig", included: map[string]bool{"c0": true}},
	}
	cases := []struct {
		name     string
		obs      []observation // reconciles, oldest first
		lag      bool          // the spec changed after the last reconcile
		deleted  bool          // deletionTimestamp set
		phase    infrav1.ColonyPhase
		want     status.Status
		kstatusy bool // Reconciling or Stalled decides, without Ready
	}{
		{name: "provisioning", obs: []observation{{entries: []*entryState{entry(clusterProvisioning)}}},
			phase: infrav1.ColonyPhaseProvisioning, want: status.InProgressStatus, kstatusy: true},
		{name: "ready", obs: []observation{{entries: []*entryState{entry(clusterProvisioning)}}, readyObs},
			phase: infrav1.ColonyPhaseReady, want: status.CurrentStatus},
		{name: "degraded", obs: []observation{{entries: []*entryState{entry(clusterFailed)}}},
			phase: infrav1.ColonyPhaseDegraded, want: status.FailedStatus, kstatusy: true},
		{name: "healed", obs: []observation{{entries: []*entryState{entry(clusterFailed)}}, readyObs},
			phase: infrav1.ColonyPhaseReady, want: status.CurrentStatus},
		{name: "kubeconfig Secret conflict", obs: []observation{{entries: []*entryState{entry(clusterReady)},
			kubeconfig: kubeconfigResult{included: map[string]bool{"c0": true}, conflict: "Secret col-kubeconfig belongs to something else"}}},
			phase: infrav1.ColonyPhaseDegraded, want: status.FailedStatus, kstatusy: true},
		{name: "ready, spec changed since", obs: []observation{readyObs}, lag: true,
			phase: infrav1.ColonyPhaseReady, want: status.InProgressStatus},
		{name: "degraded, spec changed since", obs: []observation{{entries: []*entryState{entry(clusterFailed)}}}, lag: true,
			phase: infrav1.ColonyPhaseDegraded, want: status.InProgressStatus},
		{name: "deleting (without a deletionTimestamp in view)", obs: []observation{readyObs, {deleting: true}},
			phase: infrav1.ColonyPhaseDeleting, want: status.InProgressStatus, kstatusy: true},
		{name: "deleting", obs: []observation{readyObs, {deleting: true}}, deleted: true,
			phase: infrav1.ColonyPhaseDeleting, want: status.TerminatingStatus},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			colony := colonyWith(1)
			colony.TypeMeta = metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "Colony"}
			for i := range c.obs {
				colony.Status = computeStatus(colony, &c.obs[i])
			}
			if colony.Status.Phase != c.phase {
				t.Fatalf("phase %s, want %s", colony.Status.Phase, c.phase)
			}
			for _, k := range colony.Status.Conditions {
				if k.ObservedGeneration != colony.Generation {
					t.Errorf("%s has observedGeneration %d, want %d", k.Type, k.ObservedGeneration, colony.Generation)
				}
			}
			if c.lag {
				colony.Generation++
			}
			if c.deleted {
				now := metav1.Now()
				colony.DeletionTimestamp = &now
			}
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(colony)
			if err != nil {
				t.Fatal(err)
			}
			res, err := status.Compute(&unstructured.Unstructured{Object: raw})
			if err != nil {
				t.Fatalf("kstatus: %v", err)
			}
			if res.Status != c.want {
				t.Errorf("kstatus %s (%s), want %s; conditions %+v", res.Status, res.Message, c.want, colony.Status.Conditions)
			}
			if !c.kstatusy {
				return
			}
			// kstatus falls back on Ready only when neither Reconciling nor Stalled is True; the
			// generic rules must reach the same answer without Ready.
			unready := colony.Status.DeepCopy()
			meta.RemoveStatusCondition(&unready.Conditions, infrav1.ColonyReadyCondition)
			st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(unready)
			if err != nil {
				t.Fatal(err)
			}
			raw["status"] = st
			if res, err := status.Compute(&unstructured.Unstructured{Object: raw}); err != nil || res.Status != c.want {
				t.Errorf("kstatus without Ready: %+v, %v; want %s", res, err, c.want)
			}
		})
	}
}

// actionRecorder keeps the actions (condition types) of the events it is given.
type actionRecorder struct{ actions []string }

func (r *actionRecorder) Eventf(_ runtime.Object, _ runtime.Object, _, _, action, _ string, _ ...interface{}) {
	r.actions = append(r.actions, action)
}

// TestKstatusConditionsMakeNoEvents: Reconciling and Stalled repeat Ready; only Ready's (and
// ClustersReady's) transitions become events.
func TestKstatusConditionsMakeNoEvents(t *testing.T) {
	rec := &actionRecorder{}
	r := &Reconciler{Recorder: rec}
	colony := colonyWith(1)
	for _, obs := range []observation{
		{entries: []*entryState{{clusterName: "c0", cdName: "col-c0", exists: true, phase: clusterProvisioning, message: "m"}}},
		{entries: []*entryState{{clusterName: "c0", cdName: "col-c0", exists: true, phase: clusterFailed, message: "m"}}},
	} {
		desired := computeStatus(colony, &obs)
		r.recordTransitions(colony, desired)
		colony.Status = desired
	}
	if len(rec.actions) == 0 {
		t.Fatal("no events at all")
	}
	for _, a := range rec.actions {
		if a == infrav1.ColonyReconcilingCondition || a == infrav1.ColonyStalledCondition {
			t.Errorf("an event for %s (actions %v)", a, rec.actions)
		}
	}
}
