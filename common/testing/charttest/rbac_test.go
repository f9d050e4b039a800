package charttest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// allowed is the most each component's own rules may grant: "<group>/<resource>" to verbs. A rule
// beyond it (a new resource, a new verb) fails TestRBACIsNotWidened; widening a component's RBAC
// means changing this list in the same commit and giving the reason in the chart README.
var allowed = map[string]map[string][]string{
	"colony-controller": {
		// The aggregated kubeconfig Secret of each Colony (create cannot be limited by name; see the
		// chart README), and reading the child clusters' kubeconfig Secrets.
		"/secrets":             {"create", "get", "list", "update", "watch"},
		"events.k8s.io/events": {"create", "patch"},
		// Colonies are patched (the finalizer), their status server-side applied; the finalizers
		// subresource lets what a Colony owns carry blockOwnerDeletion.
		"infra.exalsius.ai/colonies":            {"get", "list", "patch", "watch"},
		"infra.exalsius.ai/colonies/finalizers": {"update"},
		"infra.exalsius.ai/colonies/status":     {"patch"},
		// The ClusterDeployments of Colonies, server-side applied (created when absent) and deleted
		// on teardown; never updated.
		"k0rdent.mirantis.com/clusterdeployments": {"create", "delete", "get", "list", "patch", "watch"},
		// A refused ClusterDeployment is applied again as soon as the template or credential it
		// waits for changes.
		"k0rdent.mirantis.com/clustertemplates": {"get", "list", "watch"},
		"k0rdent.mirantis.com/credentials":      {"get", "list", "watch"},
		// Readiness of adopted (SveltosCluster) and regional (Region) entries.
		"k0rdent.mirantis.com/regions":          {"get"},
		"lib.projectsveltos.io/sveltosclusters": {"get"},
		// Cluster API's own Cluster of each ClusterDeployment, watched for its readiness (read only).
		"cluster.x-k8s.io/clusters": {"get", "list", "watch"},
		// The hosted control plane's Service, for the API-endpoint ConfigMap on each child.
		"/services": {"get", "list", "watch"},
		// The hosted control plane's etcd claim, deleted with its ClusterDeployment.
		"/persistentvolumeclaims": {"delete", "get"},
	},
	"workspace-controller": {
		"/namespaces": {"get", "list", "watch"},
		// Kubeconfig and valuesFrom Secrets read; each workspace's values Secret written (chart README).
		"/secrets":    {"create", "delete", "get", "list", "patch", "update", "watch"},
		"/configmaps": {"get", "list", "watch"}, // spec.valuesFrom ConfigMaps
		// Adopted clusters (SveltosCluster) and regional clusters (Credential.region -> Region).
		"k0rdent.mirantis.com/credentials":        {"get"},
		"k0rdent.mirantis.com/regions":            {"get"},
		"lib.projectsveltos.io/sveltosclusters":   {"get"},
		"events.k8s.io/events":                    {"create", "list", "patch"},
		"k0rdent.mirantis.com/clusterdeployments": {"get", "list", "watch"},
		"k0rdent.mirantis.com/servicetemplates":   {"get", "list", "watch"},
		"k0rdent.mirantis.com/servicesets":        {"create", "delete", "get", "list", "patch", "update", "watch"},
		// The values Secret's owner reference to its ServiceSet sets blockOwnerDeletion.
		"k0rdent.mirantis.com/servicesets/finalizers":            {"update"},
		"workspaces.exalsius.ai/workspaceclasses":                {"get", "list", "patch", "watch"},
		"workspaces.exalsius.ai/workspaceclasses/status":         {"patch"},
		"workspaces.exalsius.ai/workspacedeployments":            {"get", "list", "patch", "update", "watch"},
		"workspaces.exalsius.ai/workspacedeployments/status":     {"get", "patch", "update"},
		"workspaces.exalsius.ai/workspacedeployments/finalizers": {"update"},
		// Placement (spec.colonyRef), quotas and priorities (docs/placement.md).
		"infra.exalsius.ai/colonies":                    {"get", "list", "watch"},
		"workspaces.exalsius.ai/workspacequotas":        {"get", "list", "watch"},
		"workspaces.exalsius.ai/workspacequotas/status": {"get", "patch", "update"},
	},
	"inventory-collector": {
		"/secrets":                                {"get", "list", "watch"},
		"events.k8s.io/events":                    {"create", "patch"},
		"infra.exalsius.ai/colonies":              {"get", "list", "watch"},
		"infra.exalsius.ai/colonies/status":       {"patch"},
		"k0rdent.mirantis.com/clusterdeployments": {"get", "list", "watch"},
		// Adopted clusters (SveltosCluster) and regional clusters (Credential.region -> Region).
		"k0rdent.mirantis.com/credentials":      {"get"},
		"k0rdent.mirantis.com/regions":          {"get"},
		"lib.projectsveltos.io/sveltosclusters": {"get"},
	},
	"webhook": {
		"/namespaces": {"get", "list", "watch"},
		"/secrets":    {"get", "update"}, // only its own TLS Secret, by name, in the release namespace (checkRBAC)
		"admissionregistration.k8s.io/mutatingwebhookconfigurations":   {"get", "update"},
		"admissionregistration.k8s.io/validatingwebhookconfigurations": {"get", "update"},
		"authentication.k8s.io/tokenreviews":                           {"create"},
		"authorization.k8s.io/subjectaccessreviews":                    {"create"}, // metrics authentication; may the requesting user get each valuesFrom source
		"workspaces.exalsius.ai/workspaceclasses":                      {"get", "list", "watch"},
		"workspaces.exalsius.ai/workspacedeployments":                  {"list"},
		"infra.exalsius.ai/colonies":                                   {"list"},                 // name collisions between Colonies
		"workspaces.exalsius.ai/workspacequotas":                       {"get", "list", "watch"}, // spec.priority's cap
	},
}

