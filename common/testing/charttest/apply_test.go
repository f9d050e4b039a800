package charttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

var mgmt *testenv.Management

// haveSveltos: the SveltosCluster CRD is installed (its shared copy exists on this machine).
var haveSveltos bool

func TestMain(m *testing.M) {
	testenv.Main(m, func(mg *testenv.Management) error {
		mgmt = mg
		ctx := context.Background()
		// The release namespace, and the watched namespaces of the non-default values (Roles go there).
		for _, name := range []string{releaseNamespace, "team-a", "team-b"} {
			if err := mg.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
				return err
			}
		}
		// Region and SveltosCluster, whose scopes TestClusterScopedResourcesMatchTheAPIServer reads.
		var err error
		if haveSveltos, _, err = childtest.InstallKindCRDs(ctx, mg.Config, time.Minute); err != nil {
			return err
		}
		// The optional integrations' CRDs, so that their objects can be dry-run too.
		for _, crd := range []struct{ group, kind, plural string }{
			{"monitoring.coreos.com", "ServiceMonitor", "servicemonitors"},
			{"cert-manager.io", "Certificate", "certificates"},
			{"cert-manager.io", "Issuer", "issuers"},
		} {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(looseCRD(crd.group, crd.kind, crd.plural))
			if err != nil {
				return err
			}
			u := &unstructured.Unstructured{Object: m}
			u.SetAPIVersion("apiextensions.k8s.io/v1")
			u.SetKind("CustomResourceDefinition")
			if err := mg.Client.Create(ctx, u); err != nil {
				return err
			}
		}
		return nil
	})
}

// looseCRD is a namespaced CRD that accepts any spec, standing in for an integration's CRD.
func looseCRD(group, kind, plural string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: fmt.Sprintf("%s-singular", plural)},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
}

// apply server-side applies every object, as a dry run unless real is set, and waits for the CRDs'
// kinds to be served when the objects include CRDs applied for real.
func apply(t *testing.T, objs rendered, real bool) {
	t.Helper()
	ctx := context.Background()
	opts := []client.ApplyOption{client.FieldOwner("charttest"), client.ForceOwnership}
	if !real {
		opts = append(opts, client.DryRunAll)
	}
	for _, u := range objs {
		obj := u.DeepCopy()
		waitMapped(t, obj)
		if err := mgmt.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), opts...); err != nil {
			t.Errorf("server-side apply of %s (dry run %v): %v", key(u), !real, err)
		}
	}
}

// waitMapped waits until the API server serves the object's kind (CRDs installed moments ago).
func waitMapped(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err := mgmt.Client.RESTMapper().RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("%s is not served: %v", u.GroupVersionKind(), err)
	}
}

func TestRenderedManifestsPassServerSideDryRun(t *testing.T) {
	for name, objs := range map[string]rendered{
		"default":    render(t),
		"nondefault": renderValuesFile(t, "nondefault-values.yaml"),
	} {
		t.Run(name, func(t *testing.T) {
			apply(t, objs, false)
		})
	}
}

