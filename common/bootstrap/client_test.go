package bootstrap

import (
	"context"
	"io"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/common/text"
)

// TestStatusWritesCutLongConditionMessages: a status written through a manager's client with a
// condition message of 100 KiB (three times what the CRD accepts) is written, its message cut,
// as a merge patch (the WorkspaceDeployment's status writer) and as an update.
func TestStatusWritesCutLongConditionMessages(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "long-messages")
	o := NewOptions("bootstrap-messages")
	o.RestConfig = mgmt.Config
	o.MetricsBindAddress, o.HealthProbeBindAddress, o.LeaderElect = "0", "0", false
	o.LogWriter = io.Discard
	mgr, err := NewManager(o, mgmt.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	c := mgr.GetClient() // writes go to the API server; the cache is not needed
	ws := &workspacesv1.WorkspaceDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "long", Namespace: "long-messages"},
		Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: "c",
			ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "cd"}},
	}
	if err := mgmt.Client.Create(ctx, ws); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("cluster gpu-17 has 0 free GPUs; ", 100<<10/32)
	stored := func(what string) {
		t.Helper()
		got := &workspacesv1.WorkspaceDeployment{}
		if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(ws), got); err != nil {
			t.Fatal(err)
		}
		if len(got.Status.Conditions) != 1 {
			t.Fatalf("%s: conditions %v", what, got.Status.Conditions)
		}
		msg := got.Status.Conditions[0].Message
		if len(msg) > conditions.MaxMessageBytes || !strings.HasSuffix(msg, text.Ellipsis) || !strings.HasPrefix(long, strings.TrimSuffix(msg, text.Ellipsis)) {
			t.Fatalf("%s: stored message of %d bytes, want the start of the message cut to %d", what, len(msg), conditions.MaxMessageBytes)
		}
	}
	base := ws.DeepCopy()
	ws.Status.Phase = workspacesv1.PhasePending
	ws.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NoCluster",
		Message: long, LastTransitionTime: metav1.Now()}}
	if err := c.Status().Patch(ctx, ws, client.MergeFrom(base)); err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	stored("merge patch")
	ws.Status.Conditions[0].Message = long + "!"
	if err := c.SubResource("status").Update(ctx, ws); err != nil {
		t.Fatalf("update: %v", err)
	}
	stored("update")
}
