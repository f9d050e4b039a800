package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/webhook/internal/admission"
)

const corpusClass = "corpus-class-1-0-0"

func jsonOf(v any) *apiextensionsv1.JSON {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return &apiextensionsv1.JSON{Raw: b}
}

func deployment(ns, name, class string, values map[string]any) *workspacesv1.WorkspaceDeployment {
	d := &workspacesv1.WorkspaceDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: workspacesv1.WorkspaceDeploymentSpec{
			WorkspaceClassRef:    class,
			ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "gpu-cluster"},
		},
	}
	if values != nil {
		d.Spec.Values = jsonOf(values)
	}
	return d
}

func validValues() map[string]any {
	return map[string]any{"auth": map[string]any{"password": "hunter2"}, "server": map[string]any{"port": 9000}, "profile": "large"}
}

func simpleClass(name string) *workspacesv1.WorkspaceClass {
	return &workspacesv1.WorkspaceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       workspacesv1.WorkspaceClassSpec{DisplayName: "Simple", ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: "simple-1-0-0"}},
	}
}

// denied fails unless err is a denial by the webhook naming path.
func denied(t *testing.T, err error, path string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a denial naming %s, got none", path)
	}
	if !strings.Contains(err.Error(), "denied the request") || !strings.Contains(err.Error(), path) {
		t.Fatalf("want a webhook denial naming %s, got: %v", path, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWorkspaceClassAcceptedAndImmutable(t *testing.T) {
	ctx := context.Background()
	wc := simpleClass("immutable-1-0-0")
	wc.Spec.UserFacingConfig = []workspacesv1.UserFacingConfig{{HelmValuePath: "a.b", DisplayName: "A", Type: "int", Default: jsonOf(3), Options: []apiextensionsv1.JSON{*jsonOf(3), *jsonOf(4)}}}
	wc.Spec.ResourceInjection = &workspacesv1.ResourceInjection{GPUCount: []string{`resources.limits["nvidia.com/gpu"]`}}
	must(t, mgmt.Client.Create(ctx, wc))

	// Metadata changes pass. (A patch, not an Update: a typed Update re-encodes durations such as
	// "10m" as "10m0s", which the CRD's CEL rule self.spec == oldSelf.spec reads as a spec change.)
	before := wc.DeepCopy()
	wc.Labels = map[string]string{"catalog": "yes"}
	must(t, mgmt.Client.Patch(ctx, wc, client.MergeFrom(before)))

	wc.Spec.DisplayName = "Changed"
	err := mgmt.Client.Update(ctx, wc)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "publish a new WorkspaceClass") {
		t.Fatalf("want the spec change denied with advice to publish a new class, got %v", err)
	}
}

func TestWorkspaceClassDeleteInUse(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	wc := simpleClass("in-use-1-0-0")
	must(t, mgmt.Client.Create(ctx, wc))
	var users []*workspacesv1.WorkspaceDeployment
	for i := range 7 {
		d := deployment("corpus", fmt.Sprintf("user-%d", i), wc.Name, nil)
		must(t, mgmt.Client.Create(ctx, d))
		users = append(users, d)
	}
	err := mgmt.Client.Delete(ctx, wc)
	denied(t, err, "metadata.name")
	for _, want := range []string{"7 WorkspaceDeployments use it", "corpus/user-0", "corpus/user-4", "and 2 more"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the denial lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "corpus/user-5") {
		t.Errorf("the denial names more than five users: %v", err)
	}
	for _, d := range users {
		must(t, mgmt.Client.Delete(ctx, d))
	}
	must(t, mgmt.Client.Delete(ctx, wc))
}

func TestWorkspaceDeploymentAcceptedAndDefaulted(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	warnings.take()
	d := deployment("corpus", "accepted", corpusClass, validValues())
	must(t, wclient.Create(ctx, d))
	if w := warnings.take(); len(w) != 0 {
		t.Errorf("unexpected warnings: %v", w)
	}
	got := &workspacesv1.WorkspaceDeployment{}
	must(t, mgmt.Client.Get(ctx, client.ObjectKeyFromObject(d), got))
	if got.Spec.ClusterDeploymentRef.Namespace != "corpus" {
		t.Fatalf("clusterDeploymentRef.namespace was not defaulted to the own namespace: %+v", got.Spec.ClusterDeploymentRef)
	}

	// A client that drops the defaulted namespace (an apply of the original manifest) is not denied.
	got.Spec.ClusterDeploymentRef.Namespace = ""
	got.Spec.Suspend = true
	must(t, mgmt.Client.Update(ctx, got))
	if got.Spec.ClusterDeploymentRef.Namespace != "corpus" {
		t.Fatalf("the namespace was not restored: %+v", got.Spec.ClusterDeploymentRef)
	}

	// A changed spec is checked again.
	bad := got.DeepCopy()
	bad.Spec.Values = jsonOf(map[string]any{"auth": map[string]any{"password": "x"}, "profile": "medium"})
	denied(t, mgmt.Client.Update(ctx, bad), "spec.values.profile")

	// The references never change.
	moved := got.DeepCopy()
	moved.Spec.WorkspaceClassRef = "other-class"
	if err := mgmt.Client.Update(ctx, moved); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "workspaceClassRef") {
		t.Fatalf("want the class change denied, got %v", err)
	}
	moved = got.DeepCopy()
	moved.Spec.ClusterDeploymentRef.Name = "other-cluster"
	if err := mgmt.Client.Update(ctx, moved); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "clusterDeploymentRef") {
		t.Fatalf("want the cluster change denied, got %v", err)
	}
}

