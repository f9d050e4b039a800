package helmvalues

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// TestZeroReplicasReachTheChart: a stopped workspace's values carry replicas 0, in _exalsius and at
// the class's replicas injection path, never left out as unset.
func TestZeroReplicasReachTheChart(t *testing.T) {
	class := &workspacesv1.WorkspaceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec:       workspacesv1.WorkspaceClassSpec{ResourceInjection: &workspacesv1.ResourceInjection{Replicas: []string{"replicaCount"}}},
	}
	ws := &workspacesv1.WorkspaceDeployment{}
	built, err := Build(Input{Class: class, Workspace: ws, Resources: gpuResources(0, 1, "A100")})
	if err != nil {
		t.Fatal(err)
	}
	got := decode(t, built.Inline)
	ex, _ := got["_exalsius"].(map[string]any)
	res, _ := ex["resources"].(map[string]any)
	if r, ok := res["replicas"]; !ok || r != float64(0) {
		t.Errorf("_exalsius.resources.replicas = %v (set %t), want 0", r, ok)
	}
	if r, ok := got["replicaCount"]; !ok || r != float64(0) {
		t.Errorf("replicaCount = %v (set %t), want 0", r, ok)
	}
}
