package prerequisites

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/release"
)

func (e testEnv) workspace(name, class string) *workspacesv1.WorkspaceDeployment {
	return &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: e.team, Name: name},
		Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: class,
			ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "cd", Namespace: e.kcm}}}
}

func testClass(name string, prereqs ...workspacesv1.Prerequisite) *workspacesv1.WorkspaceClass {
	return &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: workspacesv1.WorkspaceClassSpec{Prerequisites: prereqs}}
}

func gpuOperator(namespace, values string) workspacesv1.Prerequisite {
	p := workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: "gpu-operator-v1"}, Namespace: namespace}
	if values != "" {
		p.Values = &apiextensionsv1.JSON{Raw: []byte(values)}
	}
	return p
}

// request is the installer's request for ws on the test's ClusterDeployment kcm/cd (which the
// installer takes as given: it reads it from the request, not from the server).
func (e testEnv) request(ws *workspacesv1.WorkspaceDeployment, class *workspacesv1.WorkspaceClass) Request {
	cd := &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: e.kcm, Name: "cd", UID: "cd-uid"}}
	return Request{Workspace: ws, Class: class, Cluster: cd, ClusterKey: client.ObjectKeyFromObject(cd),
		ClusterOwner: metav1.OwnerReference{APIVersion: k0rdentv1beta1.GroupVersion.String(), Kind: "ClusterDeployment", Name: "cd", UID: "cd-uid"}}
}

// installer reads through the cache (whose ServiceSets carry a digest of their values), as the
// reconciler's.
func installer() *Installer { return &Installer{Client: cached, ValuesDigest: release.ValuesDigest} }

// sharedKey is the shared ServiceSet of gpu-operator-v1 on the test's cluster.
func (e testEnv) sharedKey() types.NamespacedName {
	return types.NamespacedName{Namespace: e.kcm, Name: owned.PrerequisiteServiceSetName("cd", "gpu-operator-v1")}
}

// waitSharedCached waits until the cache shows the shared ServiceSet carrying the values of class.
func (e testEnv) waitSharedCached(t *testing.T, class string) {
	t.Helper()
	ss := &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Namespace: e.kcm, Name: e.sharedKey().Name}}
	waitCached(t, "the cache shows the shared ServiceSet with the values of "+class, ss, func(ss *k0rdentv1beta1.ServiceSet, err error) error {
		if err != nil {
			return err
		}
		if got := ss.Annotations[owned.AnnotationPrerequisiteValuesFrom]; got != class {
			return fmt.Errorf("values from %q", got)
		}
		return nil
	})
}

// waitWorkspaceCached waits until the cache holds ws (present) or no longer holds it.
func waitWorkspaceCached(t *testing.T, ws *workspacesv1.WorkspaceDeployment, present bool) {
	t.Helper()
	probe := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ws.Namespace, Name: ws.Name}}
	waitCached(t, fmt.Sprintf("the cache holds workspace %s/%s: %v", ws.Namespace, ws.Name, present), probe, func(_ *workspacesv1.WorkspaceDeployment, err error) error {
		switch {
		case present && err != nil:
			return err
		case !present && err == nil:
			return errors.New("still cached")
		case !present && !apierrors.IsNotFound(err):
			return err
		}
		return nil
	})
}

