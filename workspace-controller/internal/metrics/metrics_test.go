package metrics

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

func workspace(ns, name string, phase workspacesv1.WorkspacePhase, mutate ...func(*workspacesv1.WorkspaceDeployment)) workspacesv1.WorkspaceDeployment {
	w := workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	w.Status.Phase = phase
	for _, m := range mutate {
		m(&w)
	}
	return w
}

func resolved(gpus, replicas int32, vendor workspacesv1.GPUVendor, model string) func(*workspacesv1.WorkspaceDeployment) {
	return func(w *workspacesv1.WorkspaceDeployment) {
		w.Status.ResolvedResources = &workspacesv1.ResolvedResources{Replicas: replicas,
			PerReplica: workspacesv1.PerReplicaResources{GPUCount: &gpus, GPUVendor: vendor, GPUType: model}}
	}
}

func static(items ...workspacesv1.WorkspaceDeployment) listWorkspaces {
	return func(context.Context) ([]*workspacesv1.WorkspaceDeployment, error) {
		out := make([]*workspacesv1.WorkspaceDeployment, len(items))
		for i := range items {
			out[i] = &items[i]
		}
		return out, nil
	}
}

// TestWorkspaceCollector: workspaces by namespace and phase (every phase of a namespace that has
// workspaces, none of one that has none), the GPUs asked for by the workspaces that want to run, and
// the GPUs admitted by the admitted nodes' models.
func TestWorkspaceCollector(t *testing.T) {
	running := workspace("team-a", "run", workspacesv1.PhaseRunning, resolved(2, 2, workspacesv1.GPUVendorNVIDIA, "A100"),
		func(w *workspacesv1.WorkspaceDeployment) {
			// Two replicas on two nodes: one that records its model, one admitted before nodes did.
			w.Status.Admission = &workspacesv1.Admission{GPUVendor: workspacesv1.GPUVendorNVIDIA, GPUModel: "A100",
				GPUsPerReplica: 2, Replicas: 2, GPUs: 4,
				Nodes: []workspacesv1.AdmittedNode{{Name: "n1", Replicas: 1, GPUModel: "A100"}, {Name: "n2", Replicas: 1}}}
		})
	waiting := workspace("team-a", "wait", workspacesv1.PhaseWaiting, resolved(4, 1, workspacesv1.GPUVendorAMD, ""))
	stopped := workspace("team-a", "stopped", workspacesv1.PhaseStopped, resolved(8, 1, workspacesv1.GPUVendorNVIDIA, "A100"),
		func(w *workspacesv1.WorkspaceDeployment) { w.Spec.Stopped = true })
	fresh := workspace("team-a", "fresh", "") // no phase yet: Pending
	failed := workspace("team-b", "failed", workspacesv1.PhaseFailed, resolved(64, 1, workspacesv1.GPUVendorNVIDIA, ""))

	c := newWorkspaceCollector(static(running, waiting, stopped, fresh, failed))
	want := `
# HELP exalsius_workspace_controller_gpus_admitted GPUs the GPU gate has admitted to the namespace's workspaces and reserves for them; model is the admitted nodes' GPU model.
# TYPE exalsius_workspace_controller_gpus_admitted gauge
exalsius_workspace_controller_gpus_admitted{model="A100",namespace="team-a",vendor="NVIDIA"} 4
# HELP exalsius_workspace_controller_gpus_requested GPUs the namespace's workspaces ask for (gpuCount x replicas), of those neither stopped, Failed nor being deleted; model is the gpuType asked for, empty for any.
# TYPE exalsius_workspace_controller_gpus_requested gauge
exalsius_workspace_controller_gpus_requested{model="",namespace="team-a",vendor="AMD"} 4
exalsius_workspace_controller_gpus_requested{model="A100",namespace="team-a",vendor="NVIDIA"} 4
# HELP exalsius_workspace_controller_workspaces WorkspaceDeployments by namespace and phase; every phase is present (0 when none) for a namespace that has workspaces.
# TYPE exalsius_workspace_controller_workspaces gauge
` + phaseLines("team-a", map[string]int{"Pending": 1, "Running": 1, "Stopped": 1, "Waiting": 1}) +
		phaseLines("team-b", map[string]int{"Failed": 1})
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	// team-b's last workspace is gone: its series go with it.
	c = newWorkspaceCollector(static(fresh))
	want = `
# HELP exalsius_workspace_controller_workspaces WorkspaceDeployments by namespace and phase; every phase is present (0 when none) for a namespace that has workspaces.
# TYPE exalsius_workspace_controller_workspaces gauge
` + phaseLines("team-a", map[string]int{"Pending": 1})
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// phaseLines is the workspaces series of a namespace, in the exposition's order (by phase).
func phaseLines(ns string, counts map[string]int) string {
	var b strings.Builder
	for _, p := range []string{"Deleting", "Deploying", "Failed", "InstallingPrerequisites", "Pending", "Running", "Stopped", "Waiting"} {
		b.WriteString(`exalsius_workspace_controller_workspaces{namespace="` + ns + `",phase="` + p + `"} ` + itoa(counts[p]) + "\n")
	}
	return b.String()
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestWaitingReason: the reason label is the Ready reason of a Waiting workspace when it is a known
// waiting reason, else Other, so that its values stay a fixed set.
func TestWaitingReason(t *testing.T) {
	for reason, want := range map[string]string{
		workspacesv1.ReasonQuotaExceeded:         workspacesv1.ReasonQuotaExceeded,
		workspacesv1.ReasonWaitingForGpuCapacity: workspacesv1.ReasonWaitingForGpuCapacity,
		workspacesv1.ReasonWaitingForGpuNodes:    workspacesv1.ReasonWaitingForGpuNodes,
		workspacesv1.ReasonNoClusterFitsNow:      workspacesv1.ReasonNoClusterFitsNow,
		workspacesv1.ReasonClusterUnreachable:    workspacesv1.ReasonClusterUnreachable,
		"SomethingNew":                           ReasonOther,
		"":                                       ReasonOther,
	} {
		st := &workspacesv1.WorkspaceDeploymentStatus{Phase: workspacesv1.PhaseWaiting}
		if reason != "" {
			st.Conditions = []metav1.Condition{{Type: workspacesv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason}}
		}
		if got := WaitingReason(st); got != want {
			t.Errorf("WaitingReason(%q) = %q, want %q", reason, got, want)
		}
	}
}