func TestWorkspaceDeploymentMissingClassWarns(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	warnings.take()
	d := deployment("corpus", "early", "not-published-yet-1-0-0", map[string]any{"anything": 1})
	must(t, wclient.Create(ctx, d))
	w := strings.Join(warnings.take(), "\n")
	if !strings.Contains(w, "WorkspaceClass not-published-yet-1-0-0 does not exist yet") {
		t.Fatalf("want a warning about the missing class, got %q", w)
	}
}

func TestWorkspaceDeploymentInjectedValueWarns(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	warnings.take()
	values := validValues()
	values["replicaCount"] = 3
	must(t, wclient.Create(ctx, deployment("corpus", "injected", corpusClass, values)))
	if w := strings.Join(warnings.take(), "\n"); !strings.Contains(w, "spec.values.replicaCount is overwritten") {
		t.Fatalf("want a warning about the overwritten value, got %q", w)
	}
}

func TestWorkspaceDeploymentTenancy(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	must(t, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-y"}}))
	shared := deployment("corpus", "to-shared", corpusClass, validValues())
	shared.Spec.ClusterDeploymentRef.Namespace = "shared"
	must(t, mgmt.Client.Create(ctx, shared))
	listed := deployment("team-y", "to-other-team", corpusClass, validValues())
	listed.Spec.ClusterDeploymentRef.Namespace = "other-team"
	must(t, mgmt.Client.Create(ctx, listed))
	notListed := deployment("corpus", "to-other-team", corpusClass, validValues())
	notListed.Spec.ClusterDeploymentRef.Namespace = "other-team"
	denied(t, mgmt.Client.Create(ctx, notListed), "spec.clusterDeploymentRef.namespace")

	// Tenancy is checked on create only: revoking the grant never blocks later updates or teardown.
	ns := &corev1.Namespace{}
	must(t, mgmt.Client.Get(ctx, client.ObjectKey{Name: "shared"}, ns))
	ns.Annotations = nil
	must(t, mgmt.Client.Update(ctx, ns))
	shared.Spec.Suspend = true
	must(t, mgmt.Client.Update(ctx, shared))
}

func TestDeletingObjectsAreNeverHeldUp(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	d := deployment("corpus", "finalized", corpusClass, validValues())
	d.Finalizers = []string{workspacesv1.WorkspaceFinalizer}
	must(t, mgmt.Client.Create(ctx, d))
	must(t, mgmt.Client.Delete(ctx, d))
	must(t, mgmt.Client.Get(ctx, client.ObjectKeyFromObject(d), d))
	d.Finalizers = nil
	must(t, mgmt.Client.Update(ctx, d))
}

func TestColonyAcceptedAndChecked(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	c := &infrav1.Colony{
		ObjectMeta: metav1.ObjectMeta{Namespace: "corpus", Name: "lab"},
		Spec: infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{{
			ClusterName:           "gpu-eu",
			ClusterDeploymentSpec: *jsonOf(map[string]any{"template": "hcp-0-1-0", "credential": "aws", "config": map[string]any{"x": 1}, "unknownKey": true}),
			ClusterLabels:         map[string]string{"tier": "gpu"},
		}}},
	}
	must(t, mgmt.Client.Create(ctx, c))
	c.Spec.ColonyClusters = append(c.Spec.ColonyClusters, infrav1.ColonyCluster{ClusterName: "gpu-us", ClusterDeploymentSpec: *jsonOf(map[string]any{"config": map[string]any{}})})
	denied(t, mgmt.Client.Update(ctx, c), "spec.colonyClusters[1].clusterDeploymentSpec.template")
}

// TestSystemNamespacesAreNotBlocked: the namespaceSelector keeps the webhook away from kube-public,
// and no namespace label turns admission off (a tenant may label their own namespace): the label the
// webhook once honoured changes nothing.
func TestSystemNamespacesAreNotBlocked(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	must(t, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ignored",
		Labels: map[string]string{"webhooks.exalsius.ai/ignore": "true"}}}))
	d := deployment("kube-public", "too-many-replicas", corpusClass, validValues())
	d.Spec.Resources = &workspacesv1.ResourceOverrides{Replicas: ptr(int32(testMaxReplicas + 1))}
	must(t, mgmt.Client.Create(ctx, d))
	for _, ns := range []string{"corpus", "ignored"} {
		d := deployment(ns, "too-many-replicas", corpusClass, validValues())
		d.Spec.Resources = &workspacesv1.ResourceOverrides{Replicas: ptr(int32(testMaxReplicas + 1))}
		denied(t, mgmt.Client.Create(ctx, d), "spec.resources.replicas")
	}
}

