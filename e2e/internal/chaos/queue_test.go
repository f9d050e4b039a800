package chaos

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

func TestInversions(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	ws := func(name string, gpus int32, phase workspacesv1.WorkspacePhase, admittedAfter time.Duration) *workspacesv1.WorkspaceDeployment {
		w := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Name: name}}
		w.Status.Phase = phase
		w.Status.ResolvedResources = &workspacesv1.ResolvedResources{Replicas: 1, PerReplica: workspacesv1.PerReplicaResources{GPUCount: &gpus}}
		if phase == workspacesv1.PhaseRunning || phase == workspacesv1.PhaseDeploying {
			at := metav1.NewTime(t0.Add(admittedAfter))
			w.Status.Admission = &workspacesv1.Admission{AdmittedAt: &at}
		}
		return w
	}
	queue := []string{"w1", "w2"}
	cases := []struct {
		name    string
		ahead   *workspacesv1.WorkspaceDeployment
		behind  *workspacesv1.WorkspaceDeployment
		deleted bool
		want    string // a part of the one finding, or "" for none
	}{
		{"in order", ws("w1", 1, workspacesv1.PhaseRunning, 0), ws("w2", 1, workspacesv1.PhaseRunning, 5*time.Second), false, ""},
		{"the one behind runs, the one ahead of the same size waits", ws("w1", 1, workspacesv1.PhaseWaiting, 0), ws("w2", 1, workspacesv1.PhaseRunning, 0), false, "while w1, ahead of it, is Waiting"},
		{"a smaller one behind fills GPUs the larger one ahead cannot use", ws("w1", 2, workspacesv1.PhaseWaiting, 0), ws("w2", 1, workspacesv1.PhaseRunning, 0), false, ""},
		{"the one behind admitted clearly first", ws("w1", 1, workspacesv1.PhaseRunning, time.Minute), ws("w2", 2, workspacesv1.PhaseDeploying, 0), false, "before w1 ahead of it"},
		{"admitted within the slack", ws("w1", 1, workspacesv1.PhaseRunning, AdmissionSlack), ws("w2", 1, workspacesv1.PhaseRunning, 0), false, ""},
		{"both wait", ws("w1", 1, workspacesv1.PhaseWaiting, 0), ws("w2", 1, workspacesv1.PhaseWaiting, 0), false, ""},
		{"the one ahead was deleted during the round", ws("w1", 1, workspacesv1.PhaseWaiting, 0), ws("w2", 1, workspacesv1.PhaseRunning, 0), true, ""},
	}
	for _, c := range cases {
		now := map[string]*workspacesv1.WorkspaceDeployment{"w1": c.ahead, "w2": c.behind}
		got := Inversions(queue, now, map[string]bool{"w1": c.deleted})
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%s: inversions %q, want none", c.name, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)):
			t.Errorf("%s: inversions %q, want one naming %q", c.name, got, c.want)
		}
	}
}
