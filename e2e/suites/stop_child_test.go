package suites

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// fixedReplicasTemplate is the ServiceTemplate of examples/charts/fixed-replicas: a chart of the
// published catalog's shape, whose Deployment asks for one replica whatever `_exalsius` says and
// whose claim <release>-data is its own.
const fixedReplicasTemplate = "e2e-fixed-replicas-0-1-0"

// What the workspace-controller writes on the child to stop a release (docs/stop-start.md): the
// quota in ws-<name> that refuses every pod, and the annotation that wakes the workloads on a start.
const (
	stopQuotaName     = "workspace-stopped"
	startedAnnotation = "workspaces.exalsius.ai/started-at"
)

// stopQuota waits until the stop quota in ws-<name> is there (want) or gone (!want).
func stopQuota(ctx context.Context, t *testing.T, child *childCluster, wsName string, want bool) {
	t.Helper()
	key := types.NamespacedName{Namespace: "ws-" + wsName, Name: stopQuotaName}
	eventually(ctx, t, fmt.Sprintf("ResourceQuota %s there: %t", key, want), workspaceTimeout, func(ctx context.Context) (bool, string) {
		q := &corev1.ResourceQuota{}
		err := child.Client().Get(ctx, key, q)
		switch {
		case apierrors.IsNotFound(err):
			return !want, "absent"
		case err != nil:
			return false, err.Error()
		}
		pods, ok := q.Spec.Hard[corev1.ResourcePods]
		return want && ok && pods.IsZero(), fmt.Sprintf("present, hard %v", q.Spec.Hard)
	})
}

// noPods waits until no pod of the workspace's release is left on the child, while its Deployment
// still asks for one replica (the chart ignores the zero replicas of the stop).
func noPods(ctx context.Context, t *testing.T, child *childCluster, ws *workspacesv1.WorkspaceDeployment) {
	t.Helper()
	key := types.NamespacedName{Namespace: "ws-" + ws.Name, Name: ws.Status.ReleaseName}
	eventually(ctx, t, "no pod of "+key.String()+" left", workspaceTimeout, func(ctx context.Context) (bool, string) {
		pods, err := workspacePods(ctx, child, ws.Name)
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, p := range pods {
			names = append(names, p.Name+"="+string(p.Status.Phase))
		}
		return len(pods) == 0, "pods " + strings.Join(names, ", ")
	})
	d := &appsv1.Deployment{}
	if err := child.Client().Get(ctx, key, d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Fatalf("Deployment %s asks for %v replicas, want 1 (the chart fixes its replica count)", key, d.Spec.Replicas)
	}
}

// refusedByStopQuota waits for the child's report that the release's ReplicaSet tried to make its
// pod again and the stop quota refused it.
func refusedByStopQuota(ctx context.Context, t *testing.T, child *childCluster, wsName string) {
	t.Helper()
	eventually(ctx, t, "a pod of ws-"+wsName+" refused by "+stopQuotaName, workspaceTimeout, func(ctx context.Context) (bool, string) {
		var events corev1.EventList
		if err := child.Client().List(ctx, &events, client.InNamespace("ws-"+wsName)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range events.Items {
			if e.Reason == "FailedCreate" && e.InvolvedObject.Kind == "ReplicaSet" && strings.Contains(e.Message, stopQuotaName) {
				return true, ""
			}
			seen = append(seen, e.Reason)
		}
		return false, "events " + strings.Join(seen, ", ")
	})
}

// rolledOut waits until the release's Deployment has rolled out a template pinned to the admitted
// node (the selector the gate checked, with its kubernetes.io/hostname): one updated, ready replica and
// no other pod left.
func rolledOut(ctx context.Context, t *testing.T, child *childCluster, ws *workspacesv1.WorkspaceDeployment) {
	t.Helper()
	key := types.NamespacedName{Namespace: "ws-" + ws.Name, Name: ws.Status.ReleaseName}
	eventually(ctx, t, "Deployment "+key.String()+" rolled out", workspaceTimeout, func(ctx context.Context) (bool, string) {
		d := &appsv1.Deployment{}
		if err := child.Client().Get(ctx, key, d); err != nil {
			return false, err.Error()
		}
		st := d.Status
		pods, err := workspacePods(ctx, child, ws.Name)
		if err != nil {
			return false, err.Error()
		}
		pinned := d.Spec.Template.Spec.NodeSelector[corev1.LabelHostname] != ""
		return pinned && st.ObservedGeneration == d.Generation && st.Replicas == 1 && st.UpdatedReplicas == 1 && st.ReadyReplicas == 1 && len(pods) == 1,
			fmt.Sprintf("node selector %v, generation %d observed %d, replicas %d updated %d ready %d, %d pod(s)", d.Spec.Template.Spec.NodeSelector, d.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, len(pods))
	})
}

// waitStoppedAndReleased waits until a workspace is Stopped with Ready reason Stopped and its
// admission (its GPUs) released.
func waitStoppedAndReleased(ctx context.Context, t *testing.T, ns, name string) *workspacesv1.WorkspaceDeployment {
	t.Helper()
	ws := waitPhase(ctx, t, ns, name, workspaceTimeout, workspacesv1.PhaseStopped)
	eventually(ctx, t, name+" Stopped with its GPU released", workspaceTimeout, func(ctx context.Context) (bool, string) {
		if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ws); err != nil {
			return false, err.Error()
		}
		c := condition(t, ws, workspacesv1.ReadyCondition)
		return ws.Status.Phase == workspacesv1.PhaseStopped && c.Reason == workspacesv1.ReasonStopped && ws.Status.Admission == nil,
			fmt.Sprintf("%s, %s: %s", ws.Status.Phase, c.Reason, c.Message)
	})
	return ws
}

