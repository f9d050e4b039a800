package suites

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/names"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// TestTwoTenantsShareAName: a platform namespace offers one cluster, behind a regional Gateway, to two
// tenant namespaces. Each tenant, an impersonated user bound only to the chart's edit role, runs a
// workspace `notebook` there: both run, each in its own release namespace on the child, each with its
// own URL. A tenant that names a workspace after the other namespace's qualified hostname
// (`notebook-<qualifier of B>`) does not take it: B's `notebook` still gets it. The platform caps A's
// SSH and TCP endpoints with a WorkspaceQuota: A's second workspace gets no port and says why, and A
// cannot raise the cap.
func TestTwoTenantsShareAName(t *testing.T) {
	localOnly(t, "a regional cluster of the local world with the simulator as its Gateway controller")
	const domain = "shared.exalsius.localhost"
	var platform, nsA, nsB string
	var child *childCluster
	tenants := map[string]client.Client{}
	f := features.New("two tenants, one workspace name, one shared cluster").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			platform = newNamespace(ctx, t, "platform")
			nsA, nsB = newNamespace(ctx, t, "tenant-a"), newNamespace(ctx, t, "tenant-b")
			grantWorkspacesFrom(ctx, t, platform, nsA+","+nsB)
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", platform)
			one := int32(1)
			mustCreate(ctx, t, &k0rdentv1beta1.ClusterDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "regional",
					Labels:      map[string]string{k0rdentsim.KOFClusterRoleLabel: "regional"},
					Annotations: map[string]string{k0rdentsim.KOFRegionalDomainAnnot: domain}},
				Spec: k0rdentv1beta1.ClusterDeploymentSpec{Template: k0rdentsim.ClusterTemplateName, Credential: k0rdentsim.CredentialName,
					Config: jsonOf(t, w.ClusterConfig{Nodes: []w.NodePool{{Name: "cpu", Count: &one, CPU: "8", Memory: "32Gi"}}})},
			})
			waitChild(ctx, t, platform, "regional")
			mustCreate(ctx, t, &k0rdentv1beta1.ClusterDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "shared", Labels: map[string]string{"k0rdent.mirantis.com/kof-regional-cluster-name": "regional"}},
				Spec: k0rdentv1beta1.ClusterDeploymentSpec{Template: k0rdentsim.ClusterTemplateName, Credential: k0rdentsim.CredentialName,
					Config: jsonOf(t, w.ClusterConfig{Nodes: []w.NodePool{{Name: "cpu", Count: &one, CPU: "16", Memory: "64Gi"}}})},
			})
			child = waitChild(ctx, t, platform, "shared")
			class := notebookClass("e2e-shared-names-"+platform, notebookTemplate, 0, "")
			class.Spec.AccessEndpoints = []workspacesv1.AccessEndpoint{{Name: "notebook", Protocol: workspacesv1.EndpointProtocolHTTP, Port: 8888},
				{Name: "ssh", Protocol: workspacesv1.EndpointProtocolSSH, Port: 22}}
			createClass(ctx, t, class)
			// The platform caps tenant A at one SSH or TCP endpoint of the shared port pool.
			one32 := int32(1)
			mustCreate(ctx, t, &workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "ports"},
				Spec: workspacesv1.WorkspaceQuotaSpec{TCPEndpoints: &one32}})
			editTenants(ctx, t, tenants, nsA, nsB)
			return ctx
		}).
		Assess("both tenants' notebooks run, each in its own release namespace with its own URL", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			class := "e2e-shared-names-" + platform
			create := func(ns, name string) {
				t.Helper()
				ws := workspace(ns, name, class, "shared", nil)
				ws.Spec.ClusterDeploymentRef.Namespace = platform
				if err := tenants[ns].Create(ctx, ws); err != nil {
					t.Fatalf("tenant %s creates workspace %s: %v", ns, name, err)
				}
			}
			qA, qB := names.NamespaceQualifier(nsA), names.NamespaceQualifier(nsB)
			squat := "notebook-" + qB

			create(nsA, "notebook")
			a := tenantRoutedURL(ctx, t, tenants[nsA], nsA, "notebook", "https://notebook."+domain)
			create(nsA, squat)
			tenantHTTPURL(ctx, t, tenants[nsA], nsA, squat, "https://"+squat+"-"+qA+"."+domain, func(ssh workspacesv1.AccessStatus) (bool, string) {
				// A's second workspace is past A's cap of one port: no port, and it says why.
				return ssh.URL == "" && strings.Contains(ssh.Message, "WorkspaceQuota allows 1 SSH and TCP endpoints"), fmt.Sprintf("ssh %+v", ssh)
			})
			create(nsB, "notebook")
			b := tenantRoutedURL(ctx, t, tenants[nsB], nsB, "notebook", "https://notebook-"+qB+"."+domain)
			if a.Status.Access[1].URL == "" || b.Status.Access[1].URL == "" || a.Status.Access[1].URL == b.Status.Access[1].URL {
				t.Errorf("SSH URLs %q and %q: want two ports", a.Status.Access[1].URL, b.Status.Access[1].URL)
			}
			eventually(ctx, t, "tenant A reads its port use", workspaceTimeout, func(ctx context.Context) (bool, string) {
				var q workspacesv1.WorkspaceQuota
				if err := tenants[nsA].Get(ctx, types.NamespacedName{Namespace: nsA, Name: "ports"}, &q); err != nil {
					return false, err.Error()
				}
				return q.Status.TCPEndpoints == 1 && strings.Contains(q.Status.Summary, "tcp endpoints 1/1"), "status " + q.Status.Summary
			})
			// The cap is the platform's: the tenant cannot raise it.
			var q workspacesv1.WorkspaceQuota
			if err := tenants[nsA].Get(ctx, types.NamespacedName{Namespace: nsA, Name: "ports"}, &q); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(q.DeepCopy())
			more := int32(5)
			q.Spec.TCPEndpoints = &more
			wantForbidden(t, "the tenant raises its port cap", tenants[nsA].Patch(ctx, &q, patch))

			if a.Status.ReleaseNamespace == b.Status.ReleaseNamespace || !strings.HasPrefix(a.Status.ReleaseNamespace, "wst-notebook-") ||
				!strings.HasPrefix(b.Status.ReleaseNamespace, "wst-notebook-") {
				t.Fatalf("release namespaces %q and %q: want two of the form wst-notebook-<qualifier>", a.Status.ReleaseNamespace, b.Status.ReleaseNamespace)
			}
			for _, ws := range []*workspacesv1.WorkspaceDeployment{a, b} {
				release(t, child, ws)
				eventually(ctx, t, "a Running pod of "+ws.Namespace+"/notebook in "+ws.Status.ReleaseNamespace, workspaceTimeout, func(ctx context.Context) (bool, string) {
					var pods corev1.PodList
					if err := child.Client().List(ctx, &pods, client.InNamespace(ws.Status.ReleaseNamespace)); err != nil {
						return false, err.Error()
					}
					var states []string
					for _, p := range pods.Items {
						if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
							return true, ""
						}
						states = append(states, p.Name+"="+string(p.Status.Phase))
					}
					return false, strings.Join(states, ", ")
				})
				var ns corev1.Namespace
				if err := child.Client().Get(ctx, types.NamespacedName{Name: ws.Status.ReleaseNamespace}, &ns); err != nil {
					t.Fatal(err)
				}
				if ns.Labels[workspacesv1.WorkspaceNamespaceLabel] != ws.Namespace || ns.Labels[workspacesv1.WorkspaceUIDLabel] != string(ws.UID) {
					t.Errorf("namespace %s labels %v do not name %s/%s", ns.Name, ns.Labels, ws.Namespace, ws.Name)
				}
				// The other tenant's workspace on the shared child cannot reach this one: only the
				// namespace itself and the data planes may.
				var np networkingv1.NetworkPolicy
				if err := child.Client().Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: "workspace-ingress"}, &np); err != nil {
					t.Errorf("the NetworkPolicy of %s: %v", ns.Name, err)
				} else if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) == 0 || np.Spec.Ingress[0].From[0].PodSelector == nil {
					t.Errorf("the NetworkPolicy of %s admits %+v", ns.Name, np.Spec.Ingress)
				}
				var q corev1.ResourceQuota
				if err := child.Client().Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: "workspace-gpus"}, &q); err != nil {
					t.Errorf("the quota of %s: %v", ns.Name, err)
				} else if c, ok := q.Spec.Hard["count/resourceclaims.resource.k8s.io"]; !ok || !c.IsZero() {
					t.Errorf("the quota of %s lets ResourceClaims in: %v", ns.Name, q.Spec.Hard)
				}
			}

			for _, k := range []types.NamespacedName{{Namespace: nsA, Name: "notebook"}, {Namespace: nsA, Name: squat}, {Namespace: nsB, Name: "notebook"}} {
				ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
				if err := tenants[k.Namespace].Delete(ctx, ws); err != nil {
					t.Fatalf("tenant %s deletes %s: %v", k.Namespace, k.Name, err)
				}
				deleteAndWait(ctx, t, ws, workspaceTimeout)
			}
			return ctx
		}).Feature()
	testEnv.Test(t, f)
}

