package workspace

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// TestPrerequisiteWithoutNamespace: a prerequisite that names no namespace, as the published catalog
// writes them, is installed in `default`; a copy the Colony already put in another namespace is
// accepted; a prerequisite that names its namespace conflicts with it.
func TestPrerequisiteWithoutNamespace(t *testing.T) {
	ns := newNamespace(t)
	own := name("infra-0-3-0")
	ownClass := createClass(t, withPrereqs(classSpec(name("own")), workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: own, VersionConstraint: ">=1.0.0"}}), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	ws := waitPhase(t, createWorkspace(t, ns, ownClass, cd.Name), workspacesv1.PhaseInstallingPrerequisites, workspacesv1.ReasonPrerequisitesDeploying)
	ss := &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: owned.PrerequisiteServiceSetName(cd.Name, own)}, ss))
	if ss.Spec.Services[0].Namespace != "default" || ws.Status.Prerequisites[0].Namespace != "default" {
		t.Errorf("release namespace %q (status %q), want default", ss.Spec.Services[0].Namespace, ws.Status.Prerequisites[0].Namespace)
	}

	provided := name("gateway-0-3-0")
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	cd2 := createCluster(t, ns, child.Kubeconfig, func(cd *k0rdentv1beta1.ClusterDeployment) {
		cd.Spec.ServiceSpec.Services = []k0rdentv1beta1.Service{{Name: "gateway", Namespace: "gateway-system", Template: provided}}
		cd.Status.Services = []k0rdentv1beta1.ServiceState{{
			Type: k0rdentv1beta1.ServiceTypeHelm, Name: "gateway", Namespace: "gateway-system", Template: provided,
			State: k0rdentv1beta1.ServiceStateDeployed, LastStateTransitionTime: &now,
		}}
	})
	anyNS := createClass(t, withPrereqs(classSpec(name("any")), workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: provided}}), ns)
	ws = waitPhase(t, createWorkspace(t, ns, anyNS, cd2.Name), workspacesv1.PhaseDeploying, "")
	if ps := ws.Status.Prerequisites; len(ps) != 1 || !ps[0].ProvidedByCluster || ps[0].Namespace != "gateway-system" || ps[0].State != "Deployed" {
		t.Errorf("prerequisites %+v, want the Colony's copy in gateway-system", ps)
	}
	pinned := createClass(t, withPrereqs(classSpec(name("pinned")), workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: provided}, Namespace: "default"}), ns)
	ws = waitPhase(t, createWorkspace(t, ns, pinned, cd2.Name), workspacesv1.PhaseFailed, workspacesv1.ReasonPrerequisiteNamespaceConflict)
	if err := contains(condition(ws, workspacesv1.PrerequisitesMetCondition).Message, "gateway-system"); err != nil {
		t.Error(err)
	}
}

// TestPrerequisiteVersionConstraint: a prerequisite whose template does not satisfy its
// versionConstraint keeps the class invalid, naming the field.
func TestPrerequisiteVersionConstraint(t *testing.T) {
	tmpl := name("infra-0-2-0")
	spec := withPrereqs(classSpec(name("vc")), workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: tmpl, VersionConstraint: ">=2.0.0"}})
	createTemplate(t, spec.ServiceTemplate.Name, "1.2.3", workspacesv1.DefaultServiceTemplateNamespace)
	createTemplate(t, tmpl, "1.0.0", workspacesv1.DefaultServiceTemplateNamespace)
	c := &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: name("class")}, Spec: spec}
	must(t, k8s.Create(ctxT(t), c))
	eventually(t, "class invalid for the prerequisite's version", func() error {
		got := &workspacesv1.WorkspaceClass{}
		must(t, k8s.Get(ctxT(t), types.NamespacedName{Name: c.Name}, got))
		if got.Status.Valid || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("valid=%t", got.Status.Valid)
		}
		return contains(got.Status.ValidationError, "spec.prerequisites[0].serviceTemplate.versionConstraint")
	})
}
