package suites

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// Wait budgets. Waits end as soon as the condition holds; these bound a broken run. E2E_CLUSTER_TIMEOUT
// and E2E_WORKSPACE_TIMEOUT override them (a real cloud takes far longer than the local world).
var (
	clusterTimeout   = 3 * time.Minute
	workspaceTimeout = 4 * time.Minute
)

// The ClusterTemplate and Credential every test namespace holds (target.Fixtures).
var (
	clusterTemplateName = k0rdentsim.ClusterTemplateName
	credentialName      = k0rdentsim.CredentialName
)

// eventuallyCallTimeout bounds one call of an eventually condition.
const eventuallyCallTimeout = 30 * time.Second

func mgmt() client.Client { return tgt.Client() }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func yamlToJSON(b []byte) ([]byte, error) { return yaml.YAMLToJSON(b) }

// eventually polls cond until it returns true; on timeout the test fails with the last state cond
// described. Each call of cond gets a context of its own, bounded by eventuallyCallTimeout, not the
// poll's deadline: a call made just before that deadline would otherwise fail on the deadline (a
// client's rate limiter refuses to wait past it) and the failure would show that error, not the state.
func eventually(ctx context.Context, t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, eventuallyCallTimeout)
		defer cancel()
		ok, state := cond(cctx)
		last = state
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not reached within %s; last state: %s", what, timeout, last)
	}
}

// newNamespace creates a uniquely named namespace with the simulator's ClusterTemplate and Credential.
func newNamespace(ctx context.Context, t *testing.T, prefix string) string {
	t.Helper()
	ns := prefix + "-" + rand.String(5)
	tmpl, cred, err := tgt.Fixtures(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	clusterTemplateName, credentialName = tmpl, cred
	return ns
}

// jsonOf marshals v into apiextensions JSON.
func jsonOf(t *testing.T, v any) *apiextensionsv1.JSON {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &apiextensionsv1.JSON{Raw: b}
}

// createClusterDeployment creates a ClusterDeployment of the simulator's template and waits for the
// child to be up (CAPIClusterSummary True and the kubeconfig Secret present).
func createClusterDeployment(ctx context.Context, t *testing.T, ns, name string, cfg w.ClusterConfig) *childCluster {
	t.Helper()
	config, err := tgt.ClusterConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cd := &k0rdentv1beta1.ClusterDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: k0rdentv1beta1.ClusterDeploymentSpec{
			Template:   clusterTemplateName,
			Credential: credentialName,
			Config:     config,
		},
	}
	if err := mgmt().Create(ctx, cd); err != nil {
		t.Fatal(err)
	}
	return waitChild(ctx, t, ns, name)
}

// waitChild waits until a ClusterDeployment's child cluster is up and returns it.
func waitChild(ctx context.Context, t *testing.T, ns, name string) *childCluster {
	t.Helper()
	eventually(ctx, t, "ClusterDeployment "+ns+"/"+name+" up", clusterTimeout, func(ctx context.Context) (bool, string) {
		var cd k0rdentv1beta1.ClusterDeployment
		if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &cd); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(cd.Status.Conditions, k0rdentv1beta1.CAPIClusterSummaryCondition)
		if c == nil || c.Status != metav1.ConditionTrue {
			return false, fmt.Sprintf("conditions %v", cd.Status.Conditions)
		}
		var s corev1.Secret
		if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-kubeconfig"}, &s); err != nil {
			return false, err.Error()
		}
		return len(s.Data["value"]) > 0, "kubeconfig Secret without value"
	})
	child, err := tgt.Child(ctx, ns, name)
	if err != nil || child == nil {
		t.Fatalf("no child cluster for %s/%s: %v", ns, name, err)
	}
	if child.local != nil {
		// GPUs appear a moment after the nodes are Ready (the device plugin's window).
		eventually(ctx, t, "devices of "+ns+"/"+name+" advertised", clusterTimeout, child.local.DevicesAdvertised)
	}
	return child
}

// gpuPool is a node pool with count nodes of gpus GPUs each.
func gpuPool(name, vendor, model string, nodes int32, gpus int64) w.NodePool {
	return w.NodePool{Name: name, Count: &nodes, CPU: "64", Memory: "512Gi", GPU: &w.GPUSpec{Vendor: vendor, Model: model, Count: gpus}}
}

// serviceTemplate creates a ServiceTemplate for a chart in the namespaces given and waits for it to
// be valid.
func serviceTemplate(ctx context.Context, t *testing.T, name, chart, version string, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		if err := k0rdentsim.Ensure(ctx, mgmt(), k0rdentsim.ServiceTemplate(ns, name, chart, version)); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "ServiceTemplate "+ns+"/"+name+" valid", time.Minute, func(ctx context.Context) (bool, string) {
			var st k0rdentv1beta1.ServiceTemplate
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &st); err != nil {
				return false, err.Error()
			}
			return st.Status.Valid, st.Status.ValidationError
		})
	}
}

// notebookClass returns a WorkspaceClass of the example notebook chart.
func notebookClass(name, template string, gpus int32, vendor workspacesv1.GPUVendor) *workspacesv1.WorkspaceClass {
	cpu, mem := resource.MustParse("1"), resource.MustParse("2Gi")
	one := int32(1)
	per := &workspacesv1.PerReplicaResources{CPU: &cpu, Memory: &mem}
	if gpus > 0 {
		per.GPUCount, per.GPUVendor = &gpus, vendor
	}
	return &workspacesv1.WorkspaceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: workspacesv1.WorkspaceClassSpec{
			DisplayName:      "Notebook " + name,
			ServiceTemplate:  workspacesv1.ServiceTemplateRef{Name: template, Namespace: "kcm-system"},
			DefaultResources: workspacesv1.DefaultResources{Replicas: &one, PerReplica: per},
			DeployTimeout:    &metav1.Duration{Duration: 3 * time.Minute},
		},
	}
}

