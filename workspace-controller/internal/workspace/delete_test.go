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
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// runningWorkspace makes a Running workspace whose ServiceSet carries KCM's finalizer, as k0rdent's
// adapter puts it there.
func runningWorkspace(t *testing.T, ns string) (types.NamespacedName, *k0rdentv1beta1.ClusterDeployment, types.NamespacedName) {
	t.Helper()
	class := createClass(t, classSpec(name("del")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	ss := waitServiceSet(t, ws)
	patch := client.MergeFrom(ss.DeepCopy())
	ss.Finalizers = append(ss.Finalizers, k0rdentv1beta1.ServiceSetFinalizer)
	must(t, k8s.Patch(ctxT(t), ss, patch))
	setServiceState(t, client.ObjectKeyFromObject(ss), k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
	// The release namespace exists on the child, as Sveltos would have made it.
	err := child.Client.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: owned.LocalReleaseNamespace(key.Name)}})
	must(t, client.IgnoreAlreadyExists(err))
	return key, cd, client.ObjectKeyFromObject(ss)
}

func waitGone(t *testing.T, what string, key types.NamespacedName, obj client.Object) {
	t.Helper()
	eventually(t, what+" gone", func() error {
		err := k8s.Get(ctxT(t), key, obj)
		if err == nil {
			return fmt.Errorf("%s still there (finalizers %v)", what, obj.GetFinalizers())
		}
		return client.IgnoreNotFound(err)
	})
}

// childNamespaceDeleted reports whether ws-<name> on the child is gone or terminating.
func childNamespaceDeleted(t *testing.T, wsName string) error {
	ns := &corev1.Namespace{}
	err := child.Client.Get(ctxT(t), client.ObjectKey{Name: owned.LocalReleaseNamespace(wsName)}, ns)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp.IsZero() {
		return fmt.Errorf("namespace %s on the child is not being deleted", ns.Name)
	}
	return nil
}

// TestDeletionUninstallsThenReleases: Deleting, the ServiceSet deleted and waited for (KCM holds it
// with its finalizer), the release namespace deleted on the child, then the finalizer removed.
func TestDeletionUninstallsThenReleases(t *testing.T) {
	ns := newNamespace(t)
	key, _, ssKey := runningWorkspace(t, ns)
	must(t, k8s.Delete(ctxT(t), getWS(t, key)))
	ws := waitPhase(t, key, workspacesv1.PhaseDeleting, workspacesv1.ReasonDeleting)
	eventually(t, "ServiceSet being deleted", func() error {
		ss := &k0rdentv1beta1.ServiceSet{}
		if err := k8s.Get(ctxT(t), ssKey, ss); err != nil {
			return err
		}
		if ss.DeletionTimestamp.IsZero() {
			return fmt.Errorf("not deleted")
		}
		return nil
	})
	// While KCM uninstalls, the workspace waits.
	if err := k8s.Get(ctxT(t), key, ws); err != nil {
		t.Fatalf("workspace gone before its ServiceSet: %v", err)
	}
	// KCM finishes: its finalizer goes.
	ss := &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), ssKey, ss))
	patch := client.MergeFrom(ss.DeepCopy())
	ss.Finalizers = nil
	must(t, k8s.Patch(ctxT(t), ss, patch))
	waitGone(t, "workspace", key, &workspacesv1.WorkspaceDeployment{})
	if err := childNamespaceDeleted(t, key.Name); err != nil {
		t.Error(err)
	}
}

// TestDeletionAfterClusterGone: the ClusterDeployment and its Secret are gone; KCM's finalizer on the
// ServiceSet would stick, so the controller removes it, skips the child, and the workspace goes.
func TestDeletionAfterClusterGone(t *testing.T) {
	ns := newNamespace(t)
	key, cd, ssKey := runningWorkspace(t, ns)
	must(t, k8s.Delete(ctxT(t), cd))
	must(t, k8s.Delete(ctxT(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cd.Name + "-kubeconfig"}}))
	waitGone(t, "ClusterDeployment", client.ObjectKeyFromObject(cd), &k0rdentv1beta1.ClusterDeployment{})

	must(t, k8s.Delete(ctxT(t), getWS(t, key)))
	waitGone(t, "ServiceSet", ssKey, &k0rdentv1beta1.ServiceSet{})
	waitGone(t, "workspace", key, &workspacesv1.WorkspaceDeployment{})
}

// TestSuspendThenDelete: a suspended workspace is left alone (spec edits are not rolled out), and
// deleting it still tears it down.
func TestSuspendThenDelete(t *testing.T) {
	ns := newNamespace(t)
	key, _, ssKey := runningWorkspace(t, ns)
	ws := getWS(t, key)
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Spec.Suspend = true
	must(t, k8s.Patch(ctxT(t), ws, patch))
	eventually(t, "suspension noted", func() error { return contains(getWS(t, key).Status.Message, "suspended") })

	ws = getWS(t, key)
	patch = client.MergeFrom(ws.DeepCopy())
	ws.Spec.Values = jsonRaw(t, map[string]any{"ignored": "while suspended"})
	must(t, k8s.Patch(ctxT(t), ws, patch))
	// The controller observed the new generation (suspended) and did not roll it out.
	gen := getWS(t, key).Generation
	eventually(t, "suspended pass over the new generation", func() error {
		got := getWS(t, key)
		if got.Status.ObservedGeneration != gen || got.Status.Phase != workspacesv1.PhaseRunning {
			return fmt.Errorf("observedGeneration %d of %d, phase %s", got.Status.ObservedGeneration, gen, got.Status.Phase)
		}
		return contains(got.Status.Message, "suspended")
	})
	ss := &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), ssKey, ss))
	if err := contains(ss.Spec.Services[0].Values, "ignored"); err == nil {
		t.Error("a suspended workspace's values were rolled out")
	}

	must(t, k8s.Delete(ctxT(t), getWS(t, key)))
	waitPhase(t, key, workspacesv1.PhaseDeleting, "")
	must(t, k8s.Get(ctxT(t), ssKey, ss))
	patch2 := client.MergeFrom(ss.DeepCopy())
	ss.Finalizers = nil
	must(t, k8s.Patch(ctxT(t), ss, patch2))
	waitGone(t, "workspace", key, &workspacesv1.WorkspaceDeployment{})
}
