package workspace

import (
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// startChildren starts child API servers for one test and stops them when it ends.
func startChildren(t *testing.T, names ...string) []*testenv.Child {
	t.Helper()
	for i := range names {
		names[i] = name(names[i])
	}
	cs, err := testenv.StartChildren(names...)
	must(t, err)
	t.Cleanup(func() {
		for _, c := range cs {
			_ = c.Stop()
		}
	})
	return cs
}

// pinnableNode creates a Ready node with n GPUs of the resource, the model label and its hostname
// label, so that the gate can pin a workspace's replicas to it.
func pinnableNode(t *testing.T, c client.Client, res corev1.ResourceName, n int64, model string) string {
	t.Helper()
	nodeName := name("node")
	must(t, childtest.CreateNode(ctxT(t), c, childtest.Node{Name: nodeName, Allocatable: childtest.GPUs(res, n),
		Labels: map[string]string{gpu.LabelGPUModel: model, corev1.LabelHostname: nodeName}}))
	return nodeName
}

// labelled gives a ClusterDeployment labels.
func labelled(l map[string]string) func(*k0rdentv1beta1.ClusterDeployment) {
	return func(cd *k0rdentv1beta1.ClusterDeployment) { cd.Labels = l }
}

// placedBy makes a workspace name a cluster selector instead of a ClusterDeployment.
func placedBy(sel map[string]string, res *workspacesv1.ResourceOverrides) func(*workspacesv1.WorkspaceDeployment) {
	return func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{}
		ws.Spec.ClusterSelector = &metav1.LabelSelector{MatchLabels: sel}
		ws.Spec.Resources = res
	}
}

func gpuRes(count int32, vendor workspacesv1.GPUVendor, gpuType string) *workspacesv1.ResourceOverrides {
	return &workspacesv1.ResourceOverrides{PerReplica: &workspacesv1.PerReplicaResources{GPUCount: &count, GPUVendor: vendor, GPUType: gpuType}}
}

// waitPlaced waits until the workspace is placed and returns the placement.
func waitPlaced(t *testing.T, key types.NamespacedName) *workspacesv1.Placement {
	t.Helper()
	var p *workspacesv1.Placement
	eventually(t, key.String()+" placed", func() error {
		ws := getWS(t, key)
		if ws.Status.Placement == nil {
			return fmt.Errorf("not placed: phase %s, %q", ws.Status.Phase, ws.Status.Message)
		}
		p = ws.Status.Placement
		return nil
	})
	return p
}

