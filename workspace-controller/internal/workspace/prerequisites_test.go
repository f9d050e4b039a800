package workspace

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

func withPrereqs(spec workspacesv1.WorkspaceClassSpec, prereqs ...workspacesv1.Prerequisite) workspacesv1.WorkspaceClassSpec {
	spec.Prerequisites = prereqs
	return spec
}

// TestSharedPrerequisite: two classes needing one prerequisite share one ServiceSet on a cluster; the
// workspaces wait in InstallingPrerequisites until it is deployed; a third class that wants it in
// another namespace conflicts; once nobody needs it, it is removed after the grace period.
func TestSharedPrerequisite(t *testing.T) {
	ns := newNamespace(t)
	operator := name("gpu-operator")
	p := workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: operator}, Namespace: "gpu-operator", Values: jsonRaw(t, map[string]any{"driver": map[string]any{"enabled": false}})}
	classA := createClass(t, withPrereqs(classSpec(name("a")), p), ns)
	classB := createClass(t, withPrereqs(classSpec(name("b")), p), ns)
	cd := createCluster(t, ns, child.Kubeconfig)

	wa := createWorkspace(t, ns, classA, cd.Name)
	wb := createWorkspace(t, ns, classB, cd.Name)
	for _, k := range []types.NamespacedName{wa, wb} {
		ws := waitPhase(t, k, workspacesv1.PhaseInstallingPrerequisites, workspacesv1.ReasonPrerequisitesDeploying)
		if len(ws.Status.Prerequisites) != 1 || ws.Status.Prerequisites[0].ServiceSetName != owned.PrerequisiteServiceSetName(cd.Name, operator) {
			t.Errorf("prerequisites %+v", ws.Status.Prerequisites)
		}
	}
	var list k0rdentv1beta1.ServiceSetList
	must(t, k8s.List(ctxT(t), &list, client.InNamespace(ns), client.HasLabels{workspacesv1.PrerequisiteLabel}))
	if len(list.Items) != 1 {
		t.Fatalf("%d prerequisite ServiceSets, want 1 shared", len(list.Items))
	}
	ps := list.Items[0]
	svc := ps.Spec.Services[0]
	if ps.Spec.Cluster != cd.Name || ps.Labels["ksm.k0rdent.mirantis.com/adapter"] != "kcm-controller-manager" ||
		ps.Labels[workspacesv1.ClusterDeploymentLabel] != cd.Name || svc.Namespace != "gpu-operator" || svc.Template != operator ||
		len(ps.OwnerReferences) != 1 || ps.OwnerReferences[0].UID != cd.UID {
		t.Errorf("prerequisite ServiceSet %+v", ps)
	}
	if err := contains(svc.Values, "enabled: false"); err != nil {
		t.Error(err)
	}

	setServiceState(t, client.ObjectKeyFromObject(&ps), k0rdentv1beta1.ServiceStateDeployed, "")
	for _, k := range []types.NamespacedName{wa, wb} {
		ws := waitPhase(t, k, workspacesv1.PhaseDeploying, "")
		if c := condition(ws, workspacesv1.PrerequisitesMetCondition); c.Status != metav1.ConditionTrue {
			t.Errorf("PrerequisitesMet %+v", c)
		}
	}

	t.Run("namespace conflict", func(t *testing.T) {
		other := p
		other.Namespace = "elsewhere"
		classC := createClass(t, withPrereqs(classSpec(name("c")), other), ns)
		wc := createWorkspace(t, ns, classC, cd.Name)
		ws := waitPhase(t, wc, workspacesv1.PhaseFailed, workspacesv1.ReasonPrerequisiteNamespaceConflict)
		if err := contains(ws.Status.Message, "elsewhere"); err != nil {
			t.Error(err)
		}
		must(t, k8s.Delete(ctxT(t), ws))
	})

	t.Run("removed when unused after the grace period", func(t *testing.T) {
		must(t, k8s.Delete(ctxT(t), getWS(t, wa)))
		// Still needed by the second workspace.
		must(t, k8s.Get(ctxT(t), client.ObjectKeyFromObject(&ps), &k0rdentv1beta1.ServiceSet{}))
		must(t, k8s.Delete(ctxT(t), getWS(t, wb)))
		eventually(t, "unused prerequisite removed", func() error {
			got := &k0rdentv1beta1.ServiceSet{}
			err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(&ps), got)
			if err == nil {
				return fmt.Errorf("still there (unused since %q)", got.Annotations[owned.AnnotationUnusedSince])
			}
			return client.IgnoreNotFound(err)
		})
	})
}

