package colony

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/common/testing/tlsrecorder"
)

func TestAPIEndpoint(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kmc-c", Namespace: "ns"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.12.34",
			Ports: []corev1.ServicePort{{Name: "konnectivity", Port: 30132}, {Name: "api", Port: 30443}}}}
	// Not a DNS name: the child's Cilium agent needs the address before its service routing works.
	if h, p, ok := apiEndpoint(svc); !ok || h != "10.96.12.34" || p != "30443" {
		t.Errorf("NodePort: %q %q %v", h, p, ok)
	}
	headless := svc.DeepCopy()
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	if h, _, ok := apiEndpoint(headless); !ok || h != "kmc-c.ns.svc.cluster.local" {
		t.Errorf("headless: %q %v", h, ok)
	}
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
	if h, p, ok := apiEndpoint(svc); !ok || h != "203.0.113.7" || p != "30443" {
		t.Errorf("LoadBalancer: %q %q %v", h, p, ok)
	}
	svc.Spec.Ports = []corev1.ServicePort{{Port: 6443}}
	if _, p, ok := apiEndpoint(svc); !ok || p != "6443" {
		t.Errorf("unnamed 6443: %q %v", p, ok)
	}
	svc.Spec.Ports = []corev1.ServicePort{{Name: "konnectivity", Port: 30132}}
	if _, _, ok := apiEndpoint(svc); ok {
		t.Error("no API port accepted")
	}
}

// TestAPIEndpointConfigMap: with the flag on, a ready cluster whose control plane Service exists
// gets kube-system/cp-api-endpoint with the Service's address, and follows it when it changes; with
// the flag off nothing is written.
func TestAPIEndpointConfigMap(t *testing.T) {
	child, err := testenv.StartChild("cilium")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Stop() })
	ctx := context.Background()
	ns := newNamespace(t)
	startManagerWith(t, ns, func(o *Options) { o.APIEndpointConfigMap = true })
	createColony(t, ns, "col", entry(t, "a", nil))
	waitCD(t, ns, "col-a", "col-a", nil)
	setCDConditions(t, ns, "col-a", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, k0rdentv1beta1.SucceededReason))
	if err := mgmt.WriteKubeconfigSecret(ctx, ns, "col-a", child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	waitColony(t, ns, "col", "Ready", phaseIs(infrav1.ColonyPhaseReady))
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kmc-col-a-lb",
			Labels: map[string]string{"app": "k0smotron", "component": "cluster", "cluster": "col-a"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "api", Port: 30443}, {Name: "konnectivity", Port: 30132}}},
	}
	if err := mgmt.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	want := func(host, port string) {
		t.Helper()
		eventually(t, fmt.Sprintf("cp-api-endpoint %s:%s", host, port), func() error {
			cm := &corev1.ConfigMap{}
			if err := child.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "cp-api-endpoint"}, cm); err != nil {
				return err
			}
			if cm.Data["host"] != host || cm.Data["port"] != port {
				return fmt.Errorf("data %v", cm.Data)
			}
			return nil
		})
	}
	// No address yet: the Service's ClusterIP (allocated by the API server), never a DNS name.
	if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Fatalf("the API server allocated no ClusterIP: %q", svc.Spec.ClusterIP)
	}
	want(svc.Spec.ClusterIP, "30443")
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
	if err := mgmt.Client.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	want("203.0.113.7", "30443")

	// Flag off: another Colony's child gets nothing.
	off := newNamespace(t)
	startManager(t, off)
	createColony(t, off, "col", entry(t, "a", nil))
	waitCD(t, off, "col-a", "col-a", nil)
	setCDConditions(t, off, "col-a", cond(k0rdentv1beta1.ReadyCondition, metav1.ConditionTrue, k0rdentv1beta1.SucceededReason))
	other, err := testenv.StartChild("cilium-off")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop() })
	if err := mgmt.WriteKubeconfigSecret(ctx, off, "col-a", other.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	svc2 := svc.DeepCopy()
	svc2.ResourceVersion, svc2.Namespace, svc2.Status = "", off, corev1.ServiceStatus{}
	svc2.Spec.ClusterIP, svc2.Spec.ClusterIPs = "", nil
	for i := range svc2.Spec.Ports {
		svc2.Spec.Ports[i].NodePort = 0
	}
	if err := mgmt.Client.Create(ctx, svc2); err != nil {
		t.Fatal(err)
	}
	waitColony(t, off, "col", "Ready", phaseIs(infrav1.ColonyPhaseReady))
	err = other.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "cp-api-endpoint"}, &corev1.ConfigMap{})
	if err == nil {
		t.Fatal("the ConfigMap was written with the flag off")
	}
}

// TestAPIEndpointRefusesATenantsKubeconfig: a tenant who may write Secrets in the Colony's namespace
// rewrites `<cd>-kubeconfig` to send the component's own ServiceAccount token (a file on its host)
// to a server the tenant runs. The API-endpoint write refuses the kubeconfig, naming the field, and
// the tenant's server sees no connection.
func TestAPIEndpointRefusesATenantsKubeconfig(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	tenant, err := mgmt.Tenant(ctx, ns, "tenant-a", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "get", "update"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := tlsrecorder.New(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("operator-serviceaccount-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := rec.Kubeconfig(t, &clientcmdapi.AuthInfo{TokenFile: tokenFile})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: k0rdentv1beta1.KubeconfigSecretName("col-a")},
		Data: map[string][]byte{k0rdentv1beta1.KubeconfigSecretKey: data}}
	if err := tenant.Create(ctx, secret); err != nil {
		t.Fatalf("the tenant writes the kubeconfig Secret: %v", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kmc-col-a",
			Labels: map[string]string{"app": "k0smotron", "component": "cluster", "cluster": "col-a"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "api", Port: 30443}}},
	}
	if err := mgmt.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	r := newReconciler(mgmt.Client, mgmt.Client, nil)
	colony := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "col"}}
	e := &entryState{clusterName: "a", cdName: "col-a", secret: &metav1.PartialObjectMetadata{ObjectMeta: secret.ObjectMeta}}
	err = r.reconcileAPIEndpoint(ctx, colony, e)
	if err == nil || !strings.Contains(err.Error(), "user.tokenFile") || strings.Contains(err.Error(), tokenFile) {
		t.Fatalf("want the kubeconfig refused naming user.tokenFile (never its value), got %v", err)
	}
	if conns, creds := rec.Seen(); conns != 0 {
		t.Fatalf("the tenant's server was reached: %d connections, credentials %q", conns, creds)
	}
}