// createClass creates a WorkspaceClass and waits for it to be valid; it is deleted at the end of the
// test.
func createClass(ctx context.Context, t *testing.T, class *workspacesv1.WorkspaceClass) {
	t.Helper()
	if err := mgmt().Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgmt().Delete(context.Background(), class) })
	eventually(ctx, t, "WorkspaceClass "+class.Name+" valid", time.Minute, func(ctx context.Context) (bool, string) {
		var c workspacesv1.WorkspaceClass
		if err := mgmt().Get(ctx, types.NamespacedName{Name: class.Name}, &c); err != nil {
			return false, err.Error()
		}
		return c.Status.Valid, fmt.Sprintf("valid=%t %s", c.Status.Valid, c.Status.ValidationError)
	})
}

// workspace returns a WorkspaceDeployment of a class on a ClusterDeployment.
func workspace(ns, name, class, cd string, res *workspacesv1.ResourceOverrides) *workspacesv1.WorkspaceDeployment {
	return &workspacesv1.WorkspaceDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: workspacesv1.WorkspaceDeploymentSpec{
			WorkspaceClassRef:    class,
			ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: cd, Namespace: ns},
			Resources:            res,
		},
	}
}

// gpuOverride asks count GPUs of a model.
func gpuOverride(count int32, model string, selector map[string]string) *workspacesv1.ResourceOverrides {
	return &workspacesv1.ResourceOverrides{PerReplica: &workspacesv1.PerReplicaResources{GPUCount: &count, GPUType: model, GPUNodeSelector: selector}}
}

// waitPhase waits until a workspace reaches one of the phases and returns it.
func waitPhase(ctx context.Context, t *testing.T, ns, name string, timeout time.Duration, phases ...workspacesv1.WorkspacePhase) *workspacesv1.WorkspaceDeployment {
	t.Helper()
	var ws workspacesv1.WorkspaceDeployment
	eventually(ctx, t, fmt.Sprintf("workspace %s/%s in %v", ns, name, phases), timeout, func(ctx context.Context) (bool, string) {
		if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &ws); err != nil {
			return false, err.Error()
		}
		for _, p := range phases {
			if ws.Status.Phase == p {
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %q message %q conditions %v", ws.Status.Phase, ws.Status.Message, ws.Status.Conditions)
	})
	return &ws
}

// condition returns a workspace condition, failing the test when it is absent.
func condition(t *testing.T, ws *workspacesv1.WorkspaceDeployment, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(ws.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("workspace %s has no %s condition: %v", ws.Name, typ, ws.Status.Conditions)
	}
	return *c
}

// deleteAndWait deletes an object and waits for it to be gone.
func deleteAndWait(ctx context.Context, t *testing.T, obj client.Object, timeout time.Duration) {
	t.Helper()
	if err := mgmt().Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(obj)
	eventually(ctx, t, fmt.Sprintf("%T %s deleted", obj, key), timeout, func(ctx context.Context) (bool, string) {
		err := mgmt().Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, fmt.Sprintf("still there (finalizers %v, err %v)", obj.GetFinalizers(), err)
	})
}

// workspacePods returns the pods of a workspace's release on the child (namespace ws-<name>).
func workspacePods(ctx context.Context, child *childCluster, wsName string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := child.Client().List(ctx, &pods, client.InNamespace("ws-"+wsName)); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// runningPods waits for n Running pods of a workspace and returns them.
func runningPods(ctx context.Context, t *testing.T, child *childCluster, wsName string, n int) []corev1.Pod {
	t.Helper()
	var running []corev1.Pod
	eventually(ctx, t, fmt.Sprintf("%d running pod(s) of %s", n, wsName), time.Minute, func(ctx context.Context) (bool, string) {
		pods, err := workspacePods(ctx, child, wsName)
		if err != nil {
			return false, err.Error()
		}
		running = running[:0]
		var states []string
		for _, p := range pods {
			states = append(states, p.Name+"="+string(p.Status.Phase)+"@"+p.Spec.NodeName)
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running = append(running, p)
			}
		}
		return len(running) == n, strings.Join(states, ", ")
	})
	return running
}

// kubectl runs kubectl on the management cluster and returns its combined output.
func kubectl(ctx context.Context, args ...string) (string, error) {
	return kubectlRaw(ctx, append([]string{"--kubeconfig", tgt.Kubeconfig()}, args...)...)
}

// kubectlRaw runs kubectl with these arguments and a discovery cache of its own: kubectl caches
// discovery per host:port, and test API servers reuse loopback ports, so a shared cache can describe
// another server that had the port before (one without our CRDs).
func kubectlRaw(ctx context.Context, args ...string) (string, error) {
	bin, err := w.FindTool("kubectl")
	if err != nil {
		return "", err
	}
	cache, err := os.MkdirTemp("", "e2e-kubectl-cache-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(cache) }() // a leftover temp folder fails no test
	out, err := exec.CommandContext(ctx, bin, append([]string{"--cache-dir", cache}, args...)...).CombinedOutput()
	return string(out), err
}

// writeTemp writes content into a file of the test's temporary folder.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := t.TempDir() + "/" + name
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
