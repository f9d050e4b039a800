package workspace

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// noInstallLeft fails unless the workspace's ServiceSets are gone or being deleted and ws-<name> on
// the child is gone or being deleted.
func noInstallLeft(ctx context.Context, ns, name string) error {
	var sets k0rdentv1beta1.ServiceSetList
	if err := k8s.List(ctx, &sets, client.InNamespace(ns), client.MatchingLabels{workspacesv1.WorkspaceLabel: name}); err != nil {
		return err
	}
	for _, ss := range sets.Items {
		if ss.DeletionTimestamp.IsZero() {
			return fmt.Errorf("ServiceSet %s of workspace %s is left", ss.Name, name)
		}
	}
	var n corev1.Namespace
	err := child.Client.Get(ctx, client.ObjectKey{Name: owned.LocalReleaseNamespace(name)}, &n)
	if err == nil && n.DeletionTimestamp.IsZero() {
		return fmt.Errorf("namespace %s on the child is left", n.Name)
	}
	return client.IgnoreNotFound(err)
}

// TestOrphanedValuesSecretIsCollected: a values Secret labelled with a workspace that does not exist,
// and owned by no ServiceSet (left by a failed ServiceSet create whose workspace vanished), is removed
// when the controller hears of it; the values Secret of a workspace that exists is left alone.
func TestOrphanedValuesSecretIsCollected(t *testing.T) {
	ctx := ctxT(t)
	ns := newNamespace(t)
	cd := createCluster(t, ns, child.Kubeconfig)
	live := createWorkspace(t, ns, name("no-class"), cd.Name)
	ghost := types.NamespacedName{Namespace: ns, Name: name("ghost")}
	secretOf := func(key types.NamespacedName) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cd.Name + "-ws-" + key.Name + "-values",
			Labels: owned.ValuesSecretLabels(key)}, StringData: map[string]string{owned.ValuesSecretKey: "password: orphan-pw-77\n"}}
	}
	kept := secretOf(live)
	orphan := secretOf(ghost)
	must(t, k8s.Create(ctx, kept))
	must(t, k8s.Create(ctx, orphan))
	waitGone(t, "orphaned values Secret", client.ObjectKeyFromObject(orphan), &corev1.Secret{})
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(kept), &corev1.Secret{}); err != nil {
		t.Errorf("the values Secret of a workspace that exists: %v", err)
	}
}

// TestOrphanedServiceSetIsCollected: a ServiceSet (and ws-<name> on the child) labelled with a
// workspace that does not exist is removed when the controller hears of it, as it would be after a
// workspace vanished while a pass installed it.
func TestOrphanedServiceSetIsCollected(t *testing.T) {
	ctx := ctxT(t)
	ns := newNamespace(t)
	cd := createCluster(t, ns, child.Kubeconfig)
	ghost := name("ghost")
	must(t, child.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: owned.LocalReleaseNamespace(ghost), Labels: map[string]string{
		workspacesv1.WorkspaceLabel: ghost, workspacesv1.WorkspaceNamespaceLabel: ns, workspacesv1.WorkspaceUIDLabel: "0000-gone"}}}))
	ss := &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cd.Name + "-ws-" + ghost, Labels: map[string]string{
			workspacesv1.WorkspaceLabel: ghost, workspacesv1.WorkspaceNamespaceLabel: ns, workspacesv1.ClusterDeploymentLabel: cd.Name}},
		Spec: k0rdentv1beta1.ServiceSetSpec{
			Cluster:  cd.Name,
			Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: []k0rdentv1beta1.ServiceWithValues{{Name: ghost, Namespace: owned.LocalReleaseNamespace(ghost), Template: "t-1-0-0"}},
		},
	}
	must(t, k8s.Create(ctx, ss))
	// The create of a workspace's ServiceSet made a moment ago wakes nothing; an update (KCM's status)
	// does. It is touched until the controller has seen it, in case its watch was not running yet.
	touched := 0
	eventually(t, "the orphaned ServiceSet and release namespace removed", func() error {
		err := noInstallLeft(ctx, ns, ghost)
		if err != nil && k8s.Get(ctx, client.ObjectKeyFromObject(ss), ss) == nil && ss.DeletionTimestamp.IsZero() {
			touched++
			ss.Annotations = map[string]string{"test.exalsius.ai/touched": fmt.Sprint(touched)}
			_ = k8s.Update(ctx, ss) // a conflict is touched again on the next poll
		}
		return err
	})
}

