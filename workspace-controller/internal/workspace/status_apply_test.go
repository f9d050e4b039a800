package workspace

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
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

// TestStatusAppliedAsTheComponent: the status of a workspace and of its class is written under the
// component's field manager and by nothing else: the class's by server-side apply, the workspace's by
// a merge patch (an Update in managedFields; see writeStatus for why).
func TestStatusAppliedAsTheComponent(t *testing.T) {
	if workspaceclass.FieldManager != Component {
		t.Fatalf("workspaceclass.FieldManager %q, want the component word %q", workspaceclass.FieldManager, Component)
	}
	key, _ := runningCPUWorkspace(t)
	ws := getWS(t, key)
	if got, want := statusWriters(ws), Component+"/Update"; len(got) != 1 || got[0] != want {
		t.Errorf("WorkspaceDeployment status writers %v, want [%s]", got, want)
	}
	want := Component + "/Apply"
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

// TestStatusFieldOfAnotherWriterCleared: a status field another field manager wrote (the upstream
// operator a migration replaces) and this controller does not set is cleared on the next write,
// which server-side apply would leave in place.
func TestStatusFieldOfAnotherWriterCleared(t *testing.T) {
	key, cdName := runningCPUWorkspace(t)
	ws := getWS(t, key)
	if ws.Status.FailureContext != nil {
		t.Fatalf("a Running workspace has a failure context: %+v", ws.Status.FailureContext)
	}
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Status.FailureContext = &workspacesv1.FailureContext{Reason: "LeftByTheUpstreamOperator"}
	must(t, k8s.Status().Patch(ctxT(t), ws, patch, client.FieldOwner("upstream-operator")))
	// A status-only change does not wake the controller; a relabelled ClusterDeployment does.
	cd := &k0rdentv1beta1.ClusterDeployment{}
	must(t, k8s.Get(ctxT(t), types.NamespacedName{Namespace: key.Namespace, Name: cdName}, cd))
	base := cd.DeepCopy()
	if cd.Labels == nil {
		cd.Labels = map[string]string{}
	}
	cd.Labels["test.example/touch"] = "1"
	must(t, k8s.Patch(ctxT(t), cd, client.MergeFrom(base)))
	eventually(t, "the other writer's failure context cleared", func() error {
		if got := getWS(t, key); got.Status.FailureContext != nil {
			return fmt.Errorf("failure context %+v, phase %s", got.Status.FailureContext, got.Status.Phase)
		}
		return nil
	})
}
