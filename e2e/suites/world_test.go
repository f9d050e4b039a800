package suites

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// TestWorld checks the local world and the simulator without any component: a ClusterDeployment
// becomes a child cluster whose kwok nodes carry the configured GPUs, the real scheduler honours the
// GPU capacity, and ServiceSets become Helm releases with the status of the k0rdent contract
// (docs/design/k0rdent-contract.md).
func TestWorld(t *testing.T) {
	localOnly(t, "the simulator itself: node shapes, Helm releases it makes")
	var ns string
	var child *childCluster
	f := features.New("local world and k0rdent simulator").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "world")
			serviceTemplate(ctx, t, "notebook", "jupyter-notebook", "0.3.0", ns)
			serviceTemplate(ctx, t, "broken", "broken", "0.1.0", ns)
			return ctx
		}).
		Assess("a ClusterDeployment becomes a child with GPU nodes and a kubeconfig Secret", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			child = createClusterDeployment(ctx, t, ns, "gpu", w.ClusterConfig{Nodes: []w.NodePool{gpuPool("h100", "NVIDIA", "H100", 1, 8)}})
			var nodes corev1.NodeList
			if err := child.Client().List(ctx, &nodes); err != nil {
				t.Fatal(err)
			}
			if len(nodes.Items) != 1 {
				t.Fatalf("want 1 node, got %d", len(nodes.Items))
			}
			n := nodes.Items[0]
			if got := n.Status.Allocatable["nvidia.com/gpu"]; got.Value() != 8 {
				t.Errorf("allocatable nvidia.com/gpu = %s, want 8", got.String())
			}
			for k, v := range map[string]string{w.GPUModelLabel: "H100", w.NVIDIAProductLabel: "H100"} {
				if n.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
				}
			}
			var s corev1.Secret
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: "gpu-kubeconfig"}, &s); err != nil {
				t.Fatal(err)
			}
			if s.Type != "cluster.x-k8s.io/secret" || s.Labels["cluster.x-k8s.io/cluster-name"] != "gpu" {
				t.Errorf("kubeconfig Secret type %q labels %v", s.Type, s.Labels)
			}
			return ctx
		}).
		Assess("the scheduler honours GPU capacity: 3 replicas of 3 GPUs on 8 give 2 Running, 1 Pending", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			three := int32(3)
			labels := map[string]string{"app": "gpu-hog"}
			d := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gpu-hog"},
				Spec: appsv1.DeploymentSpec{
					Replicas: &three,
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{
							Name: "c", Image: "busybox",
							Resources: corev1.ResourceRequirements{
								Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("3")},
								Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("3")},
							},
						}}},
					},
				},
			}
			if err := child.Client().Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, "2 Running and 1 Pending pod", time.Minute, func(ctx context.Context) (bool, string) {
				var pods corev1.PodList
				if err := child.Client().List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
					return false, err.Error()
				}
				running, pending := 0, 0
				var states []string
				for _, p := range pods.Items {
					states = append(states, string(p.Status.Phase))
					switch p.Status.Phase {
					case corev1.PodRunning:
						running++
					case corev1.PodPending:
						pending++
					}
				}
				return running == 2 && pending == 1, strings.Join(states, ",")
			})
			return ctx
		}).
		Assess("a ServiceSet is installed with Helm and reported Deployed", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ss := withOwner(ctx, t, serviceSet(ns, "gpu", "gpu-sim-1", k0rdentv1beta1.ServiceWithValues{
				Name: "nb", Namespace: "sim-nb", Template: "notebook", Values: "_exalsius:\n  resources:\n    replicas: 2\n",
			}))
			if err := mgmt().Create(ctx, ss); err != nil {
				t.Fatal(err)
			}
			got := waitServiceState(ctx, t, ns, ss.Name, "nb", k0rdentv1beta1.ServiceStateDeployed)
			if !got.Status.Deployed {
				t.Error("status.deployed is false with every service Deployed")
			}
			c := meta.FindStatusCondition(got.Status.Conditions, k0rdentv1beta1.ServicesInReadyStateCondition)
			if c == nil || c.Status != metav1.ConditionTrue || c.Message != "1/1" {
				t.Errorf("ServicesInReadyState = %+v, want True 1/1", c)
			}
			if got.Status.Services[0].Type != k0rdentv1beta1.ServiceTypeHelm || got.Status.Services[0].LastStateTransitionTime == nil {
				t.Errorf("service state %+v lacks type Helm or the transition time", got.Status.Services[0])
			}
			rel, err := k0rdentsim.Release(child.KubeconfigPath, "sim-nb", "nb")
			if err != nil || rel == nil {
				t.Fatalf("release sim-nb/nb: %v %v", rel, err)
			}
			var dep appsv1.Deployment
			if err := child.Client().Get(ctx, types.NamespacedName{Namespace: "sim-nb", Name: "nb"}, &dep); err != nil {
				t.Fatal(err)
			}
			if *dep.Spec.Replicas != 2 {
				t.Errorf("replicas = %d, want 2 from the values", *dep.Spec.Replicas)
			}
			return ctx
		}).
		Assess("a broken chart is reported Failed with a failure message", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ss := withOwner(ctx, t, serviceSet(ns, "gpu", "gpu-sim-2", k0rdentv1beta1.ServiceWithValues{Name: "bad", Namespace: "sim-bad", Template: "broken"}))
			if err := mgmt().Create(ctx, ss); err != nil {
				t.Fatal(err)
			}
			got := waitServiceState(ctx, t, ns, ss.Name, "bad", k0rdentv1beta1.ServiceStateFailed)
			if !strings.Contains(got.Status.Services[0].FailureMessage, "broken on purpose") {
				t.Errorf("failureMessage %q does not carry the chart's error", got.Status.Services[0].FailureMessage)
			}
			if got.Status.Deployed {
				t.Error("status.deployed is true with a Failed service")
			}
			return ctx
		}).
		Assess("deleting a ServiceSet uninstalls its release and drops the finalizer", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			deleteAndWait(ctx, t, &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpu-sim-1"}}, time.Minute)
			rel, err := k0rdentsim.Release(child.KubeconfigPath, "sim-nb", "nb")
			if err != nil || rel != nil {
				t.Fatalf("release sim-nb/nb still there after the ServiceSet went: %v %v", rel, err)
			}
			return ctx
		}).
		Assess("deleting the ClusterDeployment deletes its ServiceSets and tears the child down", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			deleteAndWait(ctx, t, &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpu"}}, 2*time.Minute)
			var sets k0rdentv1beta1.ServiceSetList
			if err := mgmt().List(ctx, &sets, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			if len(sets.Items) != 0 {
				t.Errorf("%d ServiceSet(s) left after the ClusterDeployment went", len(sets.Items))
			}
			if world.World.Child(k0rdentsim.ChildName(ns, "gpu")) != nil {
				t.Error("the child cluster still runs")
			}
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// serviceSet returns a ServiceSet as the operator makes them (adapter label, provider, owner
// reference to the ClusterDeployment).
func serviceSet(ns, cd, name string, services ...k0rdentv1beta1.ServiceWithValues) *k0rdentv1beta1.ServiceSet {
	return &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{k0rdentv1beta1.StateManagementProviderAdapterLabel: k0rdentv1beta1.StateManagementProviderAdapterValue},
		},
		Spec: k0rdentv1beta1.ServiceSetSpec{
			Cluster:  cd,
			Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: services,
		},
	}
}

// withOwner adds the ClusterDeployment owner reference the contract asks for.
func withOwner(ctx context.Context, t *testing.T, ss *k0rdentv1beta1.ServiceSet) *k0rdentv1beta1.ServiceSet {
	t.Helper()
	var cd k0rdentv1beta1.ClusterDeployment
	if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: ss.Spec.Cluster}, &cd); err != nil {
		t.Fatal(err)
	}
	ss.OwnerReferences = append(ss.OwnerReferences, metav1.OwnerReference{
		APIVersion: k0rdentv1beta1.GroupVersion.String(), Kind: "ClusterDeployment", Name: cd.Name, UID: cd.UID,
	})
	return ss
}

// waitServiceState waits until a service of a ServiceSet reaches a state.
func waitServiceState(ctx context.Context, t *testing.T, ns, name, svc string, state k0rdentv1beta1.ServiceDeploymentState) *k0rdentv1beta1.ServiceSet {
	t.Helper()
	var ss k0rdentv1beta1.ServiceSet
	eventually(ctx, t, "service "+svc+" of ServiceSet "+name+" "+string(state), 2*time.Minute, func(ctx context.Context) (bool, string) {
		if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &ss); err != nil {
			return false, err.Error()
		}
		for _, s := range ss.Status.Services {
			if s.Name == svc {
				return s.State == state, string(s.State) + " " + s.FailureMessage
			}
		}
		return false, "no state yet"
	})
	return &ss
}