// TestDeleteRightAfterCreateLeavesNothing deletes workspaces a moment after creating them, many at
// once. The API server deletes an object at once when the DELETE read it without a finalizer,
// even if the controller added one in between; the pass that added it then installed the workspace,
// and its ServiceSet and release namespace were left behind (found by `make chaos`, round 8 of seed
// 1796171473468668299). The timing is not forced here, so a pass proves little, but before the fix
// this test left one to three orphans of 120 in every run.
func TestDeleteRightAfterCreateLeavesNothing(t *testing.T) {
	ctx := ctxT(t)
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("race")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	var mu sync.Mutex
	var names []string
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name("race")},
					Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: class,
						ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: cd.Name, Namespace: ns}}}
				if err := k8s.Create(ctx, ws); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
				if err := client.IgnoreNotFound(k8s.Delete(ctx, ws)); err != nil {
					t.Error(err)
				}
				mu.Lock()
				names = append(names, ws.Name)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, n := range names {
		eventually(t, "workspace "+n+" gone and nothing of it left", func() error {
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, &workspacesv1.WorkspaceDeployment{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("workspace %s still there (%v)", n, err)
			}
			return noInstallLeft(ctx, ns, n)
		})
	}
}

// TestMadeNamespaceOfAVanishedWorkspaceIsCollected: a pass made ws-<name> and ended in an error
// before any ServiceSet or status named it (the management API server restarting; found by
// make test-chaos-short, seed 1796129239489346714, round 2), and the workspace is gone. The reconcile
// of the gone workspace removes the namespace the pass remembered; without that memory nothing on the
// management cluster names it.
func TestMadeNamespaceOfAVanishedWorkspaceIsCollected(t *testing.T) {
	ctx := ctxT(t)
	ns := newNamespace(t)
	cd := createCluster(t, ns, child.Kubeconfig)
	ghost := name("made")
	key := types.NamespacedName{Namespace: ns, Name: ghost}
	must(t, child.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: owned.LocalReleaseNamespace(ghost), Labels: map[string]string{
		workspacesv1.WorkspaceLabel: ghost, workspacesv1.WorkspaceNamespaceLabel: ns, workspacesv1.WorkspaceUIDLabel: "0000-gone"}}}))
	cache, err := childcluster.New(childcluster.Options{Reader: k8s})
	must(t, err)
	t.Cleanup(cache.Stop)
	r := &Reconciler{Client: k8s, APIReader: k8s, Children: CacheChildren{Cache: cache}, Options: DefaultOptions()}
	released := func() bool {
		got := &corev1.Namespace{}
		err := child.Client.Get(ctx, types.NamespacedName{Name: owned.LocalReleaseNamespace(ghost)}, got)
		return apierrors.IsNotFound(err) || (err == nil && !got.DeletionTimestamp.IsZero())
	}

	// Nothing remembered: nothing names the namespace, and it stays.
	_, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
	must(t, err)
	if released() {
		t.Fatal("a namespace nothing remembered was deleted")
	}
	// Remembered by the failed pass: the reconcile of the gone workspace removes it.
	r.madeNamespaces.remember(key, client.ObjectKeyFromObject(cd))
	_, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
	must(t, err)
	if !released() {
		t.Fatal("the namespace made by the failed pass is still there")
	}
	if _, ok := r.madeNamespaces.lookup(key); ok {
		t.Fatal("the memory was not cleared")
	}
}
