package suites

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// routesReadyState reports whether every access entry of the workspace is ready with RoutesReady
// True, and describes the state otherwise.
func routesReadyState(ws *workspacesv1.WorkspaceDeployment) (bool, string) {
	var rr *metav1.Condition
	for i := range ws.Status.Conditions {
		if ws.Status.Conditions[i].Type == workspacesv1.RoutesReadyCondition {
			rr = &ws.Status.Conditions[i]
		}
	}
	if rr == nil || rr.Status != metav1.ConditionTrue {
		return false, fmt.Sprintf("phase %s, RoutesReady %+v, access %+v", ws.Status.Phase, rr, ws.Status.Access)
	}
	for _, a := range ws.Status.Access {
		if !a.Ready {
			return false, fmt.Sprintf("access %+v", ws.Status.Access)
		}
	}
	return true, ""
}

// routeNamespace is workspace rt's route namespace on the regional cluster: wsr-<name>, never its
// release namespace ws-<name> (docs/ROUTING.md).
const routeNamespace = "wsr-rt"

// TestRouting runs a class with two HTTP endpoints and one SSH endpoint on a child whose regional
// cluster (KOF's label) carries the tenant Gateway: the URLs serve, the SSH endpoint holds a pool
// port, and deletion removes the routes (freeing the port) before the release.
func TestRouting(t *testing.T) {
	localOnly(t, "a regional cluster of the local world with the simulator as its Gateway controller")
	const domain = "routing.exalsius.localhost"
	var ns string
	var regional client.Client
	f := features.New("routing through the regional Gateway").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "route")
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			one := int32(1)
			reg := &k0rdentv1beta1.ClusterDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regional",
					Labels:      map[string]string{k0rdentsim.KOFClusterRoleLabel: "regional"},
					Annotations: map[string]string{k0rdentsim.KOFRegionalDomainAnnot: domain}},
				Spec: k0rdentv1beta1.ClusterDeploymentSpec{Template: k0rdentsim.ClusterTemplateName, Credential: k0rdentsim.CredentialName,
					Config: jsonOf(t, w.ClusterConfig{Nodes: []w.NodePool{{Name: "cpu", Count: &one, CPU: "8", Memory: "32Gi"}}})},
			}
			mustCreate(ctx, t, reg)
			rc, err := waitChild(ctx, t, ns, "regional").local.RegionalClient()
			if err != nil {
				t.Fatal(err)
			}
			regional = rc
			work := &k0rdentv1beta1.ClusterDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work", Labels: map[string]string{"k0rdent.mirantis.com/kof-regional-cluster-name": "regional"}},
				Spec: k0rdentv1beta1.ClusterDeploymentSpec{Template: k0rdentsim.ClusterTemplateName, Credential: k0rdentsim.CredentialName,
					Config: jsonOf(t, w.ClusterConfig{Nodes: []w.NodePool{{Name: "cpu", Count: &one, CPU: "16", Memory: "64Gi"}}})},
			}
			mustCreate(ctx, t, work)
			waitChild(ctx, t, ns, "work")
			return ctx
		}).
		Assess("two HTTP URLs and an SSH port serve", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			class := notebookClass("e2e-routing-"+ns, notebookTemplate, 0, "")
			class.Spec.AccessEndpoints = []workspacesv1.AccessEndpoint{
				{Name: "notebook", Protocol: workspacesv1.EndpointProtocolHTTP, Port: 8888},
				{Name: "api", Protocol: workspacesv1.EndpointProtocolHTTP, Port: 8000},
				{Name: "ssh", Protocol: workspacesv1.EndpointProtocolSSH, Port: 22},
			}
			createClass(ctx, t, class)
			mustCreate(ctx, t, workspace(ns, "rt", class.Name, "work", nil))
			waitPhase(ctx, t, ns, "rt", workspaceTimeout, workspacesv1.PhaseRunning)
			var ws workspacesv1.WorkspaceDeployment
			eventually(ctx, t, "routes ready", 2*time.Minute, func(ctx context.Context) (bool, string) {
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "rt"}, &ws); err != nil {
					return false, err.Error()
				}
				return routesReadyState(&ws)
			})
			want := []string{"https://rt." + domain, "https://rt-api." + domain, fmt.Sprintf("ssh://%s:%d", domain, w.TCPPoolFirstPort)}
			for i, u := range want {
				if ws.Status.Access[i].URL != u {
					t.Errorf("access[%d] URL %q, want %q", i, ws.Status.Access[i].URL, u)
				}
			}
			out, err := kubectl(ctx, "get", "wsd", "-n", ns, "rt")
			if err != nil || !strings.Contains(out, "https://rt."+domain) {
				t.Errorf("kubectl get wsd shows no URL (%v):\n%s", err, out)
			}
			var hr gwv1.HTTPRoute
			if err := regional.Get(ctx, types.NamespacedName{Namespace: routeNamespace, Name: "notebook"}, &hr); err != nil {
				t.Fatalf("the notebook's HTTPRoute on the regional cluster: %v", err)
			}
			if string(hr.Spec.Rules[0].BackendRefs[0].Name) != "rt-notebook" {
				t.Errorf("HTTPRoute backend %s, want the mirror of the chart's Service rt-notebook", hr.Spec.Rules[0].BackendRefs[0].Name)
			}
			return ctx
		}).
		Assess("deletion removes the routes, then the release", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rt"}}
			deleteAndWait(ctx, t, ws, workspaceTimeout)
			// The workspace is gone only after its routes, then its ServiceSet (the release).
			if err := regional.Get(ctx, types.NamespacedName{Namespace: routeNamespace, Name: "ssh"}, &gwv1.TCPRoute{}); !apierrors.IsNotFound(err) {
				t.Errorf("the TCPRoute (the port) is left on the regional cluster: %v", err)
			}
			if err := regional.Get(ctx, types.NamespacedName{Namespace: routeNamespace, Name: "notebook"}, &gwv1.HTTPRoute{}); !apierrors.IsNotFound(err) {
				t.Errorf("an HTTPRoute is left on the regional cluster: %v", err)
			}
			eventually(ctx, t, "route namespace "+routeNamespace+" gone from the regional cluster", time.Minute, func(ctx context.Context) (bool, string) {
				err := regional.Get(ctx, types.NamespacedName{Name: routeNamespace}, &corev1.Namespace{})
				return apierrors.IsNotFound(err), fmt.Sprintf("%v", err)
			})
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// TestQuickstartURL checks that the quick start's notebook (TestQuickstart) got a ready https URL
// through the demo regional cluster, as `kubectl get wsd` shows it.
func TestQuickstartURL(t *testing.T) {
	localOnly(t, "examples/quickstart targets the simulator's ClusterTemplate and regional cluster")
	f := features.New("quick start URL").
		Assess("the notebook's URL serves and kubectl get wsd shows it", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			const url = "https://my-notebook.demo.exalsius.localhost"
			eventually(ctx, t, "the notebook's route ready", 2*time.Minute, func(ctx context.Context) (bool, string) {
				var ws workspacesv1.WorkspaceDeployment
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: "demo", Name: "my-notebook"}, &ws); err != nil {
					return false, err.Error()
				}
				ok, state := routesReadyState(&ws)
				return ok && ws.Status.Access[0].URL == url, state
			})
			out, err := kubectl(ctx, "get", "wsd", "-n", "demo")
			if err != nil || !strings.Contains(out, url) {
				t.Errorf("kubectl get wsd -n demo lacks %s (%v):\n%s", url, err, out)
			}
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
