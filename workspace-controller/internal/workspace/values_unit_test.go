package workspace

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// TestValuesBuiltOnceWhenTheGateKeepsTheAdmission: a pass builds a workspace's values once when the
// gate keeps the admission it had (the check before the gate already pins the admitted node), and
// again, with the new node pinned, when the gate admits it for the first time or on another node.
func TestValuesBuiltOnceWhenTheGateKeepsTheAdmission(t *testing.T) {
	ctx := context.Background()
	r := &Reconciler{}
	class := &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: "jupyter"}}
	gpus := int32(1)
	resources := func() *workspacesv1.ResolvedResources {
		return &workspacesv1.ResolvedResources{Replicas: 1, GPUResourceName: "nvidia.com/gpu",
			PerReplica: workspacesv1.PerReplicaResources{GPUCount: &gpus}}
	}
	admission := func(node string) *workspacesv1.Admission {
		return &workspacesv1.Admission{Cluster: "fleet-a", GPUResourceName: "nvidia.com/gpu", GPUsPerReplica: 1, Replicas: 1, GPUs: 1,
			Nodes: []workspacesv1.AdmittedNode{{Name: node, Replicas: 1, Hostname: node}}}
	}
	newScope := func(ad *workspacesv1.Admission) *scope {
		ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Name: "nb", Namespace: "team-a"}}
		ws.Status.Admission = ad
		return &scope{ws: ws, class: class, resources: resources(), sourcesRead: &valuesFromRead{}}
	}
	// pass runs "values check", lets the gate leave admitted as the admission, then runs "pin to
	// admitted nodes" and "values"; it reports whether the second step built the values again.
	pass := func(t *testing.T, s *scope, admitted *workspacesv1.Admission) (rebuilt bool) {
		t.Helper()
		if out, err := r.valuesCheck(ctx, s); err != nil || out.stop {
			t.Fatalf("values check: %+v %v (%+v)", out, err, s.ws.Status.Conditions)
		}
		checked := s.built
		if checked == nil {
			t.Fatal("the values check kept no values")
		}
		s.ws.Status.Admission = admitted
		if _, err := r.pinToAdmittedNodes(ctx, s); err != nil {
			t.Fatal(err)
		}
		if out, err := r.values(ctx, s); err != nil || out.stop {
			t.Fatalf("values: %+v %v", out, err)
		}
		if want := admitted.Nodes[0].Hostname; !strings.Contains(s.values, corev1.LabelHostname+": "+want) {
			t.Fatalf("the values do not pin %s:\n%s", want, s.values)
		}
		return s.built != checked
	}

	t.Run("kept", func(t *testing.T) {
		if pass(t, newScope(admission("gpu-a")), admission("gpu-a")) {
			t.Error("the values were built again although the gate kept the admission")
		}
	})
	t.Run("first admission", func(t *testing.T) {
		if !pass(t, newScope(nil), admission("gpu-a")) {
			t.Error("the values built before the first admission were kept")
		}
	})
	t.Run("another node", func(t *testing.T) {
		if !pass(t, newScope(admission("gpu-a")), admission("gpu-b")) {
			t.Error("the values built for gpu-a were kept for an admission on gpu-b")
		}
	})
}