// tenantRoutedURL waits, reading as the tenant, until its workspace is Running with every route ready
// and its first URL is url.
func tenantRoutedURL(ctx context.Context, t *testing.T, tc client.Client, ns, name, url string) *workspacesv1.WorkspaceDeployment {
	t.Helper()
	var ws workspacesv1.WorkspaceDeployment
	eventually(ctx, t, fmt.Sprintf("%s/%s Running at %s", ns, name, url), workspaceTimeout, func(ctx context.Context) (bool, string) {
		if err := tc.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &ws); err != nil {
			return false, err.Error()
		}
		if ok, state := routesReadyState(&ws); !ok {
			return false, state
		}
		return ws.Status.Phase == workspacesv1.PhaseRunning && ws.Status.Access[0].URL == url,
			fmt.Sprintf("phase %s, access %+v", ws.Status.Phase, ws.Status.Access)
	})
	return &ws
}

// tenantHTTPURL waits, reading as the tenant, until its workspace is Running, its first (HTTP) URL is
// url and serves, and sshOK accepts its second entry.
func tenantHTTPURL(ctx context.Context, t *testing.T, tc client.Client, ns, name, url string, sshOK func(workspacesv1.AccessStatus) (bool, string)) {
	t.Helper()
	eventually(ctx, t, fmt.Sprintf("%s/%s Running at %s", ns, name, url), workspaceTimeout, func(ctx context.Context) (bool, string) {
		var ws workspacesv1.WorkspaceDeployment
		if err := tc.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &ws); err != nil {
			return false, err.Error()
		}
		if ws.Status.Phase != workspacesv1.PhaseRunning || len(ws.Status.Access) != 2 || !ws.Status.Access[0].Ready || ws.Status.Access[0].URL != url {
			return false, fmt.Sprintf("phase %s, access %+v", ws.Status.Phase, ws.Status.Access)
		}
		return sshOK(ws.Status.Access[1])
	})
}

// editTenants makes, for each namespace, an impersonated tenant bound only to the chart's edit role
// there, into tenants.
func editTenants(ctx context.Context, t *testing.T, tenants map[string]client.Client, nss ...string) {
	t.Helper()
	for _, ns := range nss {
		tc, err := testenv.TenantBoundTo(ctx, mgmt(), tgt.Config(), ns, "tenant-"+ns, chartEditRole, rbacv1.PolicyRule{
			APIGroups: []string{workspacesv1.GroupVersion.Group}, Resources: []string{"workspacedeployments"}, Verbs: []string{"create"}})
		if err != nil {
			t.Fatal(err)
		}
		tenants[ns] = tc
	}
}

// grantWorkspacesFrom lets the workspaces of the listed namespaces (comma-separated) target the
// ClusterDeployments of ns.
func grantWorkspacesFrom(ctx context.Context, t *testing.T, ns, from string) {
	t.Helper()
	var n corev1.Namespace
	if err := mgmt().Get(ctx, types.NamespacedName{Name: ns}, &n); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[workspacesv1.AllowWorkspacesFromAnnotation] = from
	if err := mgmt().Patch(ctx, &n, patch); err != nil {
		t.Fatal(err)
	}
}
