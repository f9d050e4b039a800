package suites

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/e2e/internal/stack"
)

// component returns a running component, failing the test when it is not running.
func component(t *testing.T, name string) *stack.Component {
	t.Helper()
	localOnly(t, "needs the "+name+" process of the local world")
	c := world.Components[name]
	if c == nil {
		t.Fatalf("component %s is not running: %s", name, world.Missing[name])
	}
	return c
}

// TestWebhookDenials sends invalid objects through kubectl and reads the webhook's denials.
func TestWebhookDenials(t *testing.T) {
	var ns string
	f := features.New("webhook denials through kubectl").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if !onRealCluster() {
				component(t, "webhook")
			}
			ns = newNamespace(ctx, t, "hook")
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			createClass(ctx, t, notebookClass("e2e-hook-"+ns, notebookTemplate, 1, workspacesv1.GPUVendorNVIDIA))
			return ctx
		}).
		Assess("a WorkspaceDeployment asking another GPU vendor than its class is denied, naming the field", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			manifest := fmt.Sprintf(`apiVersion: workspaces.exalsius.ai/v1
kind: WorkspaceDeployment
metadata: {name: bad, namespace: %s}
spec:
  workspaceClassRef: e2e-hook-%s
  clusterDeploymentRef: {name: nowhere, namespace: %s}
  resources:
    perReplica: {gpuCount: 1, gpuVendor: AMD}
`, ns, ns, ns)
			assertDenied(ctx, t, manifest, "spec.resources.perReplica.gpuVendor")
			return ctx
		}).
		Assess("a Colony entry without a template is denied, naming the field", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			manifest := fmt.Sprintf(`apiVersion: infra.exalsius.ai/v1
kind: Colony
metadata: {name: notemplate, namespace: %s}
spec:
  colonyClusters:
  - clusterName: a
    clusterDeploymentSpec: {credential: sim-credential, config: {}}
`, ns)
			assertDenied(ctx, t, manifest, "spec.colonyClusters[0].clusterDeploymentSpec.template")
			return ctx
		}).
		Assess("deleting a WorkspaceClass in use is denied, naming the workspace", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			mustCreate(ctx, t, workspace(ns, "user", "e2e-hook-"+ns, "nowhere", nil))
			out, err := kubectl(ctx, "delete", "workspaceclass", "e2e-hook-"+ns, "--wait=false")
			if err == nil || !strings.Contains(out, "cannot be deleted") || !strings.Contains(out, ns+"/user") {
				t.Errorf("kubectl delete of a class in use: err %v, output:\n%s", err, out)
			}
			deleteAndWait(ctx, t, workspace(ns, "user", "", "", nil), workspaceTimeout)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// assertDenied applies a manifest with kubectl and expects a denial naming the field path (the
// webhook's field.ErrorList reaches kubectl as an Invalid status).
func assertDenied(ctx context.Context, t *testing.T, manifest, field string) {
	t.Helper()
	path := writeTemp(t, "obj.yaml", manifest)
	out, err := kubectl(ctx, "apply", "-f", path)
	if err == nil {
		t.Fatalf("kubectl apply accepted an invalid object:\n%s", out)
	}
	if !strings.Contains(out, "is invalid") || !strings.Contains(out, field) {
		t.Errorf("want a denial naming %s, got:\n%s", field, out)
	}
}

// TestComponentRestarts kills each controller part-way through its work, restarts it, and checks
// that the work converges without duplicates.
func TestComponentRestarts(t *testing.T) {
	localOnly(t, "kills component processes of the local world")
	var ns string
	const colony = "tough"
	f := features.New("components killed and restarted converge").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "restart")
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			return ctx
		}).
		Assess("colony-controller killed while provisioning", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := component(t, "colony-controller")
			mustCreate(ctx, t, &infrav1.Colony{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: colony},
				Spec:       infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{colonyEntry(t, "gpu", gpuPool("a100", "NVIDIA", "A100", 1, 8))}},
			})
			eventually(ctx, t, "ClusterDeployment created", clusterTimeout, func(ctx context.Context) (bool, string) {
				err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: colony + "-gpu"}, &k0rdentv1beta1.ClusterDeployment{})
				return err == nil, fmt.Sprint(err)
			})
			if err := c.Restart(ctx, true); err != nil {
				t.Fatal(err)
			}
			waitColony(ctx, t, ns, colony, 1, 1)
			var cds k0rdentv1beta1.ClusterDeploymentList
			if err := mgmt().List(ctx, &cds, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			if len(cds.Items) != 1 {
				t.Errorf("%d ClusterDeployments, want 1", len(cds.Items))
			}
			return ctx
		}).
		Assess("workspace-controller killed after creating the ServiceSet", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := component(t, "workspace-controller")
			createClass(ctx, t, notebookClass("e2e-restart-"+ns, notebookTemplate, 1, workspacesv1.GPUVendorNVIDIA))
			mustCreate(ctx, t, workspace(ns, "tough", "e2e-restart-"+ns, colony+"-gpu", gpuOverride(1, "A100", nil)))
			eventually(ctx, t, "the workspace's ServiceSet exists", workspaceTimeout, func(ctx context.Context) (bool, string) {
				n, err := workspaceServiceSets(ctx, ns, "tough")
				return n > 0, fmt.Sprint(n, err)
			})
			if err := c.Restart(ctx, true); err != nil {
				t.Fatal(err)
			}
			waitRunning(ctx, t, ns, "tough")
			if n, err := workspaceServiceSets(ctx, ns, "tough"); err != nil || n != 1 {
				t.Errorf("%d ServiceSets for the workspace (err %v), want 1", n, err)
			}
			return ctx
		}).
		Assess("inventory-collector restarted catches up with new nodes", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := component(t, "inventory-collector")
			if err := c.Kill(); err != nil {
				t.Fatal(err)
			}
			var col infrav1.Colony
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: colony}, &col); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(col.DeepCopy())
			col.Spec.ColonyClusters[0] = colonyEntry(t, "gpu", gpuPool("a100", "NVIDIA", "A100", 2, 8))
			if err := mgmt().Patch(ctx, &col, patch); err != nil {
				t.Fatal(err)
			}
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, "inventory shows 16 A100 on 2 nodes", clusterTimeout, func(ctx context.Context) (bool, string) {
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: colony}, &col); err != nil {
					return false, err.Error()
				}
				inv := col.Status.GPUInventory[colony+"-gpu"]
				for _, o := range inv.Offerings {
					if o.Model == "A100" && o.Total == 16 && o.Nodes == 2 {
						return true, ""
					}
				}
				return false, fmt.Sprintf("%+v", inv)
			})
			return ctx
		}).
		Assess("webhook restarted still denies", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := component(t, "webhook")
			if err := c.Restart(ctx, true); err != nil {
				t.Fatal(err)
			}
			out, err := kubectl(ctx, "delete", "workspaceclass", "e2e-restart-"+ns, "--wait=false")
			if err == nil || !strings.Contains(out, "cannot be deleted") {
				t.Errorf("class in use deleted after a webhook restart: err %v\n%s", err, out)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var list workspacesv1.WorkspaceDeploymentList
			if err := mgmt().List(ctx, &list, client.InNamespace(ns)); err == nil {
				for i := range list.Items {
					deleteAndWait(ctx, t, &list.Items[i], workspaceTimeout)
				}
			}
			deleteAndWait(ctx, t, &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: colony}}, clusterTimeout)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// workspaceServiceSets counts the ServiceSets labelled for a workspace.
