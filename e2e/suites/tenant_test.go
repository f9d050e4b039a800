package suites

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/common/testing/tlsrecorder"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// tenant returns a client acting as a tenant of ns, bound only to a namespaced Role with rules.
func tenant(ctx context.Context, t *testing.T, ns string, rules []rbacv1.PolicyRule) client.Client {
	t.Helper()
	c, err := testenv.Tenant(ctx, mgmt(), tgt.Config(), ns, "tenant-"+ns, rules)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTenantCannotRedirectTheOperatorsCredentials: the attack of a tenant who may write Secrets and
// workspaces in its namespace. It writes the kubeconfig Secret of a ClusterDeployment in its
// namespace (a dry run: nothing else writes that Secret) aimed at a TLS server it runs, with
// `tokenFile` naming a file on the components' host (in a pod, the ServiceAccount token), and puts a
// workspace on that cluster. The workspace reports the refused field, and the tenant's server sees no
// connection: the components sent nothing, their own credentials least of all.
func TestTenantCannotRedirectTheOperatorsCredentials(t *testing.T) {
	localOnly(t, "the tenant's server listens on this machine's loopback")
	var ns string
	f := features.New("a tenant's kubeconfig Secret cannot steer the operator").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "tenant-kc")
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			createClass(ctx, t, notebookClass("e2e-tenant-"+ns, notebookTemplate, 0, ""))
			return ctx
		}).
		Assess("tokenFile to the tenant's server: refused, nothing sent", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			rec := tlsrecorder.New(t)
			const operatorToken = "e2e-operator-token-7c2b"
			tokenFile := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(tokenFile, []byte(operatorToken), 0o600); err != nil {
				t.Fatal(err)
			}
			mustCreate(ctx, t, &k0rdentv1beta1.ClusterDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lure"},
				Spec:       k0rdentv1beta1.ClusterDeploymentSpec{Template: clusterTemplateName, Credential: credentialName, DryRun: true},
			})
			tc := tenant(ctx, t, ns, []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "get", "update"}},
				{APIGroups: []string{workspacesv1.GroupVersion.Group}, Resources: []string{"workspacedeployments"}, Verbs: []string{"create", "get", "delete"}},
			})
			data := rec.Kubeconfig(t, &clientcmdapi.AuthInfo{TokenFile: tokenFile})
			if err := tc.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: k0rdentv1beta1.KubeconfigSecretName("lure"),
					Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "lure"}},
				Type: "cluster.x-k8s.io/secret",
				Data: map[string][]byte{k0rdentv1beta1.KubeconfigSecretKey: data},
			}); err != nil {
				t.Fatalf("the tenant writes the kubeconfig Secret: %v", err)
			}
			if err := tc.Create(ctx, workspace(ns, "bait", "e2e-tenant-"+ns, "lure", nil)); err != nil {
				t.Fatalf("the tenant creates a workspace: %v", err)
			}
			eventually(ctx, t, "the workspace names the refused kubeconfig field", workspaceTimeout, func(ctx context.Context) (bool, string) {
				var ws workspacesv1.WorkspaceDeployment
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "bait"}, &ws); err != nil {
					return false, err.Error()
				}
				for _, c := range ws.Status.Conditions {
					if strings.Contains(c.Message, "user.tokenFile") {
						if strings.Contains(c.Message, operatorToken) || strings.Contains(c.Message, tokenFile) {
							t.Errorf("the condition quotes the kubeconfig: %q", c.Message)
						}
						return true, ""
					}
				}
				return false, string(ws.Status.Phase) + ": " + ws.Status.Message
			})
			if conns, creds := rec.Seen(); conns != 0 {
				t.Fatalf("the tenant's server was reached: %d connections, credentials %q", conns, creds)
			}
			// Clean up: the cluster first, so that the workspace's deletion does not wait for a child
			// it can never reach.
			deleteAndWait(ctx, t, &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lure"}}, clusterTimeout)
			deleteAndWait(ctx, t, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bait"}}, workspaceTimeout)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// TestTenantCannotReachBeyondItsNamespace: the webhook's half of the trust boundary, on the local
// world's real webhook, for a tenant bound to a namespaced Role that may write WorkspaceDeployments and
// Colonies and nothing else: it may not pin the adoption annotations (they name a ServiceSet the
// controller would take over), may not have the operator copy a Secret it cannot read (valuesFrom),
// and may not publish its routes on another team's regional cluster (KOF labels of a Colony).
func TestTenantCannotReachBeyondItsNamespace(t *testing.T) {
	var ns, other, class string
	var tc client.Client
	f := features.New("a tenant cannot use the operator's rights beyond its namespace").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "tenant-ws")
			other = newNamespace(ctx, t, "tenant-other")
			class = "e2e-tenant-ws-" + ns
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			createClass(ctx, t, notebookClass(class, notebookTemplate, 0, ""))
			tc = tenant(ctx, t, ns, []rbacv1.PolicyRule{
				{APIGroups: []string{workspacesv1.GroupVersion.Group}, Resources: []string{"workspacedeployments"}, Verbs: []string{"create", "get", "update", "delete"}},
				{APIGroups: []string{infrav1.GroupVersion.Group}, Resources: []string{"colonies"}, Verbs: []string{"create", "get", "delete"}},
			})
			return ctx
		}).
		Assess("the adoption annotations are the controller's", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ws := workspace(ns, "pinned", class, "gpu", nil)
			ws.Annotations = map[string]string{workspacesv1.ServiceSetNameAnnotation: "gpu"}
			wantDenied(t, tc.Create(ctx, ws), "metadata.annotations["+workspacesv1.ServiceSetNameAnnotation+"]")
			return ctx
		}).
		Assess("valuesFrom names only what the tenant may read", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			mustCreate(ctx, t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "platform-token"},
				StringData: map[string]string{"values.yaml": "token: e2e-platform-secret"}})
			ws := workspace(ns, "reader", class, "gpu", nil)
			ws.Spec.ValuesFrom = []workspacesv1.ValuesFromSource{{Kind: workspacesv1.ValuesSourceSecret, Name: "platform-token"}}
			err := tc.Create(ctx, ws)
			wantDenied(t, err, "spec.valuesFrom[0]")
			if strings.Contains(err.Error(), "e2e-platform-secret") {
				t.Errorf("the denial quotes the Secret: %v", err)
			}
			return ctx
		}).
		Assess("values nested past the depth limit are denied, not parsed by the shared controller", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var deep any = "e2e-deep-leaf"
			for range 5000 {
				deep = map[string]any{"a": deep}
			}
			ws := workspace(ns, "deep", class, "gpu", nil)
			ws.Spec.Values = jsonOf(t, deep)
			err := tc.Create(ctx, ws)
			wantDenied(t, err, "spec.values")
			if !strings.Contains(err.Error(), "depth limit") || strings.Contains(err.Error(), "e2e-deep-leaf") {
				t.Errorf("the denial does not name the depth limit, or quotes the values: %.300s", err)
			}
			return ctx
		}).
		Assess("a Colony cannot name another team's regional cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			entry := cpuColonyEntry(t, "c")
			entry.ClusterLabels = map[string]string{
				k0rdentv1beta1.KOFRegionalClusterNameLabel:      "regional",
				k0rdentv1beta1.KOFRegionalClusterNamespaceLabel: other,
			}
			err := tc.Create(ctx, &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lab"},
				Spec: infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{entry}}})
			wantDenied(t, err, "clusterLabels["+k0rdentv1beta1.KOFRegionalClusterNamespaceLabel+"]")
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// wantDenied fails unless err is the webhook's denial naming path.
func wantDenied(t *testing.T, err error, path string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "denied the request") || !strings.Contains(err.Error(), path) {
		t.Fatalf("want the webhook's denial naming %s, got %v", path, err)
	}
}

