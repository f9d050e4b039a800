package server_test

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/exalsius/exalsius-operator/webhook/internal/server"
)

// TestSelfTest: the `helm test` check fails while a component's Deployment is not available, names
// it, and passes once every Deployment is available and the running webhook denies the invalid class.
func TestSelfTest(t *testing.T) {
	ctx := context.Background()
	const ns = "selftest"
	must(t, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	mk := func(name string) *appsv1.Deployment {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr(int32(2)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "example.com/x:1"}}},
				},
			},
		}
		must(t, mgmt.Client.Create(ctx, d))
		return d
	}
	ready, lagging := mk("ready"), mk("lagging")
	setStatus := func(d *appsv1.Deployment, available int32) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: available, AvailableReplicas: available}
		must(t, mgmt.Client.Status().Update(ctx, d))
	}
	setStatus(ready, 2)
	setStatus(lagging, 1)
	st := server.SelfTest{Client: mgmt.Client, Namespace: ns, Deployments: []string{"ready", "lagging", "missing"}, Timeout: 2 * time.Minute, Poll: 100 * time.Millisecond}
	pending, err := st.Pending(ctx)
	must(t, err)
	if strings.Join(pending, "; ") != "lagging: 1 of 2 pods available; missing: not found" {
		t.Fatalf("want the lagging and the missing Deployment named, got %v", pending)
	}
	// Once the lagging Deployment is available and the missing one exists, the self-test (which
	// waits for them) passes, the webhook's denial of the invalid class included.
	setStatus(lagging, 2)
	setStatus(mk("missing"), 2)
	if err := st.Run(ctx); err != nil {
		t.Fatalf("self-test failed on a ready installation: %v", err)
	}
}

// TestWebhookPortSpeaksHTTP1Only: a client offering HTTP/2 gets HTTP/1.1 (HTTP/2 rapid reset).
func TestWebhookPortSpeaksHTTP1Only(t *testing.T) {
	wo := mgmt.Env.WebhookInstallOptions
	addr := net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(wo.LocalServingPort))
	conn, err := tls.Dial("tcp", addr, &tls.Config{NextProtos: []string{"h2", "http/1.1"}, InsecureSkipVerify: true}) //nolint:gosec // protocol check only
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if p := conn.ConnectionState().NegotiatedProtocol; p == "h2" {
		t.Fatalf("the webhook port negotiated %q", p)
	}
}
