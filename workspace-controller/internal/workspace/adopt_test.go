package workspace

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// TestAdoptUpstreamServiceSet: a workspace the upstream operator installed (its ServiceSet
// wsd-<cd>-<name>, release wsd-<cd>-<name> in ws-<name>, its finalizer) is taken over in place: the
// same ServiceSet and release are kept and updated, no second ServiceSet is made, and the upstream
// finalizer is dropped so deletion is not blocked.
func TestAdoptUpstreamServiceSet(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("legacy")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	wsName := name("nb")
	legacy := "wsd-" + cd.Name + "-" + wsName
	old := &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: legacy,
			Labels: map[string]string{k0rdentv1beta1.StateManagementProviderAdapterLabel: k0rdentv1beta1.StateManagementProviderAdapterValue}},
		Spec: k0rdentv1beta1.ServiceSetSpec{
			Cluster:  cd.Name,
			Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: []k0rdentv1beta1.ServiceWithValues{{Name: legacy, Namespace: "ws-" + wsName, Template: "old-template", Values: "old: true\n"}},
		},
	}
	must(t, k8s.Create(ctxT(t), old))

	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Name = wsName
		ws.Finalizers = []string{workspacesv1.LegacyFinalizer}
	})
	waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	// The phase turns Deploying with the admission, one write before the ServiceSet step names the
	// ServiceSet on status: wait for the names, then they must be the adopted ones.
	var ws *workspacesv1.WorkspaceDeployment
	eventually(t, "ServiceSet and release named on status", func() error {
		ws = getWS(t, key)
		if ws.Status.ServiceSetName == "" || ws.Status.ReleaseName == "" {
			return fmt.Errorf("status names %q %q", ws.Status.ServiceSetName, ws.Status.ReleaseName)
		}
		return nil
	})
	if ws.Status.ServiceSetName != legacy || ws.Status.ReleaseName != legacy {
		t.Errorf("status names %q %q, want the adopted %q", ws.Status.ServiceSetName, ws.Status.ReleaseName, legacy)
	}
	eventually(t, "upstream finalizer dropped", func() error {
		cur := getWS(t, key)
		if controllerutil.ContainsFinalizer(cur, workspacesv1.LegacyFinalizer) || !controllerutil.ContainsFinalizer(cur, workspacesv1.WorkspaceFinalizer) {
			return fmt.Errorf("finalizers %v", cur.Finalizers)
		}
		return nil
	})
	sets := workspaceServiceSets(t, ws)
	if len(sets) != 1 || sets[0].Name != legacy {
		t.Fatalf("ServiceSets of the workspace %d (%v), want only the adopted %s", len(sets), sets, legacy)
	}
	svc := sets[0].Spec.Services[0]
	if svc.Name != legacy || svc.Namespace != "ws-"+wsName || svc.Template == "old-template" {
		t.Errorf("adopted service %+v: want the release kept under its name, with the class's template", svc)
	}
	got := &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), client.ObjectKeyFromObject(old), got))
	if got.UID != old.UID {
		t.Error("the upstream ServiceSet was replaced, not adopted")
	}
}

