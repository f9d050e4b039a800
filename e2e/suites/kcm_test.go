package suites

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
	w "github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// TestKCMAdmission sends ClusterDeployments KCM's webhook refuses: status 403 with KCM's message.
// It holds for the simulator and for a real KCM alike.
func TestKCMAdmission(t *testing.T) {
	var ns string
	f := features.New("KCM admission of ClusterDeployments").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "admit")
			return ctx
		}).
		Assess("a missing ClusterTemplate is refused with 403", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			cd := &k0rdentv1beta1.ClusterDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-template"},
				Spec:       k0rdentv1beta1.ClusterDeploymentSpec{Template: "does-not-exist", Credential: credentialName, Config: jsonOf(t, map[string]any{})},
			}
			assertForbidden(t, mgmt().Create(ctx, cd), "the ClusterDeployment is invalid", "does-not-exist")
			return ctx
		}).
		Assess("a missing Credential is refused with 403", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			cd := &k0rdentv1beta1.ClusterDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-credential"},
				Spec:       k0rdentv1beta1.ClusterDeploymentSpec{Template: clusterTemplateName, Credential: "nope", Config: jsonOf(t, map[string]any{})},
			}
			assertForbidden(t, mgmt().Create(ctx, cd), "the ClusterDeployment is invalid", "failed to get Credential")
			return ctx
		}).
		Assess("a service whose ServiceTemplate is missing is refused with 403", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			cd := &k0rdentv1beta1.ClusterDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-service"},
				Spec: k0rdentv1beta1.ClusterDeploymentSpec{Template: clusterTemplateName, Credential: credentialName, Config: jsonOf(t, map[string]any{}),
					ServiceSpec: k0rdentv1beta1.ServiceSpec{Services: []k0rdentv1beta1.Service{{Name: "x", Namespace: "x", Template: "no-such-template"}}}},
			}
			assertForbidden(t, mgmt().Create(ctx, cd), "the ClusterDeployment is invalid", "ServiceTemplate")
			return ctx
		}).
		Assess("updates KCM refuses: a template not among availableUpgrades, adding a dataSource", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			localOnly(t, "whether KCM checks upgrade paths is a KCM setting")
			cd := &k0rdentv1beta1.ClusterDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dry"},
				Spec:       k0rdentv1beta1.ClusterDeploymentSpec{Template: clusterTemplateName, Credential: credentialName, Config: jsonOf(t, map[string]any{}), DryRun: true},
			}
			mustCreate(ctx, t, cd)
			// Merge patches (no resourceVersion): the simulator writes the object meanwhile.
			change := func(edit func(*k0rdentv1beta1.ClusterDeployment)) error {
				var cur k0rdentv1beta1.ClusterDeployment
				if err := mgmt().Get(ctx, client.ObjectKeyFromObject(cd), &cur); err != nil {
					t.Fatal(err)
				}
				patch := client.MergeFrom(cur.DeepCopy())
				edit(&cur)
				return mgmt().Patch(ctx, &cur, patch)
			}
			assertForbidden(t, change(func(c *k0rdentv1beta1.ClusterDeployment) { c.Spec.Template = "no-such-template" }), "the ClusterDeployment is invalid", "no-such-template")
			other := k0rdentsim.ClusterTemplate(ns)
			other.Name = "another-template"
			mustCreate(ctx, t, other)
			eventually(ctx, t, "ClusterTemplate another-template valid", time.Minute, func(ctx context.Context) (bool, string) {
				if err := mgmt().Get(ctx, client.ObjectKeyFromObject(other), other); err != nil {
					return false, err.Error()
				}
				return other.Status.Valid, other.Status.ValidationError
			})
			assertForbidden(t, change(func(c *k0rdentv1beta1.ClusterDeployment) { c.Spec.Template = "another-template" }), "cluster upgrade is forbidden")
			assertForbidden(t, change(func(c *k0rdentv1beta1.ClusterDeployment) { c.Spec.DataSource = "ds" }), "the ClusterDeployment is invalid", "dataSource")
			if err := change(func(c *k0rdentv1beta1.ClusterDeployment) { c.Labels = map[string]string{"touched": "yes"} }); err != nil {
				t.Errorf("an update KCM allows was refused: %v", err)
			}
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// assertForbidden checks that err is a 403 whose message holds every part.
func assertForbidden(t *testing.T, err error, parts ...string) {
	t.Helper()
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) || status.Status().Code != 403 {
		t.Fatalf("want a 403 from admission, got %v", err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("the refusal %q lacks %q", err.Error(), p)
		}
	}
}