// upstreamFinalizer is the finalizer the upstream operator put on WorkspaceDeployments; a tenant can
// write it like any finalizer.
const upstreamFinalizer = "workspaces.exalsius.ai/deployment"

// TestTenantCannotDeleteWhatIsNotItsOwn: what a workspace's deletion removes is decided by labels
// the controller wrote, not by names a tenant can choose. On a shared child, a tenant's workspace
// named like a platform team's unlabelled namespace neither adopts nor deletes it; after the platform
// revokes a grant, a tenant's workspace named like another team's upstream workspace, carrying the
// upstream finalizer, does not delete that team's upstream ServiceSet.
func TestTenantCannotDeleteWhatIsNotItsOwn(t *testing.T) {
	var ns, other string
	var tc client.Client
	f := features.New("a tenant's deletion removes only what is its own").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "tenant-del")
			other = newNamespace(ctx, t, "tenant-del-other")
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns, other)
			createClass(ctx, t, notebookClass("e2e-tenant-del-"+ns, notebookTemplate, 0, ""))
			tc = tenant(ctx, t, ns, []rbacv1.PolicyRule{
				{APIGroups: []string{workspacesv1.GroupVersion.Group}, Resources: []string{"workspacedeployments"}, Verbs: []string{"create", "get", "update", "delete"}},
			})
			return ctx
		}).
		Assess("an unlabelled ws-<name> on the child is neither adopted nor deleted", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			child := createClusterDeployment(ctx, t, ns, "shared", w.ClusterConfig{})
			theirs := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ws-platform", Labels: map[string]string{"team": "platform"}}}
			if err := child.Client().Create(ctx, theirs); err != nil {
				t.Fatal(err)
			}
			if err := tc.Create(ctx, workspace(ns, "platform", "e2e-tenant-del-"+ns, "shared", nil)); err != nil {
				t.Fatal(err)
			}
			ws := waitPhase(ctx, t, ns, "platform", workspaceTimeout, workspacesv1.PhaseFailed)
			if c := condition(t, ws, workspacesv1.ReadyCondition); c.Reason != workspacesv1.ReasonReleaseNamespaceConflict {
				t.Fatalf("Ready %s (%s), want ReleaseNamespaceConflict", c.Reason, c.Message)
			}
			deleteAndWait(ctx, t, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "platform"}}, workspaceTimeout)
			got := &corev1.Namespace{}
			if err := child.Client().Get(ctx, types.NamespacedName{Name: "ws-platform"}, got); err != nil || !got.DeletionTimestamp.IsZero() {
				t.Fatalf("the platform team's namespace was deleted (err %v)", err)
			}
			if got.Labels[workspacesv1.WorkspaceLabel] != "" {
				t.Fatalf("the platform team's namespace was adopted: %v", got.Labels)
			}
			return ctx
		}).
		Assess("after a revoked grant, another team's upstream ServiceSet survives the tenant's deletion", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			setGrant := func(value string) {
				var n corev1.Namespace
				if err := mgmt().Get(ctx, types.NamespacedName{Name: other}, &n); err != nil {
					t.Fatal(err)
				}
				patch := client.MergeFrom(n.DeepCopy())
				if n.Annotations == nil {
					n.Annotations = map[string]string{}
				}
				if value == "" {
					delete(n.Annotations, workspacesv1.AllowWorkspacesFromAnnotation)
				} else {
					n.Annotations[workspacesv1.AllowWorkspacesFromAnnotation] = value
				}
				if err := mgmt().Patch(ctx, &n, patch); err != nil {
					t.Fatal(err)
				}
			}
			setGrant(ns)
			mustCreate(ctx, t, &k0rdentv1beta1.ClusterDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "theirs"},
				Spec:       k0rdentv1beta1.ClusterDeploymentSpec{Template: clusterTemplateName, Credential: credentialName, DryRun: true},
			})
			ws := workspace(ns, "legacy", "e2e-tenant-del-"+ns, "theirs", nil)
			ws.Spec.ClusterDeploymentRef.Namespace = other
			ws.Finalizers = []string{upstreamFinalizer}
			if err := tc.Create(ctx, ws); err != nil {
				t.Fatal(err)
			}
			setGrant("")
			eventually(ctx, t, "the workspace sees the grant revoked", workspaceTimeout, func(ctx context.Context) (bool, string) {
				var cur workspacesv1.WorkspaceDeployment
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "legacy"}, &cur); err != nil {
					return false, err.Error()
				}
				for _, c := range cur.Status.Conditions {
					if c.Type == workspacesv1.ClusterDeploymentResolvedCondition && c.Reason == workspacesv1.ReasonNamespaceNotAllowed {
						return true, ""
					}
				}
				return false, string(cur.Status.Phase) + ": " + cur.Status.Message
			})
			upstream := &k0rdentv1beta1.ServiceSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "wsd-theirs-legacy"},
				Spec: k0rdentv1beta1.ServiceSetSpec{
					Cluster:  "theirs",
					Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
					Services: []k0rdentv1beta1.ServiceWithValues{{Name: "wsd-theirs-legacy", Namespace: "ws-legacy", Template: notebookTemplate}},
				},
			}
			mustCreate(ctx, t, upstream)
			deleteAndWait(ctx, t, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy"}}, workspaceTimeout)
			got := &k0rdentv1beta1.ServiceSet{}
			if err := mgmt().Get(ctx, client.ObjectKeyFromObject(upstream), got); err != nil || !got.DeletionTimestamp.IsZero() {
				t.Fatalf("the other team's upstream ServiceSet was deleted (err %v)", err)
			}
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