// componentRules returns the rules of the component's own ClusterRole and Roles: <fullname>-<c>, and
// <fullname>-<c>-release-namespace for the rules naming its own objects (not the shared metrics and
// leader-election ones, which checkRBAC covers).
func componentRules(t *testing.T, r rendered, fullname, c string) []rbacv1.PolicyRule {
	t.Helper()
	var out []rbacv1.PolicyRule
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, u := range r.ofKind(kind) {
			name := u.GetName()
			if (name == fullname+"-"+c || name == fullname+"-"+c+"-release-namespace") && u.GetLabels()["app.kubernetes.io/component"] == c {
				out = append(out, into[rbacv1.ClusterRole](t, u).Rules...)
			}
		}
	}
	return out
}

func widened(rules []rbacv1.PolicyRule, allow map[string][]string) []string {
	var out []string
	for _, rule := range rules {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					if !slices.Contains(allow[g+"/"+res], v) {
						out = append(out, fmt.Sprintf("%s %s/%s", v, g, res))
					}
				}
			}
		}
	}
	return out
}

// TestRBACIsNotWidened fails when a component's rules grant anything beyond the allow list, under the
// default and the non-default values, and when the README no longer gives the reason for a Secret
// rule.
func TestRBACIsNotWidened(t *testing.T) {
	for name, r := range map[string]struct {
		objs     rendered
		fullname string
	}{"default": {render(t), "exalsius-operator"}, "nondefault": {renderValuesFile(t, "nondefault-values.yaml"), "eo"}} {
		for _, c := range components {
			rules := componentRules(t, r.objs, r.fullname, c)
			if len(rules) == 0 {
				t.Errorf("%s: %s has no rules", name, c)
			}
			if w := widened(rules, allowed[c]); len(w) > 0 {
				t.Errorf("%s: %s's RBAC was widened beyond the reviewed list: %v", name, c, w)
			}
		}
	}
	// The check can fail: a rule with one more verb is caught.
	extra := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "delete"}}}
	if w := widened(extra, allowed["inventory-collector"]); !slices.Equal(w, []string{"delete /secrets"}) {
		t.Errorf("the allow list check missed a widened rule: %v", w)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range components {
		if !strings.Contains(string(readme), "| "+c+" | Secrets") {
			t.Errorf("the chart README gives no reason for the Secret rule of %s", c)
		}
	}
}