// TestSimulatorLikeKCM checks the simulator's KCM and Sveltos behaviours the controllers rely on:
// values rendered as templates with valuesFrom first, retries of a failed release (also of one whose
// child was down), serviceSpec, storage, a hand-rotated kubeconfig kept, revocable token
// credentials, uninstall states.
func TestSimulatorLikeKCM(t *testing.T) {
	localOnly(t, "the simulator's charts and child clusters")
	var ns string
	var child *childCluster
	const cd = "kcm"
	f := features.New("the simulator behaves like KCM and Sveltos").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "kcm")
			serviceTemplate(ctx, t, "prereq", "example-prerequisite", "1.0.0", ns)
			child = createClusterDeployment(ctx, t, ns, cd, w.ClusterConfig{})
			return ctx
		}).
		Assess("values are Go templates; valuesFrom overrides values", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ss := withOwner(ctx, t, serviceSet(ns, cd, cd+"-tmpl", k0rdentv1beta1.ServiceWithValues{
				Name: "tmpl", Namespace: "sim-tmpl", Template: "prereq", Values: "setting: '{{ .Cluster.metadata.name }}-{{ \"x\" | upper }}'",
			}))
			mustCreate(ctx, t, ss)
			waitServiceState(ctx, t, ns, ss.Name, "tmpl", k0rdentv1beta1.ServiceStateDeployed)
			waitConfigMapSetting(ctx, t, child, "sim-tmpl", "tmpl", cd+"-X")
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tmpl-values"}, Data: map[string]string{"values.yaml": "setting: from-values-from"}}
			mustCreate(ctx, t, cm)
			patch := client.MergeFrom(ss.DeepCopy())
			ss.Spec.Services[0].ValuesFrom = []k0rdentv1beta1.ValuesFrom{{Kind: k0rdentv1beta1.ValuesFromConfigMap, Name: cm.Name}}
			if err := mgmt().Patch(ctx, ss, patch); err != nil {
				t.Fatal(err)
			}
			waitConfigMapSetting(ctx, t, child, "sim-tmpl", "tmpl", "from-values-from")
			return ctx
		}).
		Assess("a failed release is retried with the same inputs, as Sveltos does", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// A ConfigMap Helm does not own makes the install fail; removing it on the child (no
			// change to the ServiceSet) lets the next retry succeed.
			blocker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "sim-retry", Name: "retry"}}
			if err := child.Client().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sim-retry"}}); err != nil {
				t.Fatal(err)
			}
			if err := child.Client().Create(ctx, blocker); err != nil {
				t.Fatal(err)
			}
			ss := withOwner(ctx, t, serviceSet(ns, cd, cd+"-retry", k0rdentv1beta1.ServiceWithValues{Name: "retry", Namespace: "sim-retry", Template: "prereq"}))
			mustCreate(ctx, t, ss)
			waitServiceState(ctx, t, ns, ss.Name, "retry", k0rdentv1beta1.ServiceStateFailed)
			if err := child.Client().Delete(ctx, blocker); err != nil {
				t.Fatal(err)
			}
			waitServiceState(ctx, t, ns, ss.Name, "retry", k0rdentv1beta1.ServiceStateDeployed)
			return ctx
		}).
		Assess("a release on a stopped child is retried once the child is back, the ServiceSet unchanged", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// Sveltos requeues a failed ClusterSummary whatever failed: a release that could not even
			// be read (the child's API server down) is not Failed for good.
			if err := child.local.Env.Pause(); err != nil {
				t.Fatal(err)
			}
			resumed := false
			defer func() {
				if !resumed {
					_ = child.local.Env.Resume()
				}
			}()
			ss := withOwner(ctx, t, serviceSet(ns, cd, cd+"-outage", k0rdentv1beta1.ServiceWithValues{Name: "outage", Namespace: "sim-outage", Template: "prereq"}))
			mustCreate(ctx, t, ss)
			waitServiceState(ctx, t, ns, ss.Name, "outage", k0rdentv1beta1.ServiceStateFailed)
			if err := child.local.Env.Resume(); err != nil {
				t.Fatal(err)
			}
			resumed = true
			waitServiceState(ctx, t, ns, ss.Name, "outage", k0rdentv1beta1.ServiceStateDeployed)
			return ctx
		}).
		Assess("helmAction Uninstall: Deleted, the release gone", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var ss k0rdentv1beta1.ServiceSet
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: cd + "-retry"}, &ss); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(ss.DeepCopy())
			un := k0rdentv1beta1.HelmActionUninstall
			ss.Spec.Services[0].HelmAction = &un
			if err := mgmt().Patch(ctx, &ss, patch); err != nil {
				t.Fatal(err)
			}
			waitServiceState(ctx, t, ns, ss.Name, "retry", k0rdentv1beta1.ServiceStateDeleted)
			if rel, err := k0rdentsim.Release(child.KubeconfigPath, "sim-retry", "retry"); err != nil || rel != nil {
				t.Errorf("release sim-retry/retry still there (%v, %v)", rel, err)
			}
			return ctx
		}).
		Assess("serviceSpec is deployed through the ServiceSet named after the ClusterDeployment", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var obj k0rdentv1beta1.ClusterDeployment
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: cd}, &obj); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(obj.DeepCopy())
			obj.Spec.ServiceSpec.Services = []k0rdentv1beta1.Service{{Name: "from-spec", Namespace: "spec-ns", Template: "prereq", Values: "setting: spec"}}
			if err := mgmt().Patch(ctx, &obj, patch); err != nil {
				t.Fatal(err)
			}
			ss := waitServiceState(ctx, t, ns, cd, "from-spec", k0rdentv1beta1.ServiceStateDeployed)
			if ref := metav1.GetControllerOf(ss); ref == nil || ref.Kind != "ClusterDeployment" || ref.Name != cd {
				t.Errorf("ServiceSet %s controller %v, want the ClusterDeployment", cd, ref)
			}
			waitConfigMapSetting(ctx, t, child, "spec-ns", "from-spec", "spec")
			eventually(ctx, t, "the ClusterDeployment's status lists the service", time.Minute, func(ctx context.Context) (bool, string) {
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: cd}, &obj); err != nil {
					return false, err.Error()
				}
				for _, s := range obj.Status.Services {
					if s.Name == "from-spec" && s.State == k0rdentv1beta1.ServiceStateDeployed {
						return true, ""
					}
				}
				return false, fmt.Sprintf("%+v", obj.Status.Services)
			})
			return ctx
		}).
		Assess("a claim of the default StorageClass is bound and its pod runs", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}
			if err := child.Client().Create(ctx, pvc); err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "with-pvc"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "d", MountPath: "/d"}}}},
					Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}},
			}
			if err := child.Client().Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, "claim Bound and pod Running", 2*time.Minute, func(ctx context.Context) (bool, string) {
				if err := child.Client().Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
					return false, err.Error()
				}
				if err := child.Client().Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
					return false, err.Error()
				}
				state := fmt.Sprintf("claim %s (volume %q), pod %s on node %q", pvc.Status.Phase, pvc.Spec.VolumeName, pod.Status.Phase, pod.Spec.NodeName)
				for _, c := range pod.Status.Conditions {
					if c.Status != corev1.ConditionTrue {
						state += fmt.Sprintf("; %s=%s %s %s", c.Type, c.Status, c.Reason, c.Message)
					}
				}
				return pvc.Status.Phase == corev1.ClaimBound && pod.Status.Phase == corev1.PodRunning, state
			})
			return ctx
		}).
		Assess("a hand-rotated kubeconfig is kept; a token credential can be revoked", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			kc, err := child.local.TokenKubeconfig(ctx, "rotated")
			if err != nil {
				t.Fatal(err)
			}
			var s corev1.Secret
			key := types.NamespacedName{Namespace: ns, Name: k0rdentv1beta1.KubeconfigSecretName(cd)}
			if err := mgmt().Get(ctx, key, &s); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(s.DeepCopy())
			s.Data[k0rdentv1beta1.KubeconfigSecretKey] = kc
			if err := mgmt().Patch(ctx, &s, patch); err != nil {
				t.Fatal(err)
			}
			// A ServiceSet change makes the simulator reconcile the ClusterDeployment again.
			mustCreate(ctx, t, withOwner(ctx, t, serviceSet(ns, cd, cd+"-poke", k0rdentv1beta1.ServiceWithValues{Name: "poke", Namespace: "sim-poke", Template: "prereq"})))
			waitServiceState(ctx, t, ns, cd+"-poke", "poke", k0rdentv1beta1.ServiceStateDeployed)
			if err := mgmt().Get(ctx, key, &s); err != nil {
				t.Fatal(err)
			}
			if string(s.Data[k0rdentv1beta1.KubeconfigSecretKey]) != string(kc) {
				t.Fatal("the simulator overwrote the hand-rotated kubeconfig")
			}
			cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
			if err != nil {
				t.Fatal(err)
			}
			tc, err := client.New(cfg, client.Options{Scheme: scheme.New()})
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.List(ctx, &corev1.NodeList{}); err != nil {
				t.Fatalf("the token credential does not work: %v", err)
			}
			if err := child.local.RevokeToken(ctx, "rotated"); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, "the revoked token refused", time.Minute, func(ctx context.Context) (bool, string) {
				err := tc.List(ctx, &corev1.NodeList{})
				return apierrors.IsUnauthorized(err), fmt.Sprint(err)
			})
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			deleteAndWait(ctx, t, &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cd}}, clusterTimeout)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// waitConfigMapSetting waits until the example-prerequisite chart's ConfigMap holds a setting.
func waitConfigMapSetting(ctx context.Context, t *testing.T, child *childCluster, ns, name, want string) {
	t.Helper()
	eventually(ctx, t, fmt.Sprintf("ConfigMap %s/%s setting %q", ns, name, want), 2*time.Minute, func(ctx context.Context) (bool, string) {
		var cm corev1.ConfigMap
		if err := child.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &cm); err != nil {
			return false, err.Error()
		}
		return cm.Data["setting"] == want, cm.Data["setting"]
	})
}
