package server_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// tenantClient returns a client that acts as user, bound by a Role in ns to write Colonies there
// and nothing else.
func tenantClient(t *testing.T, ns, user string) client.Client {
	t.Helper()
	ctx := context.Background()
	must(t, mgmt.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "colony-author"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{infrav1.GroupVersion.Group}, Resources: []string{"colonies"},
			Verbs: []string{"get", "list", "create", "update", "patch"}}}}))
	must(t, mgmt.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "colony-author"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "colony-author"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}))
	cfg := rest.CopyConfig(mgmt.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: mgmt.Scheme})
	must(t, err)
	return c
}

// A Colony whose clusterLabels name, through KOF's labels, a regional cluster in another tenant's
// namespace is refused unless that namespace allows the Colony's; the grant lets it in at once.
func TestColonyRegionalClusterTenancy(t *testing.T) {
	ctx := context.Background()
	nsA, nsB := "regional-tenant-a", "regional-tenant-b"
	for _, ns := range []string{nsA, nsB} {
		must(t, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	tenant := tenantClient(t, nsA, "alice")
	entry := func(name, regionalNS string) infrav1.ColonyCluster {
		labels := map[string]string{"tier": "gpu", k0rdentv1beta1.KOFRegionalClusterNameLabel: "regional"}
		if regionalNS != "" {
			labels[k0rdentv1beta1.KOFRegionalClusterNamespaceLabel] = regionalNS
		}
		return infrav1.ColonyCluster{ClusterName: name, ClusterLabels: labels,
			ClusterDeploymentSpec: *jsonOf(map[string]any{"template": "hcp-0-1-0"})}
	}
	const path = "spec.colonyClusters[0].clusterLabels[" + k0rdentv1beta1.KOFRegionalClusterNamespaceLabel + "]"

	// A regional cluster in the Colony's own namespace needs no grant.
	own := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "own"},
		Spec: infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{entry("gpu", ""), entry("cpu", nsA)}}}
	must(t, tenant.Create(ctx, own))

	// Tenant B's namespace does not allow tenant A: refused, naming the field and the rule.
	c := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "lab"},
		Spec: infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{entry("gpu", nsB)}}}
	err := tenant.Create(ctx, c)
	denied(t, err, path)
	if !strings.Contains(err.Error(), workspacesv1.AllowWorkspacesFromAnnotation) || !strings.Contains(err.Error(), nsB) {
		t.Fatalf("the denial names neither the annotation nor %s: %v", nsB, err)
	}

	// Tenant B's admin grants it: the same Colony is admitted.
	n := &corev1.Namespace{}
	must(t, mgmt.Client.Get(ctx, client.ObjectKey{Name: nsB}, n))
	n.Annotations = map[string]string{workspacesv1.AllowWorkspacesFromAnnotation: "team-z, " + nsA}
	must(t, mgmt.Client.Update(ctx, n))
	must(t, tenant.Create(ctx, c))

	// Revoked: an update that keeps the admitted reference passes (the workspace-controller checks it
	// on every pass); a new reference to the namespace is refused.
	n.Annotations = nil
	must(t, mgmt.Client.Update(ctx, n))
	must(t, tenant.Get(ctx, client.ObjectKeyFromObject(c), c))
	c.Spec.ColonyClusters[0].ClusterLabels["tier"] = "gpu-large"
	must(t, tenant.Update(ctx, c))
	c.Spec.ColonyClusters = append(c.Spec.ColonyClusters, entry("more", nsB))
	denied(t, tenant.Update(ctx, c), "spec.colonyClusters[1].clusterLabels["+k0rdentv1beta1.KOFRegionalClusterNamespaceLabel+"]")
}