func TestReadyAndCABundleFile(t *testing.T) {
	if err := wh.Checker().Check(nil); err != nil {
		t.Fatalf("the readiness check fails while the webhook serves: %v", err)
	}
	if err := wh.Rotator.Ready(nil); err != nil {
		t.Fatalf("the CA injection check fails while the configurations carry the bundle: %v", err)
	}
	data, err := os.ReadFile(cfgCABundleFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, wh.Rotator.CABundle()) {
		t.Fatalf("the CA bundle file differs from the injected bundle")
	}
}

func ptr[T any](v T) *T { return &v }

// behindCache is a reader that has not seen anything yet, like the webhook's cache a moment after a
// `kubectl apply -f` of a folder created a class.
type behindCache struct{ client.Reader }

func (behindCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "anything"}, key.Name)
}

func (behindCache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// TestObjectsCreatedAMomentAgoAreSeen: what the cache does not hold yet is read from the API server
// before a deployment is let through unchecked or refused: a class (the quick start, applied as one
// folder, drew "does not exist yet" for a class created a moment before), the namespace that allows
// the deployment's cluster reference, and the quota that allows its priority.
func TestObjectsCreatedAMomentAgoAreSeen(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	must(t, mgmt.Client.Create(ctx, simpleClass("just-created-1-0-0")))
	v := &admission.DeploymentValidator{Reader: behindCache{}, LiveReader: mgmt.Client}
	w, err := v.ValidateCreate(ctx, deployment("corpus", "right-after", "just-created-1-0-0", nil))
	must(t, err)
	if len(w) > 0 {
		t.Fatalf("want the class read from the API server, got warnings %v", w)
	}
	// A class that exists nowhere still only warns.
	w, err = v.ValidateCreate(ctx, deployment("corpus", "too-early", "nowhere-1-0-0", nil))
	must(t, err)
	if !strings.Contains(strings.Join(w, "\n"), "WorkspaceClass nowhere-1-0-0 does not exist yet") {
		t.Fatalf("want the missing-class warning, got %v", w)
	}

	must(t, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "just-shared",
		Annotations: map[string]string{workspacesv1.AllowWorkspacesFromAnnotation: "*"}}}))
	must(t, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "just-quoted"}}))
	must(t, mgmt.Client.Create(ctx, &workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "just-quoted", Name: "q"},
		Spec: workspacesv1.WorkspaceQuotaSpec{MaxPriority: ptr(int32(5))}}))
	d := deployment("just-quoted", "right-after", "just-created-1-0-0", nil)
	d.Spec.ClusterDeploymentRef.Namespace = "just-shared"
	d.Spec.Priority = 5
	if _, err := v.ValidateCreate(ctx, d); err != nil {
		t.Fatalf("want the namespace and the quota read from the API server, got %v", err)
	}
	// What exists nowhere is still refused.
	d.Spec.Priority = 6
	d.Spec.ClusterDeploymentRef.Namespace = "nowhere"
	_, err = v.ValidateCreate(ctx, d)
	for _, path := range []string{"spec.clusterDeploymentRef.namespace", "spec.priority"} {
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("want %s refused, got %v", path, err)
		}
	}
}

// TestWorkspaceDeploymentClassAllowedNamespaces: a class with spec.allowedNamespaces is refused to a
// namespace it does not select, naming spec.workspaceClassRef, and allowed to one it selects; a class
// without it is for every namespace; an invalid selector is refused on the class.
func TestWorkspaceDeploymentClassAllowedNamespaces(t *testing.T) {
	ctx := context.Background()
	gold := simpleClass("gold-only-1-0-0")
	gold.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	must(t, mgmt.Client.Create(ctx, gold))
	must(t, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-gold", Labels: map[string]string{"tier": "gold"}}}))
	must(t, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-plain"}}))
	must(t, mgmt.Client.Create(ctx, deployment("team-gold", "nb", gold.Name, nil)))
	err := mgmt.Client.Create(ctx, deployment("team-plain", "nb", gold.Name, nil))
	denied(t, err, "spec.workspaceClassRef")
	if !strings.Contains(err.Error(), "spec.allowedNamespaces") {
		t.Errorf("the denial does not name the class's field: %v", err)
	}
	plain := simpleClass("for-all-1-0-0")
	must(t, mgmt.Client.Create(ctx, plain))
	must(t, mgmt.Client.Create(ctx, deployment("team-plain", "nb", plain.Name, nil)))

	bad := simpleClass("bad-selector-1-0-0")
	bad.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}
	denied(t, mgmt.Client.Create(ctx, bad), "spec.allowedNamespaces.matchExpressions[0].operator")
}
