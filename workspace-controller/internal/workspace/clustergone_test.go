package workspace

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
)

// holdWithKCMFinalizer puts KCM's finalizer on the workspace's ServiceSet, as k0rdent's adapter does,
// and returns its key.
func holdWithKCMFinalizer(t *testing.T, ws *workspacesv1.WorkspaceDeployment) types.NamespacedName {
	t.Helper()
	ss := waitServiceSet(t, ws)
	patch := client.MergeFrom(ss.DeepCopy())
	ss.Finalizers = append(ss.Finalizers, k0rdentv1beta1.ServiceSetFinalizer)
	must(t, k8s.Patch(ctxT(t), ss, patch))
	return client.ObjectKeyFromObject(ss)
}

// deleteCluster deletes a ClusterDeployment and its kubeconfig Secret and waits until it is gone.
func deleteCluster(t *testing.T, ns, cd string) {
	t.Helper()
	must(t, k8s.Delete(ctxT(t), &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cd}}))
	must(t, client.IgnoreNotFound(k8s.Delete(ctxT(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cd + "-kubeconfig"}})))
	waitGone(t, "ClusterDeployment", types.NamespacedName{Namespace: ns, Name: cd}, &k0rdentv1beta1.ClusterDeployment{})
}

// TestClusterGoneReleasesAdmission: a workspace whose ClusterDeployment is deleted is Pending
// (ClusterDeploymentNotFound) and keeps its admission, which the namespace's WorkspaceQuota keeps
// counting, for ClusterGoneGrace; then its ServiceSet is deleted (KCM's finalizer removed) and the
// admission released, and the workspace waiting for the quota is admitted.
func TestClusterGoneReleasesAdmission(t *testing.T) {
	ns, class, cd := gateFixture(t)
	other := createCluster(t, ns, child.Kubeconfig).Name
	model := name("h100")
	pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 2, model)
	createQuota(t, ns, workspacesv1.WorkspaceQuotaSpec{GPUs: []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: 1}}})

	gone := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ssKey := holdWithKCMFinalizer(t, waitPhase(t, gone, workspacesv1.PhaseDeploying, ""))
	waiter := createWorkspace(t, ns, class, other, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, waiter, workspacesv1.PhaseWaiting, workspacesv1.ReasonQuotaExceeded)

	deleteCluster(t, ns, cd)
	ws := waitPhase(t, gone, workspacesv1.PhasePending, workspacesv1.ReasonClusterDeploymentNotFound)
	if ws.Status.Admission == nil {
		// The grace starts with the pass that found the cluster gone: that pass keeps the admission.
		t.Errorf("the admission was released at once; message %q", ws.Status.Message)
	}
	if err := contains(ws.Status.Message, "if it is not back within"); err != nil {
		t.Error(err)
	}

	eventually(t, "admission released after the grace", func() error {
		ws = getWS(t, gone)
		// The message that says so lasts one pass (the next finds nothing held and only waits), so
		// the status fields are what is checked.
		if ws.Status.Admission != nil || ws.Status.ServiceSetName != "" {
			return fmt.Errorf("admission %+v, ServiceSet %q; message %q", ws.Status.Admission, ws.Status.ServiceSetName, ws.Status.Message)
		}
		return nil
	})
	if ws.Status.Phase != workspacesv1.PhasePending {
		t.Errorf("phase %s after the release, want Pending", ws.Status.Phase)
	}
	waitGone(t, "ServiceSet of the gone cluster", ssKey, &k0rdentv1beta1.ServiceSet{})
	waitPhase(t, waiter, workspacesv1.PhaseDeploying, "")
}

// TestClusterGonePlacesAgain: a workspace placed by its cluster selector whose ClusterDeployment is
// gone for longer than ClusterGoneGrace loses its placement and its ServiceSet there, and is placed
// on another cluster the selector matches, with a ServiceSet of that cluster.
func TestClusterGonePlacesAgain(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("replace")), ns)
	model := name("a100")
	sel := map[string]string{"pool": name("gpu")}
	first := createCluster(t, ns, child.Kubeconfig, labelled(sel))
	second := createCluster(t, ns, child.Kubeconfig, labelled(sel))
	pinnableNode(t, child.Client, gpu.ResourceNVIDIA, 2, model)

	key := createWorkspace(t, ns, class, "", placedBy(sel, gpuRes(1, workspacesv1.GPUVendorNVIDIA, model)))
	p := waitPlaced(t, key)
	ssKey := holdWithKCMFinalizer(t, waitPhase(t, key, workspacesv1.PhaseDeploying, ""))
	stays := second.Name
	if p.Cluster == second.Name {
		stays = first.Name
	}

	deleteCluster(t, ns, p.Cluster)
	waitGone(t, "ServiceSet of the gone cluster", ssKey, &k0rdentv1beta1.ServiceSet{})
	eventually(t, "placed again on "+stays, func() error {
		ws := getWS(t, key)
		if ws.Status.Placement == nil || ws.Status.Placement.Cluster != stays {
			return fmt.Errorf("placement %+v, phase %s, %q", ws.Status.Placement, ws.Status.Phase, ws.Status.Message)
		}
		if ad := ws.Status.Admission; ad == nil || ad.Cluster != (types.NamespacedName{Namespace: ns, Name: stays}).String() {
			return fmt.Errorf("admission %+v, want one on %s", ad, stays)
		}
		return nil
	})
	ss := waitServiceSet(t, getWS(t, key))
	if ss.Spec.Cluster != stays {
		t.Errorf("ServiceSet %s targets %s, want %s", ss.Name, ss.Spec.Cluster, stays)
	}
	if sets := workspaceServiceSets(t, getWS(t, key)); len(sets) != 1 {
		t.Errorf("%d ServiceSets of the workspace, want the new cluster's only", len(sets))
	}
}
