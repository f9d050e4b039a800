package suites

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// volumeIdentity is what must survive a stop: the claim and the volume bound to it, by UID.
type volumeIdentity struct {
	claimUID   types.UID
	volumeName string
	volumeUID  types.UID
}

// boundVolume waits until the workspace's claim <release><suffix> (-work for the example notebook
// chart) is bound and returns its identity.
func boundVolume(ctx context.Context, t *testing.T, child *childCluster, ws *workspacesv1.WorkspaceDeployment, suffix string) volumeIdentity {
	t.Helper()
	var id volumeIdentity
	key := types.NamespacedName{Namespace: "ws-" + ws.Name, Name: ws.Status.ReleaseName + suffix}
	eventually(ctx, t, "claim "+key.String()+" bound", workspaceTimeout, func(ctx context.Context) (bool, string) {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := child.Client().Get(ctx, key, pvc); err != nil {
			return false, err.Error()
		}
		if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
			return false, "claim " + string(pvc.Status.Phase)
		}
		pv := &corev1.PersistentVolume{}
		if err := child.Client().Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
			return false, err.Error()
		}
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID || pv.Status.Phase != corev1.VolumeBound {
			return false, fmt.Sprintf("volume %s %s, claimRef %v", pv.Name, pv.Status.Phase, pv.Spec.ClaimRef)
		}
		id = volumeIdentity{claimUID: pvc.UID, volumeName: pv.Name, volumeUID: pv.UID}
		return true, ""
	})
	return id
}

// waitReleaseReplicas waits until the release's Deployment asks for n replicas and exactly n of the
// workspace's pods are left (none while stopped).
func waitReleaseReplicas(ctx context.Context, t *testing.T, child *childCluster, ws *workspacesv1.WorkspaceDeployment, n int32) {
	t.Helper()
	key := types.NamespacedName{Namespace: "ws-" + ws.Name, Name: ws.Status.ReleaseName}
	eventually(ctx, t, fmt.Sprintf("Deployment %s at %d replicas", key, n), workspaceTimeout, func(ctx context.Context) (bool, string) {
		d := &appsv1.Deployment{}
		if err := child.Client().Get(ctx, key, d); err != nil {
			return false, err.Error()
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != n {
			return false, fmt.Sprintf("spec.replicas %v", d.Spec.Replicas)
		}
		pods, err := workspacePods(ctx, child, ws.Name)
		if err != nil {
			return false, err.Error()
		}
		if len(pods) != int(n) {
			return false, fmt.Sprintf("%d pods left", len(pods))
		}
		return true, ""
	})
}

// setStopped sets spec.stopped of a workspace.
func setStopped(ctx context.Context, t *testing.T, ns, name string, stopped bool) {
	t.Helper()
	ws := &workspacesv1.WorkspaceDeployment{}
	if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ws); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Spec.Stopped = stopped
	if err := mgmt().Patch(ctx, ws, patch); err != nil {
		t.Fatal(err)
	}
}

// TestStopAndStart stops a workspace that holds the only GPU of a cluster: its release is scaled to
// zero through the _exalsius contract, its claim and volume stay, and a waiting workspace gets the GPU.
// Started while the GPU is taken it waits; once the GPU is free it comes back with the same claim and
// volume. The local world's nodes are kwok's, so the data is checked at the claim and volume level
// (same UIDs, still bound), not by reading a file.
func TestStopAndStart(t *testing.T) {
	localOnly(t, "simulated GPU nodes and the simulator's Helm releases")
	var ns string
	var child *childCluster
	var vol volumeIdentity
	const cd = "stops"
	f := features.New("stop and start").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "stop")
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			child = createClusterDeployment(ctx, t, ns, cd, w.ClusterConfig{Nodes: []w.NodePool{gpuPool("l4", "NVIDIA", "L4", 1, 1)}})
			createClass(ctx, t, notebookClass("e2e-stop-"+ns, notebookTemplate, 1, workspacesv1.GPUVendorNVIDIA))
			return ctx
		}).
		Assess("a running workspace with a volume; another waits for its GPU", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			res := gpuOverride(1, "L4", nil)
			storage := resource.MustParse("1Gi")
			res.PerReplica.Storage = &storage
			mustCreate(ctx, t, workspace(ns, "holder", "e2e-stop-"+ns, cd, res))
			ws := waitRunning(ctx, t, ns, "holder")
			vol = boundVolume(ctx, t, child, ws, "-work")
			waitReleaseReplicas(ctx, t, child, ws, 1)
			mustCreate(ctx, t, workspace(ns, "waiter", "e2e-stop-"+ns, cd, gpuOverride(1, "L4", nil)))
			if got := waitPhase(ctx, t, ns, "waiter", workspaceTimeout, workspacesv1.PhaseWaiting, workspacesv1.PhaseRunning, workspacesv1.PhaseFailed); got.Status.Phase != workspacesv1.PhaseWaiting {
				t.Fatalf("waiter is %s, want Waiting (the only GPU is taken)", got.Status.Phase)
			}
			return ctx
		}).
		Assess("stopped: scaled to zero, the volume kept, the GPU goes to the waiter", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			setStopped(ctx, t, ns, "holder", true)
			ws := waitPhase(ctx, t, ns, "holder", workspaceTimeout, workspacesv1.PhaseStopped)
			waitReleaseReplicas(ctx, t, child, ws, 0)
			eventually(ctx, t, "holder Stopped with its GPU released", workspaceTimeout, func(ctx context.Context) (bool, string) {
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "holder"}, ws); err != nil {
					return false, err.Error()
				}
				c := condition(t, ws, workspacesv1.ReadyCondition)
				return c.Reason == workspacesv1.ReasonStopped && ws.Status.Admission == nil, c.Reason + ": " + c.Message
			})
			if got := boundVolume(ctx, t, child, ws, "-work"); got != vol {
				t.Errorf("volume after the stop %+v, want %+v", got, vol)
			}
			waitRunning(ctx, t, ns, "waiter")
			return ctx
		}).
		Assess("started while the GPU is taken: Waiting, still at zero", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			setStopped(ctx, t, ns, "holder", false)
			ws := waitPhase(ctx, t, ns, "holder", workspaceTimeout, workspacesv1.PhaseWaiting, workspacesv1.PhaseRunning, workspacesv1.PhaseFailed)
			if ws.Status.Phase != workspacesv1.PhaseWaiting {
				t.Fatalf("started holder is %s, want Waiting (the waiter holds the GPU)", ws.Status.Phase)
			}
			waitReleaseReplicas(ctx, t, child, ws, 0)
			return ctx
		}).
		Assess("the GPU freed: Running again with the same claim and volume", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			deleteAndWait(ctx, t, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waiter"}}, workspaceTimeout)
			ws := waitRunning(ctx, t, ns, "holder")
			waitReleaseReplicas(ctx, t, child, ws, 1)
			if got := boundVolume(ctx, t, child, ws, "-work"); got != vol {
				t.Errorf("volume after the start %+v, want %+v", got, vol)
			}
			pod := runningPods(ctx, t, child, "holder", 1)[0]
			mounted := false
			for _, v := range pod.Spec.Volumes {
				if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == ws.Status.ReleaseName+"-work" {
					mounted = true
				}
			}
			if !mounted {
				t.Errorf("pod %s does not mount the claim %s-work: %+v", pod.Name, ws.Status.ReleaseName, pod.Spec.Volumes)
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
