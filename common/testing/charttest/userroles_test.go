package charttest

import (
	"context"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// isUserRole reports whether a ClusterRole of the release with prefix fullname is one of the roles for
// people (rbac.userRoles), which the chart never binds to a component.
func isUserRole(name, fullname string) bool {
	for _, suffix := range []string{"-workspaces-view", "-workspaces-edit", "-workspaceclasses-view", "-platform-admin"} {
		if name == fullname+suffix {
			return true
		}
	}
	return false
}

// tenantRoles are the user roles a tenant is given in its namespace.
var tenantRoles = []string{"exalsius-operator-workspaces-view", "exalsius-operator-workspaces-edit"}

// neverForTenants reports why a tenant role's rule on group/resource must not exist: status is the
// controllers' (the controller trusts status.placement and status.admission), WorkspaceQuotas are the
// platform's, ServiceSets would bypass the operator, Colonies make clusters. "" when it may.
func neverForTenants(group, resource, verb string) string {
	switch {
	case strings.Contains(resource, "/"):
		return "a subresource"
	case resource == "*" || group == "*" || verb == "*":
		return "a wildcard"
	case group == "workspaces.exalsius.ai" && resource == "workspacequotas" && !slices.Contains([]string{"get", "list", "watch"}, verb):
		return "a WorkspaceQuota write"
	case group == "k0rdent.mirantis.com", group == "infra.exalsius.ai":
		return "k0rdent objects or Colonies"
	case group != "workspaces.exalsius.ai":
		return "another API group"
	}
	return ""
}

// TestUserRoles: the roles for people. The tenant roles aggregate into the built-in view, edit and
// admin roles and never grant status, WorkspaceQuota writes, ServiceSets or Colonies; bound in one
// namespace, the edit role lets a tenant run workspaces there and nowhere else, and read (not write)
// its quota. The platform-admin role writes classes, quotas and Colonies, and no status.
func TestUserRoles(t *testing.T) {
	objs := render(t)
	roles := map[string]*rbacv1.ClusterRole{}
	for _, u := range objs.ofKind("ClusterRole") {
		roles[u.GetName()] = into[rbacv1.ClusterRole](t, u)
	}
	for _, name := range tenantRoles {
		r := roles[name]
		if r == nil {
			t.Fatalf("ClusterRole %s is not rendered", name)
		}
		for _, rule := range r.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						if why := neverForTenants(g, res, v); why != "" {
							t.Errorf("%s grants %s %s/%s: %s", name, v, g, res, why)
						}
					}
				}
			}
		}
	}
	// The check can fail.
	if neverForTenants("workspaces.exalsius.ai", "workspacedeployments/status", "patch") == "" ||
		neverForTenants("workspaces.exalsius.ai", "workspacequotas", "update") == "" ||
		neverForTenants("k0rdent.mirantis.com", "servicesets", "create") == "" ||
		neverForTenants("infra.exalsius.ai", "colonies", "get") == "" {
		t.Error("neverForTenants misses a forbidden rule")
	}
	for name, want := range map[string][]string{
		"exalsius-operator-workspaces-view": {"view", "edit", "admin"},
		"exalsius-operator-workspaces-edit": {"edit", "admin"},
	} {
		for _, to := range want {
			if roles[name].Labels["rbac.authorization.k8s.io/aggregate-to-"+to] != "true" {
				t.Errorf("%s does not aggregate into %s", name, to)
			}
		}
	}
	for _, name := range []string{"exalsius-operator-platform-admin", "exalsius-operator-workspaceclasses-view"} {
		r := roles[name]
		if r == nil {
			t.Fatalf("ClusterRole %s is not rendered", name)
		}
		for k := range r.Labels {
			if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
				t.Errorf("%s aggregates (%s): it must be bound on purpose", name, k)
			}
		}
	}
	if got := render(t, "--set", "rbac.userRoles.create=false"); got.get("ClusterRole", "exalsius-operator-workspaces-edit") != nil {
		t.Error("rbac.userRoles.create=false still renders the user roles")
	}
	viewers := render(t, "--set", "rbac.userRoles.workspaceClassViewers[0].kind=Group",
		"--set", "rbac.userRoles.workspaceClassViewers[0].name=system:authenticated",
		"--set", "rbac.userRoles.workspaceClassViewers[0].apiGroup=rbac.authorization.k8s.io")
	if viewers.get("ClusterRoleBinding", "exalsius-operator-workspaceclasses-view") == nil {
		t.Error("rbac.userRoles.workspaceClassViewers renders no ClusterRoleBinding")
	}
	if objs.get("ClusterRoleBinding", "exalsius-operator-workspaceclasses-view") != nil {
		t.Error("the WorkspaceClass viewers are bound without rbac.userRoles.workspaceClassViewers")
	}

	// For real: the roles installed, a tenant bound to the edit role in team-a, a platform admin
	// bound cluster-wide; the API server says what each may do.
	var install rendered
	for _, u := range objs.ofKind("ClusterRole") {
		if strings.HasPrefix(u.GetName(), "exalsius-operator-workspace") || u.GetName() == "exalsius-operator-platform-admin" {
			install = append(install, u)
		}
	}
	install = append(install,
		toUnstructured(t, &rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "charttest-tenant"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "exalsius-operator-workspaces-edit"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "charttest-tenant"}}}),
		toUnstructured(t, &rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "charttest-platform-admin"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "exalsius-operator-platform-admin"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "charttest-platform"}}}),
	)
	apply(t, install, true)
	cs := kubernetes.NewForConfigOrDie(mgmt.Config)
	can := func(user, verb, group, resource, sub, ns string) bool {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: ns},
		}}
		res, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview: %v", err)
		}
		return res.Status.Allowed
	}
	const ws, infra, kcm = "workspaces.exalsius.ai", "infra.exalsius.ai", "k0rdent.mirantis.com"
	for _, c := range []struct {
		user, verb, group, resource, sub, ns string
		allowed                              bool
	}{
		{"charttest-tenant", "create", ws, "workspacedeployments", "", "default", true},
		{"charttest-tenant", "patch", ws, "workspacedeployments", "", "default", true},
		{"charttest-tenant", "delete", ws, "workspacedeployments", "", "default", true},
		{"charttest-tenant", "get", ws, "workspacequotas", "", "default", true},
		{"charttest-tenant", "create", ws, "workspacedeployments", "", "team-b", false},
		{"charttest-tenant", "patch", ws, "workspacedeployments", "status", "default", false},
		{"charttest-tenant", "update", ws, "workspacedeployments", "status", "default", false},
		{"charttest-tenant", "create", ws, "workspacequotas", "", "default", false},
		{"charttest-tenant", "patch", ws, "workspacequotas", "", "default", false},
		{"charttest-tenant", "create", kcm, "servicesets", "", "default", false},
		{"charttest-tenant", "create", infra, "colonies", "", "default", false},
		{"charttest-tenant", "create", ws, "workspaceclasses", "", "", false},
		{"charttest-platform", "create", ws, "workspaceclasses", "", "", true},
		{"charttest-platform", "create", ws, "workspacequotas", "", "team-b", true},
		{"charttest-platform", "create", infra, "colonies", "", "team-b", true},
		{"charttest-platform", "get", ws, "workspacedeployments", "status", "team-b", true},
		{"charttest-platform", "patch", ws, "workspacedeployments", "status", "team-b", false},
		{"charttest-platform", "patch", infra, "colonies", "status", "team-b", false},
		{"charttest-platform", "get", "", "secrets", "", "team-b", false},
	} {
		if got := can(c.user, c.verb, c.group, c.resource, c.sub, c.ns); got != c.allowed {
			t.Errorf("%s %s %s/%s/%s in %q: allowed=%v, want %v", c.user, c.verb, c.group, c.resource, c.sub, c.ns, got, c.allowed)
		}
	}
}

// toUnstructured converts a typed object for apply.
func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}