// TestRBACIsLeastPrivilege installs the chart's ServiceAccounts and RBAC for real and asks the API
// server, as each component's ServiceAccount, what it may do.
func TestRBACIsLeastPrivilege(t *testing.T) {
	var rbacObjs rendered
	for _, u := range render(t) {
		switch u.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			rbacObjs = append(rbacObjs, u)
		}
	}
	apply(t, rbacObjs, true)

	cs := kubernetes.NewForConfigOrDie(mgmt.Config)
	can := func(component string, attrs authorizationv1.ResourceAttributes) bool {
		sa := "exalsius-operator-" + component
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               fmt.Sprintf("system:serviceaccount:%s:%s", releaseNamespace, sa),
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNamespace, "system:authenticated"},
			ResourceAttributes: &attrs,
		}}
		res, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview: %v", err)
		}
		return res.Status.Allowed
	}
	secret := func(verb, ns, name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Resource: "secrets", Namespace: ns, Name: name}
	}
	res := func(verb, group, resource, sub, ns string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: ns}
	}
	cases := []struct {
		component string
		attrs     authorizationv1.ResourceAttributes
		allowed   bool
	}{
		// The webhook reads and updates only its own Secret.
		{"webhook", secret("get", releaseNamespace, "exalsius-operator-webhook-tls"), true},
		{"webhook", secret("update", releaseNamespace, "exalsius-operator-webhook-tls"), true},
		{"webhook", secret("get", releaseNamespace, "other"), false},
		{"webhook", secret("get", "team-a", "exalsius-operator-webhook-tls"), false}, // a Role, not a ClusterRole
		{"webhook", secret("list", releaseNamespace, ""), false},
		{"webhook", secret("get", "team-a", "cd-kubeconfig"), false},
		{"webhook", res("delete", "workspaces.exalsius.ai", "workspaceclasses", "", ""), false},
		// Controllers that need kubeconfigs read Secrets; the colony-controller writes the aggregated
		// kubeconfig and the workspace-controller each workspace's values Secret (chart README).
		{"workspace-controller", secret("get", "team-a", "cd-kubeconfig"), true},
		{"workspace-controller", secret("create", "team-a", ""), true},
		{"inventory-collector", secret("get", "team-a", "cd-kubeconfig"), true},
		{"inventory-collector", secret("update", "team-a", "cd-kubeconfig"), false},
		{"colony-controller", secret("create", "team-a", ""), true},
		{"colony-controller", secret("delete", "team-a", "x"), false},
		// Each component writes only its own objects.
		{"colony-controller", res("create", "k0rdent.mirantis.com", "clusterdeployments", "", "team-a"), true},
		{"workspace-controller", res("create", "k0rdent.mirantis.com", "clusterdeployments", "", "team-a"), false},
		{"workspace-controller", res("create", "k0rdent.mirantis.com", "servicesets", "", "team-a"), true},
		{"inventory-collector", res("patch", "infra.exalsius.ai", "colonies", "status", "team-a"), true},
		{"inventory-collector", res("update", "infra.exalsius.ai", "colonies", "", "team-a"), false},
		{"colony-controller", res("create", "k0rdent.mirantis.com", "servicesets", "", "team-a"), false},
		// Leader election only in the release namespace; metrics authentication for every component.
		{"colony-controller", res("update", "coordination.k8s.io", "leases", "", releaseNamespace), true},
		{"colony-controller", res("update", "coordination.k8s.io", "leases", "", "kube-system"), false},
		{"webhook", res("update", "coordination.k8s.io", "leases", "", releaseNamespace), false},
		{"inventory-collector", res("create", "authentication.k8s.io", "tokenreviews", "", ""), true},
		{"workspace-controller", res("create", "authorization.k8s.io", "subjectaccessreviews", "", ""), true},
		{"colony-controller", res("get", "", "nodes", "", ""), false},
		// The workspace-controller owns the WorkspaceClass finalizer: it may patch classes (metadata;
		// the CRD keeps the spec immutable), and nothing else may. The finalizers subresource only
		// lets an owner reference with blockOwnerDeletion point at a class, which nothing sets.
		{"workspace-controller", res("patch", "workspaces.exalsius.ai", "workspaceclasses", "", ""), true},
		{"workspace-controller", res("update", "workspaces.exalsius.ai", "workspaceclasses", "finalizers", ""), false},
		{"workspace-controller", res("delete", "workspaces.exalsius.ai", "workspaceclasses", "", ""), false},
		{"webhook", res("patch", "workspaces.exalsius.ai", "workspaceclasses", "", ""), false},
		{"colony-controller", res("patch", "workspaces.exalsius.ai", "workspaceclasses", "", ""), false},
	}
	for _, c := range cases {
		if got := can(c.component, c.attrs); got != c.allowed {
			t.Errorf("%s %s %s/%s %s/%s: allowed=%v, want %v", c.component, c.attrs.Verb, c.attrs.Group, c.attrs.Resource,
				c.attrs.Namespace, c.attrs.Name, got, c.allowed)
		}
	}
	if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Name: "exalsius-operator-metrics-reader"}, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"}}); apierrors.IsNotFound(err) {
		t.Errorf("metrics-reader ClusterRole not installed")
	}
}
