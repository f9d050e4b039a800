package workspace

import (
	"fmt"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/workspaceclass"
)

// TestSetupReportsClassEventsUnderTheComponent: as Setup wires it, the WorkspaceClass controller
// reports its events as the component (workspace-controller), like the WorkspaceDeployment one.
func TestSetupReportsClassEventsUnderTheComponent(t *testing.T) {
	ns := newNamespace(t)
	cd := createCluster(t, ns, child.Kubeconfig)
	class := createClass(t, classSpec(name("reporter")))
	key := createWorkspace(t, ns, class, cd.Name)

	must(t, k8s.Delete(ctxT(t), &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: class}}))
	eventually(t, "the class's DeletionBlocked event", func() error {
		var evs eventsv1.EventList
		if err := k8s.List(ctxT(t), &evs); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "WorkspaceClass" && e.Regarding.Name == class && e.Reason == workspaceclass.ReasonDeletionBlocked {
				if e.ReportingController != Component {
					return fmt.Errorf("reported by %q, want %q", e.ReportingController, Component)
				}
				return nil
			}
		}
		return fmt.Errorf("no DeletionBlocked event among %d", len(evs.Items))
	})

	must(t, client.IgnoreNotFound(k8s.Delete(ctxT(t), &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})))
	eventually(t, "the class gone after its last user", func() error {
		err := k8s.Get(ctxT(t), client.ObjectKey{Name: class}, &workspacesv1.WorkspaceClass{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}
