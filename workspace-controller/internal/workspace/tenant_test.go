package workspace

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// tenantRules are what a tenant may do in its own namespace here: write WorkspaceDeployments (their
// metadata, annotations and finalizers included), nothing else.
var tenantRules = []rbacv1.PolicyRule{{
	APIGroups: []string{workspacesv1.GroupVersion.Group}, Resources: []string{"workspacedeployments"},
	Verbs: []string{"create", "get", "list", "watch", "update", "patch", "delete"},
}}

// tenantWorkspace creates, as an impersonated tenant of ns, a workspace named wsName on the
// ClusterDeployment cd (namespace cdNS), and returns the tenant's client.
func tenantWorkspace(t *testing.T, ns, class, cdNS, cd, wsName string, mutate func(*workspacesv1.WorkspaceDeployment)) (client.Client, types.NamespacedName) {
	t.Helper()
	tenant, err := mgmt.Tenant(ctxT(t), ns, "tenant-"+ns, tenantRules)
	must(t, err)
	ws := &workspacesv1.WorkspaceDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wsName},
		Spec: workspacesv1.WorkspaceDeploymentSpec{
			WorkspaceClassRef:    class,
			ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: cd, Namespace: cdNS},
		},
	}
	if mutate != nil {
		mutate(ws)
	}
	must(t, tenant.Create(ctxT(t), ws))
	return tenant, client.ObjectKeyFromObject(ws)
}

// deleteAndWaitGone deletes the workspace as the tenant and waits until it is gone.
func deleteAndWaitGone(t *testing.T, tenant client.Client, key types.NamespacedName) {
	t.Helper()
	must(t, tenant.Delete(ctxT(t), &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}))
	eventually(t, "workspace gone", func() error {
		if err := k8s.Get(ctxT(t), key, &workspacesv1.WorkspaceDeployment{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
}

// TestTenantCannotTakeOverAServiceSetByAnnotation: a tenant annotates its workspace with
// `serviceset-name: <cd>` (KCM's own ServiceSet of the cluster) and an invalid `release-name`. The
// controller ignores both (adoption only ever names the upstream ServiceSet of this workspace), makes
// its own ServiceSet, and deleting the workspace leaves KCM's ServiceSet, with its finalizer, alone.
func TestTenantCannotTakeOverAServiceSetByAnnotation(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("annot")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	kcm := &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cd.Name, Finalizers: []string{"k0rdent.mirantis.com/cleanup"}},
		Spec: k0rdentv1beta1.ServiceSetSpec{
			Cluster:  cd.Name,
			Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: []k0rdentv1beta1.ServiceWithValues{{Name: "ingress", Namespace: "kube-system", Template: "ingress-1-0-0"}},
		},
	}
	must(t, k8s.Create(ctxT(t), kcm))
	t.Cleanup(func() {
		cur := &k0rdentv1beta1.ServiceSet{}
		if k8s.Get(ctxT(t), client.ObjectKeyFromObject(kcm), cur) == nil {
			cur.Finalizers = nil
			_ = k8s.Update(ctxT(t), cur)
			_ = k8s.Delete(ctxT(t), cur)
		}
	})
	tenant, key := tenantWorkspace(t, ns, class, "", cd.Name, name("evil"), func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Annotations = map[string]string{workspacesv1.ServiceSetNameAnnotation: cd.Name, workspacesv1.ReleaseNameAnnotation: "Not_A/Release"}
	})
	var ws *workspacesv1.WorkspaceDeployment
	eventually(t, "the workspace's own ServiceSet named on status", func() error {
		ws = getWS(t, key)
		if ws.Status.ServiceSetName == "" {
			return fmt.Errorf("phase %s, no ServiceSet yet", ws.Status.Phase)
		}
		return nil
	})
	if ws.Status.ServiceSetName == cd.Name || ws.Status.ReleaseName == "Not_A/Release" {
		t.Fatalf("the annotations steered the controller: ServiceSet %q, release %q", ws.Status.ServiceSetName, ws.Status.ReleaseName)
	}
	got := &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), client.ObjectKeyFromObject(kcm), got))
	if got.Generation != 1 || got.Labels[workspacesv1.WorkspaceLabel] != "" || got.Spec.Services[0].Name != "ingress" {
		t.Fatalf("KCM's ServiceSet was rewritten: generation %d, labels %v, services %+v", got.Generation, got.Labels, got.Spec.Services)
	}

	deleteAndWaitGone(t, tenant, key)
	must(t, k8s.Get(ctxT(t), client.ObjectKeyFromObject(kcm), got))
	if !got.DeletionTimestamp.IsZero() || len(got.Finalizers) != 1 {
		t.Fatalf("deleting the workspace deleted KCM's ServiceSet or stripped its finalizers: %v %v", got.DeletionTimestamp, got.Finalizers)
	}
}

