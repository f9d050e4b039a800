package workspace

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// TestClassNotFoundHeals: a workspace of a missing class fails, and runs once the class appears.
func TestClassNotFoundHeals(t *testing.T) {
	ns := newNamespace(t)
	cd := createCluster(t, ns, child.Kubeconfig)
	spec := classSpec(name("late"))
	className := name("late-class")
	key := createWorkspace(t, ns, className, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonClassNotFound)
	if c := condition(ws, workspacesv1.ClassResolvedCondition); c.Status != metav1.ConditionFalse {
		t.Errorf("ClassResolved %+v", c)
	}
	createTemplate(t, spec.ServiceTemplate.Name, "1.0.0", workspacesv1.DefaultServiceTemplateNamespace, ns)
	must(t, k8s.Create(ctxT(t), &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: className}, Spec: spec}))
	waitPhase(t, key, workspacesv1.PhaseDeploying, "")
}

// TestInvalidClassFails: a class whose template is invalid fails the workspace with ClassInvalid.
func TestInvalidClassFails(t *testing.T) {
	ns := newNamespace(t)
	cd := createCluster(t, ns, child.Kubeconfig)
	spec := classSpec(name("broken"))
	spec.ServiceTemplate.VersionConstraint = ">=9.0.0"
	createTemplate(t, spec.ServiceTemplate.Name, "1.0.0", workspacesv1.DefaultServiceTemplateNamespace, ns)
	className := name("broken-class")
	must(t, k8s.Create(ctxT(t), &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: className}, Spec: spec}))
	key := createWorkspace(t, ns, className, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonClassInvalid)
	if err := contains(ws.Status.Message, ">=9.0.0"); err != nil {
		t.Error(err)
	}
}

// TestMissingClusterStaysPendingAndHeals: no ClusterDeployment, then no kubeconfig Secret, then both.
func TestMissingClusterStaysPendingAndHeals(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("pending")), ns)
	cdName := name("cd-later")
	key := createWorkspace(t, ns, class, cdName)
	waitPhase(t, key, workspacesv1.PhasePending, workspacesv1.ReasonClusterDeploymentNotFound)

	cd := &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cdName}, Spec: k0rdentv1beta1.ClusterDeploymentSpec{Template: "t"}}
	must(t, k8s.Create(ctxT(t), cd))
	ws := waitPhase(t, key, workspacesv1.PhasePending, workspacesv1.ReasonClusterNotReady)
	if err := contains(ws.Status.Message, cdName+"-kubeconfig"); err != nil {
		t.Error(err)
	}
	must(t, mgmt.WriteKubeconfigSecret(ctxT(t), ns, cdName, child.Kubeconfig))
	waitPhase(t, key, workspacesv1.PhaseDeploying, "")
}

// TestTemplateMustBeInClusterNamespace: k0rdent looks templates up in the ClusterDeployment's
// namespace; until the template is there the workspace is Pending with a message saying so.
func TestTemplateMustBeInClusterNamespace(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("elsewhere"))) // template only in kcm-system
	c := &workspacesv1.WorkspaceClass{}
	must(t, k8s.Get(ctxT(t), client.ObjectKey{Name: class}, c))
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhasePending, workspacesv1.ReasonServiceTemplateNotInClusterNamespace)
	if err := contains(ws.Status.Message, "namespace "+ns); err != nil {
		t.Error(err)
	}
	createTemplate(t, c.Spec.ServiceTemplate.Name, "1.0.0", ns)
	waitPhase(t, key, workspacesv1.PhaseDeploying, "")
}

// TestTenancy: a ClusterDeployment in another namespace is usable only once that namespace allows the
// workspace's namespace.
func TestTenancy(t *testing.T) {
	wsNS := newNamespace(t)
	cdNS := newNamespace(t)
	class := createClass(t, classSpec(name("tenant")), cdNS)
	cd := createCluster(t, cdNS, child.Kubeconfig)
	key := createWorkspace(t, wsNS, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.ClusterDeploymentRef.Namespace = cdNS
	})
	ws := waitPhase(t, key, workspacesv1.PhasePending, workspacesv1.ReasonNamespaceNotAllowed)
	if err := contains(ws.Status.Message, workspacesv1.AllowWorkspacesFromAnnotation); err != nil {
		t.Error(err)
	}
	nsObj := &corev1.Namespace{}
	must(t, k8s.Get(ctxT(t), client.ObjectKey{Name: cdNS}, nsObj))
	patch := client.MergeFrom(nsObj.DeepCopy())
	nsObj.Annotations = map[string]string{workspacesv1.AllowWorkspacesFromAnnotation: "someone-else, " + wsNS}
	must(t, k8s.Patch(ctxT(t), nsObj, patch))
	ws = waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	ss := waitServiceSet(t, ws)
	if ss.Namespace != cdNS || ss.Labels[workspacesv1.WorkspaceNamespaceLabel] != wsNS {
		t.Errorf("ServiceSet %s/%s labels %v", ss.Namespace, ss.Name, ss.Labels)
	}
}

