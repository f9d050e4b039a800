package k0rdentsim

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// As KCM v1.12, a service Helm reports deployed is Deployed only once the release's resources on the
// child are healthy (until then Provisioning, with a condition naming them), and lastDeployedHash and
// version are stamped only then, moving only with a new configuration confirmed so. As KCM v1.11, Helm's
// word is taken and no hash is written.
func TestConfirmDeployed(t *testing.T) {
	env, err := testenv.StartChild("health")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx := context.Background()
	child := &world.ChildCluster{Name: "health", Env: env}
	c := env.Client
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "nb-0", Labels: map[string]string{"app.kubernetes.io/instance": "nb"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
	must(c.Create(ctx, pod))
	// A pod of another release, never Ready, is none of this service's business.
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "other-0", Labels: map[string]string{"app.kubernetes.io/instance": "other"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
	must(c.Create(ctx, other))
	setReady := func(ready bool) {
		t.Helper()
		s := corev1.ConditionFalse
		if ready {
			s = corev1.ConditionTrue
		}
		must(c.Get(ctx, client.ObjectKeyFromObject(pod), pod))
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: s}}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Ready: ready,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
		must(c.Status().Update(ctx, pod))
	}
	setReady(false)
	v1 := "1.0.0"
	p := plan{svc: k0rdentv1beta1.ServiceWithValues{Name: "nb", Namespace: "apps", Template: "nb-1-0-0", Version: &v1},
		state: k0rdentv1beta1.ServiceStateDeployed, hash: "hash-1"}

	r := &serviceSetReconciler{kcm: KCMv112}
	status := &k0rdentv1beta1.ServiceSetStatus{}
	if !r.confirm(ctx, child, status, p) {
		t.Error("a service whose pod is not Ready does not wait")
	}
	s := findState(status, p.svc)
	cond := meta.FindStatusCondition(s.Conditions, "ServiceHealthPod")
	if s.State != k0rdentv1beta1.ServiceStateProvisioning || s.LastDeployedHash != "" || s.Version != nil {
		t.Fatalf("pod not Ready: state %s, hash %q, version %v; want Provisioning, no hash, no version", s.State, s.LastDeployedHash, s.Version)
	}
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "PodUnhealthy" ||
		!strings.Contains(cond.Message, "apps/nb-0 (main: ContainerCreating)") || strings.Contains(cond.Message, "other") {
		t.Errorf("condition %+v, want ServiceHealthPod False naming apps/nb-0 only", cond)
	}

	setReady(true)
	if r.confirm(ctx, child, status, p) {
		t.Error("a service whose pod is Ready still waits")
	}
	s = findState(status, p.svc)
	if s.State != k0rdentv1beta1.ServiceStateDeployed || s.LastDeployedHash != "hash-1" || s.Version == nil || *s.Version != v1 || len(s.Conditions) != 0 {
		t.Fatalf("pod Ready: state %s, hash %q, version %v, conditions %v; want Deployed, hash-1, %s, none", s.State, s.LastDeployedHash, s.Version, s.Conditions, v1)
	}

	// A new configuration: until its pod is Ready, the hash stays the previous one's.
	v2 := "2.0.0"
	p.hash, p.svc.Version = "hash-2", &v2
	setReady(false)
	r.confirm(ctx, child, status, p)
	if s = findState(status, p.svc); s.State != k0rdentv1beta1.ServiceStateProvisioning || s.LastDeployedHash != "hash-1" || *s.Version != v1 {
		t.Fatalf("new configuration not Ready: state %s, hash %q, version %s; want Provisioning, hash-1, %s", s.State, s.LastDeployedHash, *s.Version, v1)
	}
	setReady(true)
	r.confirm(ctx, child, status, p)
	if s = findState(status, p.svc); s.State != k0rdentv1beta1.ServiceStateDeployed || s.LastDeployedHash != "hash-2" || *s.Version != v2 {
		t.Fatalf("new configuration Ready: state %s, hash %q, version %s; want Deployed, hash-2, %s", s.State, s.LastDeployedHash, *s.Version, v2)
	}

	// KCM v1.11: Helm's word, no hash.
	setReady(false)
	r = &serviceSetReconciler{kcm: KCMv111}
	status = &k0rdentv1beta1.ServiceSetStatus{}
	if r.confirm(ctx, child, status, p) {
		t.Error("v1.11 waits for pods")
	}
	if s = findState(status, p.svc); s.State != k0rdentv1beta1.ServiceStateDeployed || s.LastDeployedHash != "" || *s.Version != v2 {
		t.Errorf("v1.11: state %s, hash %q, version %s; want Deployed, no hash, %s", s.State, s.LastDeployedHash, *s.Version, v2)
	}
}

// KCM v1.12's default rules for the workload kinds, and the fingerprint.
func TestHealthRules(t *testing.T) {
	dep := func(gen, observed, replicas, ready, updated int64) map[string]any {
		return map[string]any{"metadata": map[string]any{"generation": gen},
			"spec":   map[string]any{"replicas": replicas},
			"status": map[string]any{"observedGeneration": observed, "readyReplicas": ready, "updatedReplicas": updated}}
	}
	deployment := replicasHealthy(false)
	for name, tc := range map[string]struct {
		obj     map[string]any
		healthy bool
	}{
		"all ready":           {dep(2, 2, 3, 3, 3), true},
		"old generation seen": {dep(3, 2, 3, 3, 3), false},
		"one not ready":       {dep(1, 1, 3, 2, 3), false},
		"scaled to zero":      {map[string]any{"metadata": map[string]any{"generation": int64(2)}, "spec": map[string]any{"replicas": int64(0)}, "status": map[string]any{"observedGeneration": int64(2)}}, true},
		"replicas default 1":  {map[string]any{"metadata": map[string]any{"generation": int64(1)}, "status": map[string]any{"observedGeneration": int64(1)}}, false},
	} {
		if ok, why := deployment(tc.obj); ok != tc.healthy {
			t.Errorf("Deployment %s: healthy %v (%s), want %v", name, ok, why, tc.healthy)
		}
	}
	sts := dep(1, 1, 1, 1, 1)
	sts["status"].(map[string]any)["currentRevision"] = "a"
	sts["status"].(map[string]any)["updateRevision"] = "b"
	if ok, why := replicasHealthy(true)(sts); ok || !strings.Contains(why, "rolling update") {
		t.Errorf("StatefulSet mid-update: healthy %v (%s)", ok, why)
	}
	jobPod := map[string]any{"metadata": map[string]any{"ownerReferences": []any{map[string]any{"kind": "Job"}}}, "status": map[string]any{"phase": "Failed"}}
	if ok, _ := podHealthy(jobPod); !ok {
		t.Error("a failed pod of a Job is the Job's business")
	}
	if ok, why := phaseBound(map[string]any{"status": map[string]any{"phase": "Pending"}}); ok || why != "phase=Pending" {
		t.Errorf("pending claim: %v %s", ok, why)
	}
}