// TestTenantDeletionOutsideItsGrantRemovesNothingUnlabelled: with the webhook off, a tenant aims a
// workspace at a ClusterDeployment in a namespace that does not allow it, names it like another
// team's upstream workspace and gives it the upstream finalizer. Deleting it must not delete that
// team's upstream ServiceSet (it carries none of our labels).
func TestTenantDeletionOutsideItsGrantRemovesNothingUnlabelled(t *testing.T) {
	other := newNamespace(t)
	cd := createCluster(t, other, child.Kubeconfig)
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("grant")), ns)
	wsName := name("theirs")
	legacy := &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "wsd-" + cd.Name + "-" + wsName},
		Spec: k0rdentv1beta1.ServiceSetSpec{
			Cluster:  cd.Name,
			Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: []k0rdentv1beta1.ServiceWithValues{{Name: "wsd-" + cd.Name + "-" + wsName, Namespace: "ws-" + wsName, Template: "t"}},
		},
	}
	must(t, k8s.Create(ctxT(t), legacy))
	tenant, key := tenantWorkspace(t, ns, class, other, cd.Name, wsName, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Finalizers = []string{workspacesv1.LegacyFinalizer}
	})
	waitPhase(t, key, workspacesv1.PhasePending, workspacesv1.ReasonNamespaceNotAllowed)
	eventually(t, "the workspace-controller's finalizer added", func() error {
		for _, f := range getWS(t, key).Finalizers {
			if f == workspacesv1.WorkspaceFinalizer {
				return nil
			}
		}
		return fmt.Errorf("no finalizer %s yet", workspacesv1.WorkspaceFinalizer)
	})
	deleteAndWaitGone(t, tenant, key)
	got := &k0rdentv1beta1.ServiceSet{}
	if err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(legacy), got); err != nil || !got.DeletionTimestamp.IsZero() {
		t.Fatalf("the other team's upstream ServiceSet was deleted (err %v)", err)
	}
}

// TestTenantCannotAdoptAnUnlabelledReleaseNamespace: ws-<name> exists on the child without a
// workspace's labels (a platform team's namespace). A tenant's new workspace of that name neither
// adopts it nor, once deleted, deletes it.
func TestTenantCannotAdoptAnUnlabelledReleaseNamespace(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("adopt")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	wsName := name("platform")
	theirs := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: owned.LocalReleaseNamespace(wsName), Labels: map[string]string{"team": "platform"}}}
	must(t, child.Client.Create(ctxT(t), theirs))
	t.Cleanup(func() { _ = child.Client.Delete(ctxT(t), theirs) })

	tenant, key := tenantWorkspace(t, ns, class, "", cd.Name, wsName, nil)
	ws := waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonReleaseNamespaceConflict)
	if c := condition(ws, workspacesv1.ReleaseNamespaceReadyCondition); !strings.Contains(c.Message, "without the labels of a workspace") {
		t.Errorf("ReleaseNamespaceReady: %q, want it to say the namespace is not adopted", c.Message)
	}
	got := &corev1.Namespace{}
	must(t, child.Client.Get(ctxT(t), client.ObjectKeyFromObject(theirs), got))
	if got.Labels[workspacesv1.WorkspaceLabel] != "" {
		t.Fatalf("the namespace was adopted: labels %v", got.Labels)
	}
	deleteAndWaitGone(t, tenant, key)
	must(t, child.Client.Get(ctxT(t), client.ObjectKeyFromObject(theirs), got))
	if !got.DeletionTimestamp.IsZero() {
		t.Fatal("deleting the workspace deleted the platform team's namespace")
	}
}

func TestAdoptionAnnotationsHonouredOnlyForTheUpstreamName(t *testing.T) {
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "nb"},
		Spec: workspacesv1.WorkspaceDeploymentSpec{ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "cd"}}}
	def, defRelease := owned.ServiceSetName(ws), owned.ReleaseName(ws)
	for _, tc := range []struct {
		ss, release         string
		wantSS, wantRelease string
	}{
		{"cd", "x", def, defRelease},                                                      // KCM's own ServiceSet
		{"cd-ws-other", "x", def, defRelease},                                             // another workspace's
		{owned.LegacyName(ws), "wsd-cd-nb", owned.LegacyName(ws), "wsd-cd-nb"},            // the upstream one
		{owned.LegacyName(ws), "Not_Valid", owned.LegacyName(ws), defRelease},             // invalid release name
		{owned.LegacyName(ws), strings.Repeat("a", 54), owned.LegacyName(ws), defRelease}, // too long for Helm
		{"", "wsd-cd-nb", def, defRelease},                                                // release without adoption
	} {
		ws.Annotations = map[string]string{workspacesv1.ServiceSetNameAnnotation: tc.ss, workspacesv1.ReleaseNameAnnotation: tc.release}
		if got, rel := owned.ServiceSetName(ws), owned.ReleaseName(ws); got != tc.wantSS || rel != tc.wantRelease {
			t.Errorf("annotations %q/%q: ServiceSet %q release %q, want %q %q", tc.ss, tc.release, got, rel, tc.wantSS, tc.wantRelease)
		}
	}
}

func TestOwnValuesSecretNeedsNameAndNamespace(t *testing.T) {
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "nb"}}
	sec := func(name, namespace string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			owned.LabelValuesSecret: "true", workspacesv1.WorkspaceLabel: name, workspacesv1.WorkspaceNamespaceLabel: namespace}}}
	}
	if !owned.OwnValuesSecret(sec("nb", "team-a"), ws) {
		t.Error("the workspace's own values Secret is not recognised")
	}
	if owned.OwnValuesSecret(sec("nb", "team-b"), ws) || owned.OwnValuesSecret(sec("nb", ""), ws) {
		t.Error("a values Secret of another namespace's workspace of the same name is taken as this one's")
	}
}

// TestSetConditionCutsTheMessage: a condition message is cut where the pass sets it, as the status
// write cuts it, so that the pass's status equals what is stored and costs no write of its own.
func TestSetConditionCutsTheMessage(t *testing.T) {
	s := &scope{ws: &workspacesv1.WorkspaceDeployment{}}
	s.setCondition(workspacesv1.ReadyCondition, metav1.ConditionFalse, "Long", strings.Repeat("x", 100<<10))
	if got := len(s.ws.Status.Conditions[0].Message); got > conditions.MaxMessageBytes {
		t.Fatalf("message of %d bytes kept, want at most %d", got, conditions.MaxMessageBytes)
	}
}