// TestWatchNamespaceRBACIsNamespaced installs the RBAC of a release limited to team-a and team-b and
// asks the API server, as each component, what it may do: Secrets and the other namespaced
// resources only in the watched namespaces, cluster-scoped reads (Regions included) as before, the
// webhook's TLS Secret only in the release namespace, and no ClusterRole with Secrets at all.
func TestWatchNamespaceRBACIsNamespaced(t *testing.T) {
	r := render(t, "--set", "fullnameOverride=scoped", "--set", `global.watchNamespace=team-a\,team-b`)
	checkClusterWideSecrets(t, r, "scoped", nil)
	var rbacObjs rendered
	for _, u := range r {
		switch u.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if u.GetAnnotations()["helm.sh/hook"] == "" {
				rbacObjs = append(rbacObjs, u)
			}
		}
	}
	clusterScoped := chartClusterScoped(t)
	for _, u := range rbacObjs {
		if u.GetKind() != "ClusterRole" {
			continue
		}
		comp := u.GetLabels()["app.kubernetes.io/component"]
		if comp == "webhook" || isUserRole(u.GetName(), "scoped") {
			// The roles for people grant nothing until someone binds them (a tenant's RoleBinding in
			// its namespace); TestUserRoles checks them.
			continue
		}
		for _, rule := range into[rbacv1.ClusterRole](t, u).Rules {
			for _, res := range rule.Resources {
				if !slices.Contains(clusterScoped, res) {
					t.Errorf("%s grants namespaced %s cluster-wide with a watch namespace set", key(u), res)
				}
			}
		}
	}
	for _, c := range []string{"colony-controller", "workspace-controller", "inventory-collector"} {
		for _, ns := range []string{"team-a", "team-b"} {
			if r.get("Role", "scoped-"+c) == nil {
				t.Errorf("%s: no Role in %s", c, ns)
			}
		}
	}
	apply(t, rbacObjs, true)

	cs := kubernetes.NewForConfigOrDie(mgmt.Config)
	can := func(component string, attrs authorizationv1.ResourceAttributes) bool {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               fmt.Sprintf("system:serviceaccount:%s:scoped-%s", releaseNamespace, component),
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNamespace, "system:authenticated"},
			ResourceAttributes: &attrs,
		}}
		res, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview: %v", err)
		}
		return res.Status.Allowed
	}
	res := func(verb, group, resource, ns string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: ns}
	}
	sub := func(a authorizationv1.ResourceAttributes, subresource string) authorizationv1.ResourceAttributes {
		a.Subresource = subresource
		return a
	}
	named := func(a authorizationv1.ResourceAttributes, name string) authorizationv1.ResourceAttributes {
		a.Name = name
		return a
	}
	cases := []struct {
		component string
		attrs     authorizationv1.ResourceAttributes
		allowed   bool
	}{
		{"workspace-controller", res("get", "", "secrets", "team-a"), true},
		{"workspace-controller", res("list", "", "secrets", "team-b"), true},
		{"workspace-controller", res("get", "", "secrets", "kcm-system"), false},
		{"workspace-controller", res("list", "", "secrets", ""), false},
		{"inventory-collector", res("get", "", "secrets", "team-a"), true},
		{"inventory-collector", res("get", "", "secrets", "kcm-system"), false},
		{"colony-controller", res("create", "", "secrets", "team-a"), true},
		{"colony-controller", res("create", "", "secrets", "kcm-system"), false},
		{"colony-controller", res("delete", "k0rdent.mirantis.com", "clusterdeployments", "team-a"), true},
		{"colony-controller", res("delete", "k0rdent.mirantis.com", "clusterdeployments", "kcm-system"), false},
		{"workspace-controller", res("create", "k0rdent.mirantis.com", "servicesets", "team-b"), true},
		{"workspace-controller", res("create", "k0rdent.mirantis.com", "servicesets", "other"), false},
		// The values Secret's owner reference to its ServiceSet sets blockOwnerDeletion, which needs
		// update on the ServiceSet's finalizers.
		{"workspace-controller", sub(res("update", "k0rdent.mirantis.com", "servicesets", "team-a"), "finalizers"), true},
		{"workspace-controller", sub(res("update", "k0rdent.mirantis.com", "servicesets", "other"), "finalizers"), false},
		// Cluster-scoped reads stay cluster-wide.
		{"workspace-controller", res("list", "workspaces.exalsius.ai", "workspaceclasses", ""), true},
		{"workspace-controller", res("get", "", "namespaces", ""), true},
		// A Region is cluster-scoped: a Role in a watched namespace cannot grant it.
		{"colony-controller", named(res("get", "k0rdent.mirantis.com", "regions", ""), "eu"), true},
		{"workspace-controller", named(res("get", "k0rdent.mirantis.com", "regions", ""), "eu"), true},
		{"inventory-collector", named(res("get", "k0rdent.mirantis.com", "regions", ""), "eu"), true},
		// The webhook's own TLS Secret, in the release namespace only.
		{"webhook", named(res("get", "", "secrets", releaseNamespace), "scoped-webhook-tls"), true},
		{"webhook", named(res("update", "", "secrets", releaseNamespace), "scoped-webhook-tls"), true},
		{"webhook", named(res("get", "", "secrets", "team-a"), "scoped-webhook-tls"), false},
		{"webhook", named(res("get", "", "secrets", releaseNamespace), "scoped-colony-controller-token"), false},
		{"webhook", res("list", "", "secrets", releaseNamespace), false},
	}
	for _, c := range cases {
		if got := can(c.component, c.attrs); got != c.allowed {
			t.Errorf("%s %s %s/%s/%s %q in %q: allowed=%v, want %v", c.component, c.attrs.Verb, c.attrs.Group, c.attrs.Resource, c.attrs.Subresource, c.attrs.Name, c.attrs.Namespace, got, c.allowed)
		}
	}
}