// TestClassAllowedNamespaces: a class whose spec.allowedNamespaces does not select the workspace's
// namespace keeps it Pending (ClassNotAllowed); labelling the namespace heals it at once; an installed
// workspace whose namespace stops matching keeps its phase and release, saying why in ClassResolved.
func TestClassAllowedNamespaces(t *testing.T) {
	ns := newNamespace(t)
	spec := classSpec(name("allowed"))
	spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	class := createClass(t, spec, ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhasePending, workspacesv1.ReasonClassNotAllowed)
	if err := contains(ws.Status.Message, "spec.allowedNamespaces"); err != nil {
		t.Error(err)
	}
	label := func(labels map[string]string) {
		nsObj := &corev1.Namespace{}
		must(t, k8s.Get(ctxT(t), client.ObjectKey{Name: ns}, nsObj))
		patch := client.MergeFrom(nsObj.DeepCopy())
		nsObj.Labels = labels
		must(t, k8s.Patch(ctxT(t), nsObj, patch))
	}
	label(map[string]string{"tier": "gold"})
	ws = waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	waitServiceSet(t, ws)
	label(map[string]string{"tier": "silver"})
	eventually(t, "ClassResolved False (ClassNotAllowed) on the installed workspace", func() error {
		got := &workspacesv1.WorkspaceDeployment{}
		if err := k8s.Get(ctxT(t), key, got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, workspacesv1.ClassResolvedCondition)
		if c == nil || c.Reason != workspacesv1.ReasonClassNotAllowed {
			return fmt.Errorf("ClassResolved %+v", c)
		}
		if got.Status.Phase != workspacesv1.PhaseDeploying {
			return fmt.Errorf("phase %s, want Deploying kept", got.Status.Phase)
		}
		return nil
	})
}

// TestInjectionPaths: the class's paths receive the resources, overwritten user values are named in
// ResourcesInjected=False, and a value that blocks a path fails the workspace with InvalidValues.
func TestInjectionPaths(t *testing.T) {
	ns := newNamespace(t)
	spec := classSpec(name("inject"))
	spec.DefaultResources = workspacesv1.DefaultResources{PerReplica: &workspacesv1.PerReplicaResources{CPU: qty("500m"), Memory: qty("1Gi")}}
	spec.ResourceInjection = &workspacesv1.ResourceInjection{
		Replicas: []string{"replicaCount"},
		CPU:      []string{"resources.requests.cpu"},
		Memory:   []string{`resources.limits["memory"]`},
	}
	class := createClass(t, spec, ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Values = jsonRaw(t, map[string]any{"replicaCount": 3, "resources": map[string]any{"requests": map[string]any{"cpu": "4"}}})
	})
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	c := condition(ws, workspacesv1.ResourcesInjectedCondition)
	if c.Status != metav1.ConditionFalse || c.Reason != workspacesv1.ReasonUserValuesOverwritten {
		t.Fatalf("ResourcesInjected %+v", c)
	}
	if err := contains(c.Message, "replicaCount, resources.requests.cpu"); err != nil {
		t.Error(err)
	}
	values := serviceSetValues(t, waitServiceSet(t, ws))
	res := values["resources"].(map[string]any)
	if values["replicaCount"] != float64(1) || res["requests"].(map[string]any)["cpu"] != "500m" || res["limits"].(map[string]any)["memory"] != "1Gi" {
		t.Errorf("values %v", values)
	}

	bad := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Values = jsonRaw(t, map[string]any{"resources": "none"})
	})
	ws = waitPhase(t, bad, workspacesv1.PhaseFailed, workspacesv1.ReasonInvalidValues)
	if err := contains(ws.Status.Message, "resources.requests.cpu"); err != nil {
		t.Error(err)
	}
}
