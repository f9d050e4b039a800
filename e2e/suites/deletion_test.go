package suites

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// kcmCadence makes the simulator collect service states of a namespace on KCM's own interval (10 s),
// so that the controllers' rules for stale states are exercised. A real KCM has that cadence anyway.
func kcmCadence(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	if onRealCluster() {
		return
	}
	var n corev1.Namespace
	if err := mgmt().Get(ctx, types.NamespacedName{Name: ns}, &n); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[k0rdentsim.StatusIntervalAnnotation] = k0rdentsim.KCMStatusInterval.String()
	if err := mgmt().Patch(ctx, &n, patch); err != nil {
		t.Fatal(err)
	}
}

// cpuColonyEntry is a Colony entry of the fixtures' ClusterTemplate with one CPU node (locally) or
// E2E_CLUSTER_CONFIG (on a real cluster).
func cpuColonyEntry(t *testing.T, name string) infrav1.ColonyCluster {
	t.Helper()
	cfg, err := tgt.ClusterConfig(w.ClusterConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return infrav1.ColonyCluster{ClusterName: name, ClusterDeploymentSpec: *jsonOf(t, map[string]any{
		"template": clusterTemplateName, "credential": credentialName, "config": cfg,
	})}
}

// waitUnresolved waits until a workspace reports its cluster gone or going (Pending, and
// ClusterDeploymentResolved False with ClusterNotReady or ClusterDeploymentNotFound).
func waitUnresolved(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	eventually(ctx, t, "workspace "+name+" Pending without its cluster", clusterTimeout, func(ctx context.Context) (bool, string) {
		var ws workspacesv1.WorkspaceDeployment
		if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &ws); err != nil {
			return false, err.Error()
		}
		for _, c := range ws.Status.Conditions {
			if c.Type == workspacesv1.ClusterDeploymentResolvedCondition && c.Status == metav1.ConditionFalse &&
				(c.Reason == workspacesv1.ReasonClusterNotReady || c.Reason == workspacesv1.ReasonClusterDeploymentNotFound) {
				return ws.Status.Phase == workspacesv1.PhasePending, string(ws.Status.Phase)
			}
		}
		return false, fmt.Sprintf("phase %s conditions %v", ws.Status.Phase, ws.Status.Conditions)
	})
}

// TestDeletionUnderWorkspaces deletes a ClusterDeployment and a Colony while workspaces run on them,
// at KCM's status cadence: the deletions complete (the workspaces do not block them), the
// workspaces report their cluster gone, and deleting them afterwards completes too.
func TestDeletionUnderWorkspaces(t *testing.T) {
	var ns string
	f := features.New("deleting clusters under workspaces").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "del")
			kcmCadence(ctx, t, ns)
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			createClass(ctx, t, notebookClass("e2e-del-"+ns, notebookTemplate, 0, ""))
			return ctx
		}).
		Assess("a ClusterDeployment deleted under a Running workspace goes; the workspace waits, then deletes", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			createClusterDeployment(ctx, t, ns, "solo", w.ClusterConfig{})
			mustCreate(ctx, t, workspace(ns, "on-solo", "e2e-del-"+ns, "solo", nil))
			waitRunning(ctx, t, ns, "on-solo")
			deleteAndWait(ctx, t, &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "solo"}}, clusterTimeout)
			waitUnresolved(ctx, t, ns, "on-solo")
			if n, err := workspaceServiceSets(ctx, ns, "on-solo"); err != nil || n != 0 {
				t.Errorf("%d ServiceSets of the workspace without a cluster (err %v), want 0", n, err)
			}
			deleteAndWait(ctx, t, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "on-solo"}}, workspaceTimeout)
			return ctx
		}).
		Assess("a Colony deleted under a Running workspace goes with its cluster; the workspace waits, then deletes", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			mustCreate(ctx, t, &infrav1.Colony{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed"},
				Spec:       infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{cpuColonyEntry(t, "c")}},
			})
			waitColony(ctx, t, ns, "doomed", 1, 1)
			mustCreate(ctx, t, workspace(ns, "on-colony", "e2e-del-"+ns, "doomed-c", nil))
			waitRunning(ctx, t, ns, "on-colony")
			deleteAndWait(ctx, t, &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed"}}, clusterTimeout)
			err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "doomed-c"}, &k0rdentv1beta1.ClusterDeployment{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("the Colony's ClusterDeployment outlived it: %v", err)
			}
			waitUnresolved(ctx, t, ns, "on-colony")
			deleteAndWait(ctx, t, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "on-colony"}}, workspaceTimeout)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