// TestPlacementAcrossClusters places workspaces by a cluster selector over three clusters (three
// child API servers) with different GPU kinds and loads: the tightest fit of the NVIDIA clusters,
// the only AMD cluster, the only NVIDIA cluster with room for four; a request no node can ever
// hold fails naming the largest offering; one that fits nowhere now waits, unplaced, and is placed
// once GPUs free up; a placement never moves; a ClusterDeployment that does not match is never used.
func TestPlacementAcrossClusters(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("place")), ns)
	extra := startChildren(t, "amd", "busy")
	model := name("h100")
	amdModel := name("mi300")
	sel := map[string]string{"pool": name("gpu")}

	// roomy: 8 free NVIDIA GPUs (shared child); amd: 8 AMD GPUs; busy: 8 NVIDIA GPUs, 6 used.
	roomy := createCluster(t, ns, child.Kubeconfig, labelled(sel))
	amd := createCluster(t, ns, extra[0].Kubeconfig, labelled(sel))
	busy := createCluster(t, ns, extra[1].Kubeconfig, labelled(sel))
	other := createCluster(t, ns, child.Kubeconfig) // no labels: never a candidate
	pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 8, model)
	pinnableNode(t, extra[0].Client, gpu.ResourceAMD, 8, amdModel)
	busyNode := pinnableNode(t, extra[1].Client, gpu.ResourceNVIDIA, 8, model)
	load := gpuPod(t, extra[1].Client, "load", busyNode, gpu.ResourceNVIDIA, 6)

	// Two NVIDIA clusters fit one GPU: the tightest (busy, 2 free) wins.
	tight := createWorkspace(t, ns, class, "", placedBy(sel, gpuRes(1, workspacesv1.GPUVendorNVIDIA, model)))
	if p := waitPlaced(t, tight); p.Cluster != busy.Name || p.Reason != workspacesv1.PlacementTightestFit {
		t.Errorf("1 NVIDIA GPU placed on %s (%s), want %s (TightestFit); %s", p.Cluster, p.Reason, busy.Name, p.Message)
	}
	ws := waitPhase(t, tight, workspacesv1.PhaseDeploying, "")
	if ad := ws.Status.Admission; ad == nil || ad.Cluster != (types.NamespacedName{Namespace: ns, Name: busy.Name}).String() || ad.GPUModel != model {
		t.Errorf("admission %+v, want one on %s of model %s", ws.Status.Admission, busy.Name, model)
	}
	ss := waitServiceSet(t, ws)
	if ss.Spec.Cluster != busy.Name {
		t.Errorf("ServiceSet targets %s, want %s", ss.Spec.Cluster, busy.Name)
	}

	// Only the AMD cluster has AMD GPUs.
	amdWS := createWorkspace(t, ns, class, "", placedBy(sel, gpuRes(2, workspacesv1.GPUVendorAMD, amdModel)))
	if p := waitPlaced(t, amdWS); p.Cluster != amd.Name || p.Reason != workspacesv1.PlacementOnlyFit {
		t.Errorf("AMD placed on %s (%s), want %s (OnlyFit)", p.Cluster, p.Reason, amd.Name)
	}

	// busy has one NVIDIA GPU left: four go to roomy.
	four := createWorkspace(t, ns, class, "", placedBy(sel, gpuRes(4, workspacesv1.GPUVendorNVIDIA, model)))
	if p := waitPlaced(t, four); p.Cluster != roomy.Name || p.Reason != workspacesv1.PlacementOnlyFit {
		t.Errorf("4 NVIDIA GPUs placed on %s (%s), want %s (OnlyFit)", p.Cluster, p.Reason, roomy.Name)
	}

	// No node has 16 GPUs: Failed, naming the largest offering.
	never := createWorkspace(t, ns, class, "", placedBy(sel, gpuRes(16, workspacesv1.GPUVendorNVIDIA, model)))
	ws = waitPhase(t, never, workspacesv1.PhaseFailed, workspacesv1.ReasonNoClusterCanFit)
	if err := contains(ws.Status.Message, "the largest offering is 8 nvidia.com/gpu ("+model+")"); err != nil {
		t.Error(err)
	}
	if ws.Status.Placement != nil {
		t.Errorf("a workspace that fits nowhere is placed: %+v", ws.Status.Placement)
	}

	// Five fit nowhere now (roomy has 4 left, busy 1), but could: Waiting, unplaced.
	five := createWorkspace(t, ns, class, "", placedBy(sel, gpuRes(5, workspacesv1.GPUVendorNVIDIA, model)))
	ws = waitPhase(t, five, workspacesv1.PhaseWaiting, workspacesv1.ReasonNoClusterFitsNow)
	if ws.Status.Placement != nil {
		t.Errorf("a waiting workspace is placed: %+v", ws.Status.Placement)
	}
	// The load on busy goes: busy has 7 free, the waiter is placed there, woken by the child's event
	// (not by its own retry, a minute after it started waiting).
	freed := time.Now()
	must(t, childtest.SetPodPhase(ctxT(t), extra[1].Client, "load", load, corev1.PodSucceeded))
	if p := waitPlaced(t, five); p.Cluster != busy.Name {
		t.Errorf("5 NVIDIA GPUs placed on %s, want %s", p.Cluster, busy.Name)
	}
	if since := time.Since(freed); since > DefaultWaitingRetry/2 {
		t.Errorf("placed %s after the GPUs were freed: the child's event did not wake the waiter, its %s retry did", since.Round(time.Second), DefaultWaitingRetry)
	}
	waitPhase(t, five, workspacesv1.PhaseDeploying, "")

	// Placements are sticky and never chose the cluster outside the selector.
	if p := getWS(t, tight).Status.Placement; p.Cluster != busy.Name {
		t.Errorf("the first workspace moved to %s", p.Cluster)
	}
	var list workspacesv1.WorkspaceDeploymentList
	must(t, k8s.List(ctxT(t), &list, client.InNamespace(ns)))
	for i := range list.Items {
		if p := list.Items[i].Status.Placement; p != nil && p.Cluster == other.Name {
			t.Errorf("%s placed on %s, which the selector does not match", list.Items[i].Name, other.Name)
		}
	}
	// An unplaced workspace is deleted without a cluster.
	must(t, k8s.Delete(ctxT(t), getWS(t, never)))
	eventually(t, "unplaced workspace gone", func() error {
		if err := k8s.Get(ctxT(t), never, &workspacesv1.WorkspaceDeployment{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

// TestPlacementBurstNoOvershoot creates 50 workspaces at once that ask for one GPU each, placed by a
// selector over two nearly full clusters (3 and 2 GPUs free): exactly five are admitted, no cluster
// gives out more GPUs than it has free, and the other 45 wait unplaced.
func TestPlacementBurstNoOvershoot(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("burst")), ns)
	extra := startChildren(t, "full")
	model := name("a100")
	sel := map[string]string{"pool": name("burst")}
	a := createCluster(t, ns, child.Kubeconfig, labelled(sel))
	b := createCluster(t, ns, extra[0].Kubeconfig, labelled(sel))
	na := pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 8, model)
	gpuPod(t, child.Client, "full", na, gpu.ResourceNVIDIA, 5)
	nb := pinnableNode(t, extra[0].Client, gpu.ResourceNVIDIA, 8, model)
	gpuPod(t, extra[0].Client, "full", nb, gpu.ResourceNVIDIA, 6)
	free := map[string]int64{a.Name: 3, b.Name: 2}

	const n = 50
	keys := make([]types.NamespacedName, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			keys[i] = createWorkspace(t, ns, class, "", placedBy(sel, gpuRes(1, workspacesv1.GPUVendorNVIDIA, model)))
		})
	}
	wg.Wait()

	eventually(t, "every workspace admitted or waiting", func() error {
		var list workspacesv1.WorkspaceDeploymentList
		if err := k8s.List(ctxT(t), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		admitted, waiting := 0, 0
		for i := range list.Items {
			switch st := list.Items[i].Status; {
			case st.Phase == workspacesv1.PhaseWaiting && st.Placement == nil:
				waiting++
			case st.Admission != nil && st.Placement != nil:
				admitted++
			}
		}
		if admitted != 5 || waiting != n-5 {
			return fmt.Errorf("%d admitted, %d waiting of %d, want 5 admitted", admitted, waiting, n)
		}
		return nil
	})
	var list workspacesv1.WorkspaceDeploymentList
	must(t, k8s.List(ctxT(t), &list, client.InNamespace(ns)))
	held := map[string]int64{}
	for i := range list.Items {
		if ad := list.Items[i].Status.Admission; ad != nil {
			held[list.Items[i].Status.Placement.Cluster] += ad.GPUs
		}
	}
	for cd, f := range free {
		if held[cd] != f {
			t.Errorf("cluster %s gave out %d GPUs, has %d free", cd, held[cd], f)
		}
	}
}

