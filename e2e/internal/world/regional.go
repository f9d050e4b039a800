package world

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/exalsius/exalsius-operator/common/scheme"
)

// The tenant Gateway of a regional cluster, where the workspace-controller looks for it by default
// (--gateway-namespace, --gateway-name).
const (
	GatewayNamespace = "istio-ingress"
	GatewayName      = "tenant-gateway"
	// GatewayClassName is the class of the simulated Gateway; the simulator is its controller.
	GatewayClassName = "exalsius-sim"
	// GatewayControllerName is what the simulator writes as the routes' controllerName.
	GatewayControllerName = "exalsius.ai/gateway-simulator"
	// TCPPoolFirstPort is the port of the first TCP listener (ssh-1) of the pool.
	TCPPoolFirstPort = 2201
)

// RegionalScheme is the scheme of regional-cluster clients: common/scheme plus the Gateway API.
func RegionalScheme() *runtime.Scheme {
	s := scheme.New()
	utilruntime.Must(gwv1.Install(s))
	return s
}

var (
	crdDirOnce sync.Once
	crdDir     string
	crdDirErr  error
)

// GatewayCRDDir is the experimental channel of the Gateway API CRDs (the standard ones plus
// TCPRoute and the other experimental kinds) of the sigs.k8s.io/gateway-api module this repository
// builds against, read from the Go module cache.
func GatewayCRDDir() (string, error) {
	crdDirOnce.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
		if err != nil {
			crdDirErr = fmt.Errorf("finding the sigs.k8s.io/gateway-api module (go list -m): %w", err)
			return
		}
		crdDir = filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "experimental")
	})
	return crdDir, crdDirErr
}

// RegionalClient returns an admin client of the child with the Gateway API in its scheme.
func (c *ChildCluster) RegionalClient() (client.Client, error) {
	return client.New(c.Env.Config, client.Options{Scheme: RegionalScheme()})
}

// MakeRegional turns a child cluster into a tenant's regional cluster: it installs the Gateway API
// CRDs (experimental channel) and the tenant Gateway in istio-ingress/tenant-gateway, with a
// wildcard HTTPS listener for *.<domain> and a pool of tcpPorts TCP listeners (ssh-1 on 2201, ...).
// It is idempotent.
func (c *ChildCluster) MakeRegional(ctx context.Context, domain string, tcpPorts int) error {
	dir, err := GatewayCRDDir()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(c.Env.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("regional cluster %s: installing the Gateway API CRDs: %w", c.Name, err)
	}
	rc, err := c.RegionalClient()
	if err != nil {
		return err
	}
	if err := rc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: GatewayNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("regional cluster %s: %w", c.Name, err)
	}
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: GatewayClassName}, Spec: gwv1.GatewayClassSpec{ControllerName: GatewayControllerName}}
	if err := rc.Create(ctx, class); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("regional cluster %s: creating GatewayClass: %w", c.Name, err)
	}
	if err := rc.Create(ctx, TenantGateway(domain, tcpPorts)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("regional cluster %s: creating the tenant Gateway: %w", c.Name, err)
	}
	return nil
}

// TenantGateway is the tenant Gateway an admin installs on a regional cluster: TLS terminated for
// *.<domain> with the wildcard certificate, and the TCP listener pool. Routes from every namespace
// may attach (the operator makes one namespace per workspace).
func TenantGateway(domain string, tcpPorts int) *gwv1.Gateway {
	host := gwv1.Hostname("*." + domain)
	mode := gwv1.TLSModeTerminate
	all := gwv1.NamespacesFromAll
	allowed := &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}
	ls := []gwv1.Listener{{
		Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: &host, AllowedRoutes: allowed,
		TLS: &gwv1.ListenerTLSConfig{Mode: &mode, CertificateRefs: []gwv1.SecretObjectReference{{Name: "tenant-wildcard-tls"}}},
	}}
	for i := 0; i < tcpPorts; i++ {
		ls = append(ls, gwv1.Listener{Name: gwv1.SectionName(fmt.Sprintf("ssh-%d", i+1)), Protocol: gwv1.TCPProtocolType,
			Port: gwv1.PortNumber(TCPPoolFirstPort + i), AllowedRoutes: allowed})
	}
	return &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: GatewayNamespace, Name: GatewayName},
		Spec:       gwv1.GatewaySpec{GatewayClassName: GatewayClassName, Listeners: ls},
	}
}
