package colony

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// TestRegionalControlPlane: a cluster whose Credential names a Region has its hosted control plane on
// the Region's cluster (a KOF regional cluster). The API-endpoint ConfigMap on the child carries the
// address of the control plane Service found there (its LoadBalancer address, else its ClusterIP),
// and follows it; when the entry is removed, the etcd claim of its control plane is deleted on the
// regional cluster, and a claim of the same name on the management cluster goes too.
func TestRegionalControlPlane(t *testing.T) {
	ctx := context.Background()
	children := map[string]*testenv.Child{}
	for _, name := range []string{"rleaf", "rregional"} {
		ch, err := testenv.StartChild(name)
		if err != nil {
			t.Fatalf("starting child %s: %v", name, err)
		}
		t.Cleanup(func() { _ = ch.Stop() })
		children[name] = ch
	}
	regional, leaf := children["rregional"].Client, children["rleaf"].Client
	ns := newNamespace(t)
	createRegion(t, ns, children["rregional"].Kubeconfig)
	if err := regional.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := regional.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "col-eu-kubeconfig"},
		Data: map[string][]byte{"value": children["rleaf"].Kubeconfig}}); err != nil {
		t.Fatal(err)
	}
	createPVCOn(t, regional, ns, EtcdPVCName("col-eu"))
	createPVCOn(t, regional, ns, "etcd-data-kmc-other-etcd-0")

	startManagerWith(t, ns, func(o *Options) { o.APIEndpointConfigMap = true })
	createColony(t, ns, "col", entry(t, "eu", map[string]any{"template": "tmpl-1-0-0", "credential": "cred-eu"}), entry(t, "home", nil))
	waitCD(t, ns, "col-eu", "col-eu", nil)
	setCDConditions(t, ns, "col-eu", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, k0rdentv1beta1.SucceededReason))

	// The control plane Service on the regional cluster; none on the management cluster.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kmc-col-eu",
			Labels: map[string]string{"app": "k0smotron", "component": "cluster", "cluster": "col-eu"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "api", Port: 30443}, {Name: "konnectivity", Port: 30132}}},
	}
	if err := regional.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	want := func(host string) {
		t.Helper()
		eventually(t, "cp-api-endpoint "+host+" on the regional child", func() error {
			cm := &corev1.ConfigMap{}
			if err := leaf.Get(ctx, client.ObjectKey{Namespace: APIEndpointConfigMapNamespace, Name: APIEndpointConfigMapName}, cm); err != nil {
				return err
			}
			if cm.Data["host"] != host || cm.Data["port"] != "30443" {
				return fmt.Errorf("data %v", cm.Data)
			}
			return nil
		})
	}
	if err := regional.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
		t.Fatal(err)
	}
	want(svc.Spec.ClusterIP)
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.9"}}
	if err := regional.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	want("198.51.100.9")

	// The entry goes: its ClusterDeployment, then its etcd claim on the regional cluster.
	createPVC(t, ns, EtcdPVCName("col-eu"))
	updateColony(t, ns, "col", func(c *infrav1.Colony) { c.Spec.ColonyClusters = c.Spec.ColonyClusters[1:] })
	waitCDGone(t, ns, "col-eu")
	eventually(t, "the etcd claim on the regional cluster is gone", pvcGoneOn(regional, ns, EtcdPVCName("col-eu")))
	eventually(t, "the claim of the name on the management cluster is gone", pvcGone(ns, EtcdPVCName("col-eu")))
	pvc := &corev1.PersistentVolumeClaim{}
	if err := regional.Get(ctx, client.ObjectKey{Namespace: ns, Name: "etcd-data-kmc-other-etcd-0"}, pvc); err != nil || pvc.DeletionTimestamp != nil {
		t.Errorf("another claim on the regional cluster: %v, deleting %v; want it kept", err, pvc.DeletionTimestamp)
	}
}
