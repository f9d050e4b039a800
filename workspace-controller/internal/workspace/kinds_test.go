package workspace

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// Workspaces on k0rdent's other cluster kinds: an adopted cluster (no `<cd>-kubeconfig`; its
// SveltosCluster's Secret) and a regional cluster (its `<cd>-kubeconfig` on the regional cluster of
// its Credential's Region). Both go through the same lookup as any cluster (common/childcluster).

// installKinds installs the SveltosCluster and Region CRDs on the management server; it reports
// whether SveltosCluster is there (its CRD is shared test data a user's clone may lack).
func installKinds(t *testing.T) bool {
	t.Helper()
	have, note, err := childtest.InstallKindCRDs(ctxT(t), mgmt.Config, waitTimeout)
	must(t, err)
	if note != "" {
		t.Log(note)
	}
	return have
}

// runThenDelete drives a workspace on cd from Pending (no kubeconfig yet) through reveal (which makes
// the kubeconfig appear) to Running, then deletes it and checks that the release namespace on the
// child is deleted, which needs the child to be found again.
func runThenDelete(t *testing.T, ns, cd string, missing string, reveal func()) {
	t.Helper()
	class := createClass(t, classSpec(name("kind")), ns)
	key := createWorkspace(t, ns, class, cd)
	ws := waitPhase(t, key, workspacesv1.PhasePending, workspacesv1.ReasonClusterNotReady)
	if err := contains(ws.Status.Message, missing); err != nil {
		t.Error(err)
	}
	reveal()
	ws = waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	ss := waitServiceSet(t, ws)
	setServiceState(t, client.ObjectKeyFromObject(ss), k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
	// The release namespace exists on the child, as Sveltos would have made it.
	err := child.Client.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: owned.LocalReleaseNamespace(key.Name)}})
	must(t, client.IgnoreAlreadyExists(err))

	must(t, k8s.Delete(ctxT(t), getWS(t, key)))
	waitGone(t, "workspace", key, &workspacesv1.WorkspaceDeployment{})
	if err := childNamespaceDeleted(t, key.Name); err != nil {
		t.Fatalf("after the deletion: %v (the child of an adopted or regional cluster must be cleaned up like any other)", err)
	}
}

// TestWorkspaceOnAdoptedCluster: a ClusterDeployment with a SveltosCluster of its name and no
// `<cd>-kubeconfig` is Pending until the SveltosCluster's Secret exists (named in the message), then
// the workspace deploys, runs and is deleted with its release namespace on the child.
func TestWorkspaceOnAdoptedCluster(t *testing.T) {
	if !installKinds(t) {
		t.Skip("no SveltosCluster CRD in the shared test data: adopted clusters are not tested here")
	}
	ns := newNamespace(t)
	cd := createCluster(t, ns, nil)
	sc := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	sc.SetGroupVersionKind(schema.GroupVersionKind{Group: "lib.projectsveltos.io", Version: "v1beta1", Kind: "SveltosCluster"})
	sc.SetNamespace(ns)
	sc.SetName(cd.Name)
	must(t, k8s.Create(ctxT(t), sc))
	secret := cd.Name + "-sveltos-kubeconfig"
	runThenDelete(t, ns, cd.Name, secret, func() {
		// Sveltos' default Secret and its first key; the watch of `*-kubeconfig` Secrets maps it to cd.
		must(t, k8s.Create(ctxT(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret},
			Data: map[string][]byte{"kubeconfig": child.Kubeconfig}}))
	})
}

// TestWorkspaceOnRegionalCluster: a ClusterDeployment whose Credential names a Region has its
// `<cd>-kubeconfig` on the regional cluster (a separate API server). The workspace is Pending until
// that Secret exists there (no watch sees it: the pass is retried), then runs and is deleted with its
// release namespace on the child.
func TestWorkspaceOnRegionalCluster(t *testing.T) {
	installKinds(t)
	regional, err := testenv.StartChild("ws-regional")
	must(t, err)
	t.Cleanup(func() { _ = regional.Stop() })
	ns := newNamespace(t)
	for _, c := range []client.Client{k8s, regional.Client} {
		for _, n := range []string{ns, childcluster.DefaultSystemNamespace} {
			if err := c.Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	regionName := name("region")
	must(t, k8s.Create(ctxT(t), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: childcluster.DefaultSystemNamespace, Name: regionName + "-kubeconfig"},
		Data:       map[string][]byte{"value": regional.Kubeconfig}}))
	region := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"kubeConfig": map[string]any{"name": regionName + "-kubeconfig", "key": "value"}}}}
	region.SetGroupVersionKind(k0rdentv1beta1.GroupVersion.WithKind("Region"))
	region.SetName(regionName)
	must(t, k8s.Create(ctxT(t), region))
	cred := name("cred")
	must(t, k8s.Create(ctxT(t), &k0rdentv1beta1.Credential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cred},
		Spec: k0rdentv1beta1.CredentialSpec{Region: regionName, IdentityRef: &corev1.ObjectReference{Kind: "Secret", Name: "identity", Namespace: ns}}}))
	cd := createCluster(t, ns, nil, func(cd *k0rdentv1beta1.ClusterDeployment) { cd.Spec.Credential = cred })
	runThenDelete(t, ns, cd.Name, fmt.Sprintf("on the cluster of Region %s", regionName), func() {
		must(t, regional.Client.Create(ctxT(t), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: k0rdentv1beta1.KubeconfigSecretName(cd.Name)},
			Data:       map[string][]byte{k0rdentv1beta1.KubeconfigSecretKey: child.Kubeconfig}}))
	})
	// The management cluster never had `<cd>-kubeconfig`.
	err = k8s.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: k0rdentv1beta1.KubeconfigSecretName(cd.Name)}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("management cluster has %s: %v", k0rdentv1beta1.KubeconfigSecretName(cd.Name), err)
	}
}