// chartClusterScoped reads the chart's list of cluster-scoped resources (eo.clusterScopedResources in
// templates/_helpers.tpl).
func chartClusterScoped(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir(t), "templates", "_helpers.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(data), `{{- define "eo.clusterScopedResources" -}}`+"\n")
	if !ok {
		t.Fatal("eo.clusterScopedResources not found in templates/_helpers.tpl")
	}
	line, _, _ := strings.Cut(after, "\n")
	return strings.Fields(line)
}

// TestClusterScopedResourcesMatchTheAPIServer checks the chart's list of cluster-scoped resources
// against the API server's discovery (k0rdent's CRDs, the Region and SveltosCluster CRDs installed):
// a cluster-scoped resource of a generated rule left out of the list would go to a Role under
// global.watchNamespace, where it grants nothing (Region lookups were Forbidden so), and a
// namespaced one in the list would be granted cluster-wide.
func TestClusterScopedResourcesMatchTheAPIServer(t *testing.T) {
	listed := chartClusterScoped(t)
	dc, err := discovery.NewDiscoveryClientForConfig(mgmt.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	namespaced := map[string]bool{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range l.APIResources {
			if !strings.Contains(res.Name, "/") {
				namespaced[gv.Group+"/"+res.Name] = res.Namespaced
			}
		}
	}
	checked := 0
	for _, c := range components {
		data, err := os.ReadFile(filepath.Join(chartDir(t), "files", "rbac", c+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var generated rbacv1.ClusterRole
		if err := yaml.Unmarshal(data, &generated); err != nil {
			t.Fatal(err)
		}
		for _, rule := range generated.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					base, _, _ := strings.Cut(res, "/")
					ns, served := namespaced[g+"/"+base]
					switch {
					case !served && g == "lib.projectsveltos.io" && !haveSveltos:
						continue // no shared copy of Sveltos' CRD on this machine
					case !served:
						t.Errorf("%s: %s/%s is not served by the test API server", c, g, base)
					case ns && slices.Contains(listed, res):
						t.Errorf("%s: %s/%s is namespaced but eo.clusterScopedResources lists %s", c, g, base, res)
					case !ns && !slices.Contains(listed, res):
						t.Errorf("%s: %s/%s is cluster-scoped but eo.clusterScopedResources lacks %s", c, g, base, res)
					}
					checked++
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no rule checked")
	}
}

// clusterWideSecretRules lists the ClusterRoles (the test hooks' included) with a rule on Secrets,
// but the ClusterRoles <fullname>-<c> of the components in want.
func clusterWideSecretRules(t *testing.T, r rendered, fullname string, want []string) []string {
	t.Helper()
	var out []string
	for _, u := range r.ofKind("ClusterRole") {
		for _, rule := range into[rbacv1.ClusterRole](t, u).Rules {
			if !slices.Contains(rule.APIGroups, "") || !slices.Contains(rule.Resources, "secrets") {
				continue
			}
			comp := u.GetLabels()["app.kubernetes.io/component"]
			if !slices.Contains(want, comp) || u.GetName() != fullname+"-"+comp {
				out = append(out, fmt.Sprintf("%s grants Secrets cluster-wide: %+v", key(u), rule))
			}
		}
	}
	return out
}

func checkClusterWideSecrets(t *testing.T, r rendered, fullname string, want []string) {
	t.Helper()
	for _, e := range clusterWideSecretRules(t, r, fullname, want) {
		t.Error(e)
	}
}

// chartField reads a top-level scalar of Chart.yaml.
func chartField(t *testing.T, field string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir(t), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(m[field])
}

func chartAppVersion(t *testing.T) string { return chartField(t, "appVersion") }

// helmTemplateNS renders the chart into another release namespace.
func helmTemplateNS(t *testing.T, ns string) ([]byte, error) {
	t.Helper()
	out, err := helmRaw(t, "template", releaseName, chartDir(t), "--namespace", ns, "--kube-version", kubeVersion)
	return out, err
}

// TestServiceAccountNameIsRequired: a component whose ServiceAccount the chart does not create must
// name one; rendering fails, naming the value, instead of running and binding the release
// namespace's default ServiceAccount. A named one is what the pod runs as and what every binding
// names.
func TestServiceAccountNameIsRequired(t *testing.T) {
	for _, c := range components {
		_, err := helmTemplate(t, "--set", c+".serviceAccount.create=false")
		if err == nil || !strings.Contains(err.Error(), c+".serviceAccount.name") {
			t.Errorf("%s without a ServiceAccount: want an error naming %s.serviceAccount.name, got %v", c, c, err)
		}
	}
	r := render(t, "--set", "colony-controller.serviceAccount.create=false", "--set", "colony-controller.serviceAccount.name=platform-colonies")
	if sa := r.get("ServiceAccount", "exalsius-operator-colony-controller"); sa != nil {
		t.Errorf("serviceAccount.create=false still renders %s", key(sa))
	}
	if got := podSpecOf(t, r.get("Deployment", "exalsius-operator-colony-controller")).Spec.ServiceAccountName; got != "platform-colonies" {
		t.Errorf("colony-controller runs as %q, want platform-colonies", got)
	}
	bindings := 0
	for _, u := range append(r.ofKind("ClusterRoleBinding"), r.ofKind("RoleBinding")...) {
		b := into[rbacv1.RoleBinding](t, u)
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && s.Name == "default" {
				t.Errorf("%s binds the default ServiceAccount", key(u))
			}
		}
		if u.GetLabels()["app.kubernetes.io/component"] == "colony-controller" {
			bindings++
			if len(b.Subjects) != 1 || b.Subjects[0].Name != "platform-colonies" || b.Subjects[0].Namespace != releaseNamespace {
				t.Errorf("%s binds %+v, want platform-colonies", key(u), b.Subjects)
			}
		}
	}
	if bindings == 0 {
		t.Error("no binding of colony-controller rendered")
	}
}

// TestFailedHelmTestLeavesNothingBehind: every `helm test` object (its ServiceAccount, the grants and
// the Pod) is deleted when the test fails as well as when it passes, so that no grant outlives it,
// and helm prints a failed test pod's log before deleting it.
func TestFailedHelmTestLeavesNothingBehind(t *testing.T) {
	hooks := 0
	for _, u := range render(t) {
		if u.GetAnnotations()["helm.sh/hook"] != "test" {
			continue
		}
		hooks++
		if u.GetKind() == "Pod" && u.GetAnnotations()["helm.sh/hook-output-log-policy"] != "hook-failed" {
			t.Errorf("%s: a failed test's log would be lost with the pod: no hook-output-log-policy hook-failed", key(u))
		}
		policy := strings.Split(u.GetAnnotations()["helm.sh/hook-delete-policy"], ",")
		for _, want := range []string{"hook-succeeded", "hook-failed", "before-hook-creation"} {
			if !slices.Contains(policy, want) {
				t.Errorf("%s: hook-delete-policy %v lacks %s", key(u), policy, want)
			}
		}
	}
	if hooks == 0 {
		t.Fatal("no helm test objects rendered")
	}
}