func workspaceServiceSets(ctx context.Context, ns, name string) (int, error) {
	var sets k0rdentv1beta1.ServiceSetList
	if err := mgmt().List(ctx, &sets, client.InNamespace(ns), client.MatchingLabels{workspacesv1.WorkspaceLabel: name}); err != nil {
		return 0, err
	}
	return len(sets.Items), nil
}

// killMidWrite holds the first write of a component matching the rule, kills the component while
// that write is in flight, refuses the write (it never lands), and starts the component again.
func killMidWrite(ctx context.Context, t *testing.T, name, group, version, resource, objName string, op admissionregistrationv1.OperationType, trigger func()) {
	t.Helper()
	c := component(t, name)
	user := "system:serviceaccount:" + c.ServiceAccount.Namespace + ":" + c.ServiceAccount.Name
	h, err := world.HoldWrite(ctx, user, group, version, resource, op)
	if err != nil {
		t.Fatal(err)
	}
	h.Name = objName
	defer func() { _ = h.Remove(context.Background()) }()
	trigger()
	select {
	case <-h.Held():
	case <-time.After(workspaceTimeout):
		t.Fatalf("%s never wrote %s/%s %s", name, group, resource, op)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := h.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestKilledMidWrite kills components while a write is in flight (held at admission, then dropped),
// not after it: the restarted component must notice the write never landed and converge without
// duplicates.
func TestKilledMidWrite(t *testing.T) {
	localOnly(t, "kills component processes of the local world while a write is held at admission")
	var ns string
	f := features.New("components killed part-way through a write").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "midwrite")
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			createClass(ctx, t, notebookClass("e2e-midwrite-"+ns, notebookTemplate, 0, ""))
			return ctx
		}).
		Assess("colony-controller killed while creating its ClusterDeployment", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			killMidWrite(ctx, t, "colony-controller", "k0rdent.mirantis.com", "v1beta1", "clusterdeployments", "", admissionregistrationv1.Create, func() {
				mustCreate(ctx, t, &infrav1.Colony{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mid"},
					Spec:       infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{cpuColonyEntry(t, "c")}},
				})
			})
			waitColony(ctx, t, ns, "mid", 1, 1)
			var cds k0rdentv1beta1.ClusterDeploymentList
			if err := mgmt().List(ctx, &cds, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			if len(cds.Items) != 1 {
				t.Errorf("%d ClusterDeployments, want 1", len(cds.Items))
			}
			return ctx
		}).
		Assess("workspace-controller killed while creating the ServiceSet", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			killMidWrite(ctx, t, "workspace-controller", "k0rdent.mirantis.com", "v1beta1", "servicesets", "", admissionregistrationv1.Create, func() {
				mustCreate(ctx, t, workspace(ns, "mid", "e2e-midwrite-"+ns, "mid-c", nil))
			})
			waitRunning(ctx, t, ns, "mid")
			if n, err := workspaceServiceSets(ctx, ns, "mid"); err != nil || n != 1 {
				t.Errorf("%d ServiceSets for the workspace (err %v), want 1", n, err)
			}
			return ctx
		}).
		Assess("workspace-controller killed while writing the workspace status", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			killMidWrite(ctx, t, "workspace-controller", "workspaces.exalsius.ai", "v1", "workspacedeployments/status", "mid-status", admissionregistrationv1.Update, func() {
				mustCreate(ctx, t, workspace(ns, "mid-status", "e2e-midwrite-"+ns, "mid-c", nil))
			})
			waitRunning(ctx, t, ns, "mid-status")
			if n, err := workspaceServiceSets(ctx, ns, "mid-status"); err != nil || n != 1 {
				t.Errorf("%d ServiceSets for the workspace (err %v), want 1", n, err)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var list workspacesv1.WorkspaceDeploymentList
			if err := mgmt().List(ctx, &list, client.InNamespace(ns)); err == nil {
				for i := range list.Items {
					deleteAndWait(ctx, t, &list.Items[i], workspaceTimeout)
				}
			}
			deleteAndWait(ctx, t, &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mid"}}, clusterTimeout)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