// The first workspace makes the shared ServiceSet and waits for it; once k0rdent reports it
// deployed, the class's prerequisites are ready. A class without prerequisites needs nothing.
func TestEnsureMakesTheSharedServiceSet(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	in := installer()
	class := testClass("a", gpuOperator("gpu-operator", `{"driver":{"enabled":false}}`))
	res, err := in.Ensure(ctx, e.request(e.workspace("nb", "a"), class))
	if err != nil {
		t.Fatal(err)
	}
	if res.Ready() || len(res.Pending) != 1 || res.Pending[0] != "gpu-operator-v1 (Pending)" || len(res.Statuses) != 1 {
		t.Fatalf("result %+v, want one pending prerequisite", res)
	}
	name := owned.PrerequisiteServiceSetName("cd", "gpu-operator-v1")
	if st := res.Statuses[0]; st.ServiceSetName != name || st.Namespace != "gpu-operator" || st.State != string(k0rdentv1beta1.ServiceStatePending) {
		t.Errorf("status %+v", st)
	}
	ss := &k0rdentv1beta1.ServiceSet{}
	if err := mgmt.Client.Get(ctx, e.sharedKey(), ss); err != nil {
		t.Fatal(err)
	}
	if ss.Spec.Cluster != "cd" || ss.Labels[workspacesv1.ClusterDeploymentLabel] != "cd" || ss.Labels[workspacesv1.PrerequisiteLabel] == "" ||
		ss.Labels[k0rdentv1beta1.StateManagementProviderAdapterLabel] != k0rdentv1beta1.StateManagementProviderAdapterValue ||
		ss.Annotations[owned.AnnotationPrerequisiteTemplate] != "gpu-operator-v1" || len(ss.OwnerReferences) != 1 || ss.OwnerReferences[0].UID != "cd-uid" ||
		len(ss.Spec.Services) != 1 || ss.Spec.Services[0].Values != "driver:\n  enabled: false\n" || ss.Spec.Services[0].Namespace != "gpu-operator" ||
		ss.Spec.Services[0].Template != "gpu-operator-v1" {
		t.Errorf("shared ServiceSet %+v", ss)
	}
	// k0rdent reports it deployed.
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	ss.Status.Deployed = true
	ss.Status.Services = []k0rdentv1beta1.ServiceState{{Type: k0rdentv1beta1.ServiceTypeHelm, Name: ss.Spec.Services[0].Name, Namespace: "gpu-operator",
		Template: "gpu-operator-v1", State: k0rdentv1beta1.ServiceStateDeployed, LastStateTransitionTime: &now}}
	if err := mgmt.Client.Status().Update(ctx, ss); err != nil {
		t.Fatal(err)
	}
	waitCached(t, "the cache shows the ServiceSet deployed", &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Namespace: e.kcm, Name: name}},
		func(ss *k0rdentv1beta1.ServiceSet, err error) error {
			if err != nil {
				return err
			}
			if len(ss.Status.Services) != 1 || ss.Status.Services[0].State != k0rdentv1beta1.ServiceStateDeployed {
				return fmt.Errorf("status %+v", ss.Status.Services)
			}
			return nil
		})
	if res, err := in.Ensure(ctx, e.request(e.workspace("nb", "a"), class)); err != nil || !res.Ready() {
		t.Errorf("deployed: %+v, %v; want ready", res, err)
	}
	if res, err := in.Ensure(ctx, e.request(e.workspace("nb", "b"), testClass("b"))); err != nil || !res.Ready() || res.Statuses != nil {
		t.Errorf("no prerequisites: %+v, %v", res, err)
	}
}

// A prerequisite that names another namespace than the copy on the cluster conflicts
// (PrerequisiteNamespaceConflict); other values than the class in use on the cluster asks conflict
// as values (PrerequisiteValuesConflict), and the values are taken over once that class is unused.
func TestEnsureConflicts(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	owner := e.workspace("first", "a")
	if err := mgmt.Client.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	waitWorkspaceCached(t, owner, true)
	in := installer()
	if _, err := in.Ensure(ctx, e.request(owner, testClass("a", gpuOperator("", `{"x":1}`)))); err != nil {
		t.Fatal(err)
	}
	e.waitSharedCached(t, "a")

	res, err := in.Ensure(ctx, e.request(e.workspace("nb", "c"), testClass("c", gpuOperator("elsewhere", `{"x":1}`))))
	if err != nil {
		t.Fatal(err)
	}
	if res.ConflictReason != workspacesv1.ReasonPrerequisiteNamespaceConflict || len(res.Conflicts) != 1 || !strings.Contains(res.Conflicts[0], "elsewhere") ||
		res.Statuses[0].State != StateConflict {
		t.Errorf("namespace conflict: %+v", res)
	}

	other := e.request(e.workspace("nb", "b"), testClass("b", gpuOperator("", `{"x":2}`)))
	res, err = in.Ensure(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if res.ConflictReason != workspacesv1.ReasonPrerequisiteValuesConflict || len(res.Conflicts) != 1 || !strings.Contains(res.Conflicts[0], e.team+"/first") ||
		!strings.HasPrefix(res.Conflicts[0], "prerequisite gpu-operator-v1: ") {
		t.Errorf("values conflict: %+v", res)
	}
	ss := &k0rdentv1beta1.ServiceSet{}
	if err := mgmt.Client.Get(ctx, e.sharedKey(), ss); err != nil {
		t.Fatal(err)
	}
	if ss.Annotations[owned.AnnotationPrerequisiteValuesFrom] != "a" || ss.Spec.Services[0].Values != "x: 1\n" {
		t.Errorf("a conflicting class changed the shared ServiceSet: %v %q", ss.Annotations, ss.Spec.Services[0].Values)
	}

	if err := mgmt.Client.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	waitWorkspaceCached(t, owner, false)
	res, err = in.Ensure(ctx, other)
	if err != nil || len(res.Conflicts) != 0 {
		t.Fatalf("class a unused: %+v, %v; want no conflict", res, err)
	}
	if err := mgmt.Client.Get(ctx, e.sharedKey(), ss); err != nil {
		t.Fatal(err)
	}
	if ss.Annotations[owned.AnnotationPrerequisiteValuesFrom] != "b" || ss.Spec.Services[0].Values != "x: 2\n" {
		t.Errorf("values not taken over: %v %q", ss.Annotations, ss.Spec.Services[0].Values)
	}
}
