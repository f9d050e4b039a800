package workspace

import (
	"fmt"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// TestKstatusHealth: what Flux and other kstatus readers (sigs.k8s.io/cli-utils' status.Compute) see
// of a WorkspaceDeployment in each phase, with the status written the way a pass writes it (apply,
// from deriveStatus): Current when Running, InProgress while it progresses or while the controller
// has not observed the latest generation, Failed when Failed, Terminating once deleted. Ready carries
// the generation it was computed for.
func TestKstatusHealth(t *testing.T) {
	type step struct {
		obs      observation
		observed bool // the pass observed the current generation
	}
	failedObs := observation{verdict: verdict{verdictFailed, workspacesv1.ReasonHelmReleaseFailed, "the release failed"}}
	runningObs := observation{verdict: verdict{kind: verdictRunning}}
	cases := []struct {
		name     string
		steps    []step // passes, oldest first, on the same workspace
		deleted  bool   // deletionTimestamp set
		lag      bool   // the spec changed after the last pass
		phase    workspacesv1.WorkspacePhase
		want     status.Status
		wantCond status.ConditionType
	}{
		{name: "pending", steps: []step{{observation{verdict: verdict{verdictPending, workspacesv1.ReasonClusterNotReady, "cluster not ready"}}, true}},
			phase: workspacesv1.PhasePending, want: status.InProgressStatus, wantCond: status.ConditionReconciling},
		{name: "waiting", steps: []step{{observation{verdict: verdict{verdictWaiting, workspacesv1.ReasonWaitingForGpuCapacity, "0 free"}}, true}},
			phase: workspacesv1.PhaseWaiting, want: status.InProgressStatus, wantCond: status.ConditionReconciling},
		{name: "installing prerequisites", steps: []step{{observation{verdict: verdict{verdictPrerequisites, workspacesv1.ReasonPrerequisitesDeploying, "p"}}, true}},
			phase: workspacesv1.PhaseInstallingPrerequisites, want: status.InProgressStatus, wantCond: status.ConditionReconciling},
		{name: "deploying", steps: []step{{observation{verdict: verdict{verdictDeploying, workspacesv1.ReasonHelmReleaseDeploying, "d"}}, true}},
			phase: workspacesv1.PhaseDeploying, want: status.InProgressStatus, wantCond: status.ConditionReconciling},
		{name: "running", steps: []step{{observation{verdict: verdict{verdictDeploying, workspacesv1.ReasonHelmReleaseDeploying, "d"}}, true}, {runningObs, true}},
			phase: workspacesv1.PhaseRunning, want: status.CurrentStatus},
		{name: "failed", steps: []step{{failedObs, true}},
			phase: workspacesv1.PhaseFailed, want: status.FailedStatus, wantCond: status.ConditionStalled},
		{name: "healed after a failure", steps: []step{{failedObs, true}, {runningObs, true}},
			phase: workspacesv1.PhaseRunning, want: status.CurrentStatus},
		{name: "running, spec changed since", steps: []step{{runningObs, true}}, lag: true,
			phase: workspacesv1.PhaseRunning, want: status.InProgressStatus},
		{name: "failed, spec changed since", steps: []step{{failedObs, true}}, lag: true,
			phase: workspacesv1.PhaseFailed, want: status.InProgressStatus},
		{name: "stopping", steps: []step{{runningObs, true}, {observation{verdict: verdict{verdictStopped, workspacesv1.ReasonStopping, "scaling to zero"}}, true}},
			phase: workspacesv1.PhaseStopped, want: status.InProgressStatus, wantCond: status.ConditionReconciling},
		{name: "stopped", steps: []step{{runningObs, true}, {observation{verdict: verdict{verdictStopped, workspacesv1.ReasonStopped, "stopped"}}, true}},
			phase: workspacesv1.PhaseStopped, want: status.CurrentStatus},
		{name: "deleting (without a deletionTimestamp in view)", steps: []step{{runningObs, true}, {observation{deleting: true}, true}},
			phase: workspacesv1.PhaseDeleting, want: status.InProgressStatus, wantCond: status.ConditionReconciling},
		{name: "deleting", steps: []step{{runningObs, true}, {observation{deleting: true}, true}}, deleted: true,
			phase: workspacesv1.PhaseDeleting, want: status.TerminatingStatus},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := &workspacesv1.WorkspaceDeployment{
				TypeMeta:   metav1.TypeMeta{APIVersion: workspacesv1.GroupVersion.String(), Kind: "WorkspaceDeployment"},
				ObjectMeta: metav1.ObjectMeta{Name: "ws", Namespace: "team", Generation: 4},
			}
			for _, st := range c.steps {
				s := &scope{ws: ws, prev: *ws.Status.DeepCopy(), obs: st.obs}
				if st.observed {
					ws.Status.ObservedGeneration = ws.Generation
				}
				s.apply()
			}
			if ws.Status.Phase != c.phase {
				t.Fatalf("phase %s, want %s", ws.Status.Phase, c.phase)
			}
			for _, typ := range []string{workspacesv1.ReadyCondition, workspacesv1.ReconcilingCondition, workspacesv1.StalledCondition} {
				if k := meta.FindStatusCondition(ws.Status.Conditions, typ); k != nil && k.ObservedGeneration != ws.Generation {
					t.Errorf("%s has observedGeneration %d, want %d", typ, k.ObservedGeneration, ws.Generation)
				}
			}
			if meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReadyCondition) == nil {
				t.Error("no Ready condition")
			}
			if c.lag {
				ws.Generation++
			}
			if c.deleted {
				now := metav1.Now()
				ws.DeletionTimestamp = &now
			}
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ws)
			if err != nil {
				t.Fatal(err)
			}
			res, err := status.Compute(&unstructured.Unstructured{Object: raw})
			if err != nil {
				t.Fatalf("kstatus: %v", err)
			}
			if res.Status != c.want {
				t.Errorf("kstatus %s (%s), want %s; conditions %+v", res.Status, res.Message, c.want, ws.Status.Conditions)
			}
			if c.wantCond == "" {
				return
			}
			if !hasKstatusCondition(res, c.wantCond) {
				t.Errorf("kstatus result %+v lacks %s", res, c.wantCond)
			}
			// kstatus falls back on Ready only when neither Reconciling nor Stalled is True; the
			// generic rules (and health checks that read only them) must reach the same answer
			// without Ready.
			u := &unstructured.Unstructured{Object: raw}
			unready := ws.Status.DeepCopy()
			meta.RemoveStatusCondition(&unready.Conditions, workspacesv1.ReadyCondition)
			st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(unready)
			if err != nil {
				t.Fatal(err)
			}
			u.Object["status"] = st
			if res, err := status.Compute(u); err != nil || res.Status != c.want {
				t.Errorf("kstatus without Ready: %+v, %v; want %s", res, err, c.want)
			}
		})
	}
}

