package workspace

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// The prerequisite collector wakes for what changes a cluster's prerequisite use, not for status churn.
func TestChangesPrerequisiteUse(t *testing.T) {
	base := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "nb"},
		Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: "jupyter", ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "cd"}}}
	p := changesPrerequisiteUse{}
	for _, c := range []struct {
		name   string
		change func(*workspacesv1.WorkspaceDeployment)
		want   bool
	}{
		{"status", func(w *workspacesv1.WorkspaceDeployment) { w.Status.Phase = workspacesv1.PhaseRunning }, false},
		{"class", func(w *workspacesv1.WorkspaceDeployment) { w.Spec.WorkspaceClassRef = "vllm" }, true},
		{"cluster", func(w *workspacesv1.WorkspaceDeployment) { w.Spec.ClusterDeploymentRef.Name = "other" }, true},
		{"deletion", func(w *workspacesv1.WorkspaceDeployment) { now := metav1.Now(); w.DeletionTimestamp = &now }, true},
	} {
		n := base.DeepCopy()
		c.change(n)
		if got := p.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: n}); got != c.want {
			t.Errorf("%s: Update = %v, want %v", c.name, got, c.want)
		}
	}
	if !p.Create(event.CreateEvent{Object: base}) || !p.Delete(event.DeleteEvent{Object: base}) {
		t.Error("a workspace made or gone must wake the collector")
	}
}
