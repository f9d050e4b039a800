package workspace

import (
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspaceclass"
)

// statusWriters lists "manager/operation" of the status entries of an object's managedFields.
func statusWriters(obj client.Object) []string {
	var out []string
	for _, mf := range obj.GetManagedFields() {
		if mf.Subresource == "status" {
			out = append(out, mf.Manager+"/"+string(mf.Operation))
		}
	}
	return out
}

// TestStatusAppliedAsTheComponent: the status of a workspace and of its class is written by
// server-side apply under the component's field manager, and by nothing else.
func TestStatusAppliedAsTheComponent(t *testing.T) {
	if workspaceclass.FieldManager != Component {
		t.Fatalf("workspaceclass.FieldManager %q, want the component word %q", workspaceclass.FieldManager, Component)
	}
	key, _ := runningCPUWorkspace(t)
	want := Component + "/Apply"
	ws := getWS(t, key)
	if got := statusWriters(ws); len(got) != 1 || got[0] != want {
		t.Errorf("WorkspaceDeployment status writers %v, want [%s]", got, want)
	}
	eventually(t, "the class's status applied", func() error {
		class := &workspacesv1.WorkspaceClass{}
		if err := k8s.Get(ctxT(t), client.ObjectKey{Name: ws.Spec.WorkspaceClassRef}, class); err != nil {
			return err
		}
		if got := statusWriters(class); len(got) != 1 || got[0] != want {
			return fmt.Errorf("WorkspaceClass status writers %v, want [%s]", got, want)
		}
		return nil
	})
}