func hasKstatusCondition(res *status.Result, typ status.ConditionType) bool {
	for _, c := range res.Conditions {
		if c.Type == typ && string(c.Status) == string(metav1.ConditionTrue) {
			return true
		}
	}
	return false
}

// TestKstatusOnAFailedWorkspace: the status the controller writes for a workspace whose class is
// invalid is Failed for kstatus, with Ready and Stalled for the current generation, and the Stalled
// condition makes no event of its own (Ready's transition does).
func TestKstatusOnAFailedWorkspace(t *testing.T) {
	ns := newNamespace(t)
	cd := createCluster(t, ns, child.Kubeconfig)
	spec := classSpec(name("kstatus"))
	spec.ServiceTemplate.VersionConstraint = ">=9.0.0"
	createTemplate(t, spec.ServiceTemplate.Name, "1.0.0", workspacesv1.DefaultServiceTemplateNamespace, ns)
	className := name("kstatus-class")
	must(t, k8s.Create(ctxT(t), &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: className}, Spec: spec}))
	key := createWorkspace(t, ns, className, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonClassInvalid)

	stalled := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.StalledCondition)
	ready := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReadyCondition)
	if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != workspacesv1.ReasonClassInvalid ||
		stalled.ObservedGeneration != ws.Generation || ready == nil || ready.ObservedGeneration != ws.Generation ||
		ws.Status.ObservedGeneration != ws.Generation {
		t.Fatalf("generation %d, status %+v", ws.Generation, ws.Status)
	}
	if meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReconcilingCondition) != nil {
		t.Errorf("a failed workspace has Reconciling: %+v", ws.Status.Conditions)
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ws)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := status.Compute(&unstructured.Unstructured{Object: raw}); err != nil || res.Status != status.FailedStatus {
		t.Errorf("kstatus %+v, %v; want Failed", res, err)
	}

	var list eventsv1.EventList
	eventually(t, "the Ready event of the failure", func() error {
		if err := k8s.List(ctxT(t), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == ws.Name && e.Action == workspacesv1.ReadyCondition && e.Reason == workspacesv1.ReasonClassInvalid {
				return nil
			}
		}
		return fmt.Errorf("no Ready/ClassInvalid event among %d", len(list.Items))
	})
	for _, e := range list.Items {
		if e.Regarding.Name == ws.Name && (e.Action == workspacesv1.StalledCondition || e.Action == workspacesv1.ReconcilingCondition) {
			t.Errorf("an event for %s: %s %s", e.Action, e.Reason, e.Note)
		}
	}
}