// TestDeleteDropsUpstreamFinalizer: a workspace deleted before it was ever adopted (here: suspended)
// has its upstream ServiceSet deleted and does not hang on the upstream finalizer.
func TestDeleteDropsUpstreamFinalizer(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("legacy-del")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	wsName := name("old")
	legacy := &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wsd-" + cd.Name + "-" + wsName},
		Spec: k0rdentv1beta1.ServiceSetSpec{
			Cluster:  cd.Name,
			Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: []k0rdentv1beta1.ServiceWithValues{{Name: "wsd-" + cd.Name + "-" + wsName, Namespace: "ws-" + wsName, Template: "t"}},
		},
	}
	must(t, k8s.Create(ctxT(t), legacy))
	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Name = wsName
		ws.Finalizers = []string{workspacesv1.LegacyFinalizer}
		ws.Spec.Suspend = true
	})
	eventually(t, "the workspace-controller's finalizer added", func() error {
		if cur := getWS(t, key); !controllerutil.ContainsFinalizer(cur, workspacesv1.WorkspaceFinalizer) {
			return fmt.Errorf("finalizers %v", cur.Finalizers)
		}
		return nil
	})
	must(t, k8s.Delete(ctxT(t), getWS(t, key)))
	eventually(t, "workspace gone", func() error {
		err := k8s.Get(ctxT(t), key, &workspacesv1.WorkspaceDeployment{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	if err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(legacy), &k0rdentv1beta1.ServiceSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("the upstream ServiceSet is still there (%v)", err)
	}
}

// TestDeleteNeverAdoptedAfterClusterGone: a workspace of the upstream operator that was never
// adopted (here: suspended) and whose ClusterDeployment is gone is deleted: KCM's finalizer on its
// upstream ServiceSet would never go, so the controller removes it, and the workspace and the
// ServiceSet are both gone.
func TestDeleteNeverAdoptedAfterClusterGone(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("legacy-gone")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	wsName := name("old")
	legacyName := "wsd-" + cd.Name + "-" + wsName
	legacy := &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: legacyName, Finalizers: []string{k0rdentv1beta1.ServiceSetFinalizer}},
		Spec: k0rdentv1beta1.ServiceSetSpec{
			Cluster:  cd.Name,
			Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: []k0rdentv1beta1.ServiceWithValues{{Name: legacyName, Namespace: "ws-" + wsName, Template: "t"}},
		},
	}
	must(t, k8s.Create(ctxT(t), legacy))
	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Name = wsName
		ws.Finalizers = []string{workspacesv1.LegacyFinalizer}
		ws.Spec.Suspend = true
	})
	eventually(t, "the workspace-controller's finalizer added", func() error {
		if cur := getWS(t, key); !controllerutil.ContainsFinalizer(cur, workspacesv1.WorkspaceFinalizer) {
			return fmt.Errorf("finalizers %v", cur.Finalizers)
		}
		return nil
	})
	must(t, k8s.Delete(ctxT(t), cd))
	waitGone(t, "ClusterDeployment", client.ObjectKeyFromObject(cd), &k0rdentv1beta1.ClusterDeployment{})

	must(t, k8s.Delete(ctxT(t), getWS(t, key)))
	waitGone(t, "upstream ServiceSet", client.ObjectKeyFromObject(legacy), &k0rdentv1beta1.ServiceSet{})
	waitGone(t, "workspace", key, &workspacesv1.WorkspaceDeployment{})
}

// TestUpstreamWorkspaceNotAdoptedKeepsItsNamespace: a workspace of the upstream operator whose
// ServiceSet cannot be adopted (here: there is none under upstream's name, as when upstream shortened
// it) finds ws-<name> on the child as upstream left it, without this project's labels. Upstream's
// finalizer is the evidence that the namespace is the workspace's: it stays until the workspace is
// installed, so the namespace is claimed (not a conflict), and the finalizer goes after that.
func TestUpstreamWorkspaceNotAdoptedKeepsItsNamespace(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("legacy-ns")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	wsName := name("old")
	upstreamNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: owned.LocalReleaseNamespace(wsName)}}
	must(t, child.Client.Create(ctxT(t), upstreamNS))
	t.Cleanup(func() { _ = child.Client.Delete(ctxT(t), upstreamNS) })

	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Name = wsName
		ws.Finalizers = []string{workspacesv1.LegacyFinalizer}
	})
	eventually(t, "installed under this project's names, upstream's finalizer dropped", func() error {
		ws := getWS(t, key)
		if ws.Status.Phase == workspacesv1.PhaseFailed {
			t.Fatalf("Failed: %s", ws.Status.Message)
		}
		if ws.Status.ServiceSetName != owned.ServiceSetName(ws) {
			return fmt.Errorf("phase %s, status.serviceSetName %q", ws.Status.Phase, ws.Status.ServiceSetName)
		}
		if controllerutil.ContainsFinalizer(ws, workspacesv1.LegacyFinalizer) || !controllerutil.ContainsFinalizer(ws, workspacesv1.WorkspaceFinalizer) {
			return fmt.Errorf("finalizers %v", ws.Finalizers)
		}
		return nil
	})
	got := &corev1.Namespace{}
	must(t, child.Client.Get(ctxT(t), client.ObjectKeyFromObject(upstreamNS), got))
	if got.UID != upstreamNS.UID || got.Labels[workspacesv1.WorkspaceLabel] != wsName {
		t.Errorf("ws-%s: uid %s (upstream's %s), labels %v: want upstream's namespace claimed", wsName, got.UID, upstreamNS.UID, got.Labels)
	}
}