// TestSharedPlacement: a tenant namespace places workspaces on a platform namespace's clusters, by
// colonyRef and by clusterSelector naming that namespace. Until the platform grants the tenant, the
// workspace waits (NamespaceNotAllowed, naming the field); the grant wakes it; it is placed, admitted
// and installed from the platform namespace into its tenant-qualified release namespace, and no
// Secret is made in the tenant's namespace.
func TestSharedPlacement(t *testing.T) {
	platform, tenant := newNamespace(t), newNamespace(t)
	class := createClass(t, classSpec(name("shared")), platform)
	model := name("s100")
	sel := map[string]string{"pool": name("shared")}
	cd := createCluster(t, platform, child.Kubeconfig, labelled(sel))
	pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 2, model)
	colonyName := name("fleet")
	createColony(t, platform, colonyName, cd.Name)

	byColony := createWorkspace(t, tenant, class, "", func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{}
		ws.Spec.ColonyRef = &workspacesv1.ColonyRef{Name: colonyName, Namespace: platform}
		ws.Spec.Resources = gpuResources(1, model)
	})
	ws := waitPhase(t, byColony, workspacesv1.PhasePending, workspacesv1.ReasonNamespaceNotAllowed)
	if err := contains(ws.Status.Message, "spec.colonyRef.namespace"); err != nil {
		t.Error(err)
	}

	nsObj := &corev1.Namespace{}
	must(t, k8s.Get(ctxT(t), client.ObjectKey{Name: platform}, nsObj))
	patch := client.MergeFrom(nsObj.DeepCopy())
	nsObj.Annotations = map[string]string{workspacesv1.AllowWorkspacesFromAnnotation: tenant}
	must(t, k8s.Patch(ctxT(t), nsObj, patch))
	if p := waitPlaced(t, byColony); p.Cluster != cd.Name || p.Namespace != platform {
		t.Errorf("placed on %s/%s, want %s/%s", p.Namespace, p.Cluster, platform, cd.Name)
	}
	ws = waitPhase(t, byColony, workspacesv1.PhaseDeploying, "")
	ss := waitServiceSet(t, ws)
	if ss.Namespace != platform || ss.Spec.Services[0].Namespace != owned.SharedReleaseNamespace(byColony.Name, tenant) {
		t.Errorf("ServiceSet %s/%s installs into %s, want the platform namespace and %s", ss.Namespace, ss.Name,
			ss.Spec.Services[0].Namespace, owned.SharedReleaseNamespace(byColony.Name, tenant))
	}

	bySelector := createWorkspace(t, tenant, class, "", func(ws *workspacesv1.WorkspaceDeployment) {
		placedBy(sel, gpuResources(1, model))(ws)
		ws.Spec.ClusterSelectorNamespace = platform
	})
	if p := waitPlaced(t, bySelector); p.Cluster != cd.Name || p.Namespace != platform {
		t.Errorf("placed on %s/%s, want %s/%s", p.Namespace, p.Cluster, platform, cd.Name)
	}
	waitPhase(t, bySelector, workspacesv1.PhaseDeploying, "")

	var secrets corev1.SecretList
	must(t, k8s.List(ctxT(t), &secrets, client.InNamespace(tenant)))
	for _, s := range secrets.Items {
		t.Errorf("Secret %s/%s made in the tenant namespace", tenant, s.Name)
	}
}