// releaseDeployedWhileStopped waits until k0rdent reports the stopped workspace's zero-replica
// release deployed. The upgrade of a stopped release does not wait for its workloads: the chart still
// asks for the pod the stop refuses, so a waiting upgrade would hold the release (and its deletion)
// for Helm's whole timeout and then, atomic, roll the stop's values back and fail.
func releaseDeployedWhileStopped(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	eventually(ctx, t, name+"'s release deployed while it is stopped", workspaceTimeout, func(ctx context.Context) (bool, string) {
		ws := &workspacesv1.WorkspaceDeployment{}
		if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ws); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.HelmReleaseReadyCondition)
		if c == nil {
			return false, "no HelmReleaseReady condition"
		}
		return ws.Status.Phase == workspacesv1.PhaseStopped && c.Status == metav1.ConditionTrue && c.Reason == workspacesv1.ReasonHelmReleaseDeployed,
			fmt.Sprintf("%s, HelmReleaseReady %s %s: %s", ws.Status.Phase, c.Status, c.Reason, c.Message)
	})
}

// TestStopOnTheChild stops a workspace whose chart, as the published catalog's do, fixes its
// Deployment at one replica and ignores the zero replicas of the stop. The stop is made on the
// child: the quota workspace-stopped refuses the pod its ReplicaSet keeps asking for, the running pod
// is deleted, and only then is the only GPU of the cluster given to the waiting workspace. Started
// again once that one is gone, the workspace runs with the same claim (same UID) mounted, pinned to
// the admitted node.
func TestStopOnTheChild(t *testing.T) {
	localOnly(t, "simulated GPU nodes and the simulator's Helm releases")
	var ns string
	var child *childCluster
	var vol volumeIdentity
	const cd = "stops-child"
	f := features.New("stop on the child").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "stopchild")
			serviceTemplate(ctx, t, fixedReplicasTemplate, "fixed-replicas", "0.1.0", "kcm-system", ns)
			child = createClusterDeployment(ctx, t, ns, cd, w.ClusterConfig{Nodes: []w.NodePool{gpuPool("l4", "NVIDIA", "L4", 1, 1)}})
			createClass(ctx, t, notebookClass("e2e-stopchild-"+ns, fixedReplicasTemplate, 1, workspacesv1.GPUVendorNVIDIA))
			return ctx
		}).
		Assess("a running workspace with its own claim; another waits for its GPU", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			mustCreate(ctx, t, workspace(ns, "holder", "e2e-stopchild-"+ns, cd, gpuOverride(1, "L4", nil)))
			ws := waitRunning(ctx, t, ns, "holder")
			vol = boundVolume(ctx, t, child, ws, "-data")
			runningPods(ctx, t, child, "holder", 1)
			mustCreate(ctx, t, workspace(ns, "waiter", "e2e-stopchild-"+ns, cd, gpuOverride(1, "L4", nil)))
			if got := waitPhase(ctx, t, ns, "waiter", workspaceTimeout, workspacesv1.PhaseWaiting, workspacesv1.PhaseRunning, workspacesv1.PhaseFailed); got.Status.Phase != workspacesv1.PhaseWaiting {
				t.Fatalf("waiter is %s, want Waiting (the only GPU is taken)", got.Status.Phase)
			}
			return ctx
		}).
		Assess("stopped: the quota refuses the pod the chart still asks for, the GPU goes to the waiter", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			setStopped(ctx, t, ns, "holder", true)
			ws := waitStoppedAndReleased(ctx, t, ns, "holder")
			stopQuota(ctx, t, child, "holder", true)
			noPods(ctx, t, child, ws)
			refusedByStopQuota(ctx, t, child, "holder")
			releaseDeployedWhileStopped(ctx, t, ns, "holder")
			if got := boundVolume(ctx, t, child, ws, "-data"); got != vol {
				t.Errorf("volume after the stop %+v, want %+v", got, vol)
			}
			waitRunning(ctx, t, ns, "waiter")
			runningPods(ctx, t, child, "waiter", 1)
			return ctx
		}).
		Assess("the waiter gone, the holder started: Running with the same claim", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			deleteAndWait(ctx, t, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waiter"}}, workspaceTimeout)
			setStopped(ctx, t, ns, "holder", false)
			ws := waitRunning(ctx, t, ns, "holder")
			stopQuota(ctx, t, child, "holder", false)
			rolledOut(ctx, t, child, ws)
			pod := runningPods(ctx, t, child, "holder", 1)[0]
			mounted := false
			for _, v := range pod.Spec.Volumes {
				if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == ws.Status.ReleaseName+"-data" {
					mounted = true
				}
			}
			if !mounted {
				t.Errorf("pod %s does not mount the claim %s-data: %+v", pod.Name, ws.Status.ReleaseName, pod.Spec.Volumes)
			}
			if pod.Spec.NodeSelector[corev1.LabelHostname] == "" {
				t.Errorf("pod %s is not pinned to the admitted node: node selector %v", pod.Name, pod.Spec.NodeSelector)
			}
			if got := boundVolume(ctx, t, child, ws, "-data"); got != vol {
				t.Errorf("volume after the start %+v, want %+v", got, vol)
			}
			var sets appsv1.ReplicaSetList
			if err := child.Client().List(ctx, &sets, client.InNamespace("ws-holder")); err != nil {
				t.Fatal(err)
			}
			woken := false
			for _, rs := range sets.Items {
				woken = woken || rs.Annotations[startedAnnotation] != ""
			}
			if !woken {
				t.Errorf("no ReplicaSet of ws-holder was woken on the start (annotation %s)", startedAnnotation)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			deleteWorkspacesAndCluster(ctx, t, ns, cd)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