// TestPrerequisiteProvidedByColony: a Deployed service of the same template on the ClusterDeployment
// satisfies the prerequisite, and no ServiceSet is made for it. A different version of the template
// does not count, and is not installed next to it in the same namespace.
func TestPrerequisiteProvidedByColony(t *testing.T) {
	ns := newNamespace(t)
	v1 := name("cert-manager-1-16-0")
	v2 := name("cert-manager-1-17-0")
	classOld := createClass(t, withPrereqs(classSpec(name("old")), workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: v1}, Namespace: "cert-manager"}), ns)
	classNew := createClass(t, withPrereqs(classSpec(name("new")), workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: v2}, Namespace: "cert-manager"}), ns)
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	cd := createCluster(t, ns, child.Kubeconfig, func(cd *k0rdentv1beta1.ClusterDeployment) {
		cd.Spec.ServiceSpec.Services = []k0rdentv1beta1.Service{{Name: "cert-manager", Namespace: "cert-manager", Template: v1}}
		cd.Status.Services = []k0rdentv1beta1.ServiceState{{
			Type: k0rdentv1beta1.ServiceTypeHelm, Name: "cert-manager", Namespace: "cert-manager", Template: v1,
			State: k0rdentv1beta1.ServiceStateDeployed, LastStateTransitionTime: &now,
		}}
	})

	old := createWorkspace(t, ns, classOld, cd.Name)
	ws := waitPhase(t, old, workspacesv1.PhaseDeploying, "")
	if ps := ws.Status.Prerequisites; len(ps) != 1 || !ps[0].ProvidedByCluster || ps[0].ServiceSetName != "" || ps[0].State != "Deployed" {
		t.Errorf("prerequisites %+v", ps)
	}
	if err := k8s.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: owned.PrerequisiteServiceSetName(cd.Name, v1)}, &k0rdentv1beta1.ServiceSet{}); client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("a prerequisite ServiceSet was made for a service the Colony provides (err %v)", err)
	}

	// Another version of the same chart is not installed next to the Colony's in its namespace: the
	// workspace that asks it is told why.
	nw := createWorkspace(t, ns, classNew, cd.Name)
	ws = waitPhase(t, nw, workspacesv1.PhaseFailed, workspacesv1.ReasonPrerequisiteNamespaceConflict)
	if err := contains(ws.Status.Message, "two versions of one chart"); err != nil {
		t.Error(err)
	}
	if err := k8s.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: owned.PrerequisiteServiceSetName(cd.Name, v2)}, &k0rdentv1beta1.ServiceSet{}); client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("a second version of the chart was installed in the same namespace (err %v)", err)
	}
}

// TestPrerequisiteColonyNamespaceConflict: the Colony provides the template in another namespace.
func TestPrerequisiteColonyNamespaceConflict(t *testing.T) {
	ns := newNamespace(t)
	tmpl := name("storage")
	class := createClass(t, withPrereqs(classSpec(name("c")), workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: tmpl}, Namespace: "storage"}), ns)
	cd := createCluster(t, ns, child.Kubeconfig, func(cd *k0rdentv1beta1.ClusterDeployment) {
		cd.Spec.ServiceSpec.Services = []k0rdentv1beta1.Service{{Name: "storage", Namespace: "kube-system", Template: tmpl}}
	})
	key := createWorkspace(t, ns, class, cd.Name)
	waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonPrerequisiteNamespaceConflict)
}

// TestPrerequisiteFailedAndTimeout: a failed prerequisite fails the workspace; one that never deploys
// fails it after prerequisiteDeployTimeout.
func TestPrerequisiteFailedAndTimeout(t *testing.T) {
	ns := newNamespace(t)
	cd := createCluster(t, ns, child.Kubeconfig)

	failing := name("bad-operator")
	class := createClass(t, withPrereqs(classSpec(name("f")), workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: failing}, Namespace: "bad"}), ns)
	key := createWorkspace(t, ns, class, cd.Name)
	waitPhase(t, key, workspacesv1.PhaseInstallingPrerequisites, "")
	setServiceState(t, types.NamespacedName{Namespace: ns, Name: owned.PrerequisiteServiceSetName(cd.Name, failing)}, k0rdentv1beta1.ServiceStateFailed, "image pull backoff")
	ws := waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonPrerequisiteFailed)
	if err := contains(ws.Status.Message, "image pull backoff"); err != nil {
		t.Error(err)
	}

	slow := name("slow-operator")
	spec := withPrereqs(classSpec(name("s")), workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: slow}, Namespace: "slow"})
	spec.PrerequisiteDeployTimeout = &metav1.Duration{Duration: 2 * time.Second}
	slowClass := createClass(t, spec, ns)
	key = createWorkspace(t, ns, slowClass, cd.Name)
	waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonPrerequisiteTimeout)
}
