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
)

// runningWith makes a Running workspace on a new class; mutate adjusts it first.
func runningWith(t *testing.T, mutate func(*workspacesv1.WorkspaceDeployment)) (types.NamespacedName, string) {
	t.Helper()
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("transient")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	var mutations []func(*workspacesv1.WorkspaceDeployment)
	if mutate != nil {
		mutations = append(mutations, mutate)
	}
	key := createWorkspace(t, ns, class, cd.Name, mutations...)
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	setServiceState(t, client.ObjectKeyFromObject(waitServiceSet(t, ws)), k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
	return key, class
}

// stillRunningWith waits until the Running workspace's condType is False with reason, and checks
// that it stayed Running and Ready.
func stillRunningWith(t *testing.T, key types.NamespacedName, condType, reason string) {
	t.Helper()
	eventually(t, condType+" False/"+reason+" on a Running workspace", func() error {
		ws := getWS(t, key)
		c := condition(ws, condType)
		if c.Status != metav1.ConditionFalse || c.Reason != reason {
			return fmt.Errorf("%s %s/%s (phase %s)", condType, c.Status, c.Reason, ws.Status.Phase)
		}
		if ws.Status.Phase != workspacesv1.PhaseRunning || condition(ws, workspacesv1.ReadyCondition).Status != metav1.ConditionTrue {
			return fmt.Errorf("phase %s, Ready %s: transient trouble took it out of Running", ws.Status.Phase, condition(ws, workspacesv1.ReadyCondition).Status)
		}
		return nil
	})
}

// TestClassBrieflyMissingKeepsRunning: a class deleted past its protection and made again (a GitOps
// tool replacing it) is a condition on a Running workspace, not Failed; it heals when the class is back.
func TestClassBrieflyMissingKeepsRunning(t *testing.T) {
	key, className := runningWith(t, nil)
	class := &workspacesv1.WorkspaceClass{}
	must(t, k8s.Get(ctxT(t), types.NamespacedName{Name: className}, class))
	spec := class.Spec
	must(t, k8s.Delete(ctxT(t), class))
	// A class in use is protected by a finalizer (internal/workspaceclass); one taken off by hand
	// lets it go while the workspace runs.
	eventually(t, "class gone", func() error {
		got := &workspacesv1.WorkspaceClass{}
		if err := k8s.Get(ctxT(t), types.NamespacedName{Name: className}, got); err != nil {
			return client.IgnoreNotFound(err)
		}
		patch := client.MergeFrom(got.DeepCopy())
		got.Finalizers = nil
		if err := k8s.Patch(ctxT(t), got, patch); err != nil {
			return err
		}
		return fmt.Errorf("class still there")
	})
	stillRunningWith(t, key, workspacesv1.ClassResolvedCondition, workspacesv1.ReasonClassNotFound)

	must(t, k8s.Create(ctxT(t), &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: className}, Spec: spec}))
	eventually(t, "ClassResolved True again", func() error {
		ws := getWS(t, key)
		if c := condition(ws, workspacesv1.ClassResolvedCondition); c.Status != metav1.ConditionTrue || ws.Status.Phase != workspacesv1.PhaseRunning {
			return fmt.Errorf("ClassResolved %s/%s, phase %s", c.Status, c.Reason, ws.Status.Phase)
		}
		return nil
	})
}

// TestValuesFromBrieflyMissingKeepsRunning: a spec.valuesFrom source deleted and made again is a
// condition on a Running workspace, not Pending; it heals when the source is back.
func TestValuesFromBrieflyMissingKeepsRunning(t *testing.T) {
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name("values")}, Data: map[string]string{"values.yaml": "greeting: hello\n"}}
	key, _ := runningWith(t, func(ws *workspacesv1.WorkspaceDeployment) {
		src.Namespace = ws.Namespace
		must(t, k8s.Create(ctxT(t), src))
		ws.Spec.ValuesFrom = []workspacesv1.ValuesFromSource{{Kind: workspacesv1.ValuesSourceConfigMap, Name: src.Name}}
	})
	must(t, k8s.Delete(ctxT(t), src))
	stillRunningWith(t, key, workspacesv1.ResourcesInjectedCondition, workspacesv1.ReasonValuesFromNotFound)

	must(t, k8s.Create(ctxT(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: src.Name}, Data: src.Data}))
	eventually(t, "ResourcesInjected True again", func() error {
		ws := getWS(t, key)
		if c := condition(ws, workspacesv1.ResourcesInjectedCondition); c.Status != metav1.ConditionTrue || ws.Status.Phase != workspacesv1.PhaseRunning {
			return fmt.Errorf("ResourcesInjected %s/%s, phase %s", c.Status, c.Reason, ws.Status.Phase)
		}
		return nil
	})
}
