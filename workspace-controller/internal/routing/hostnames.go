package routing

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/names"
)

// Tenant is what a Gateway serves for a tenant: its domain and how HTTP endpoints are reached.
type Tenant struct {
	// Domain is the tenant domain: the Gateway's wildcard listener hostname without "*.".
	Domain string
	// Scheme is "https" for an HTTPS listener, "http" for the HTTP fallback.
	Scheme string
	// Listener is the name of the wildcard listener HTTPRoutes attach to.
	Listener gwv1.SectionName
}

// TenantFromGateway derives the tenant domain from the Gateway's wildcard listener hostname
// (`*.tenant.example` -> `tenant.example`). An HTTPS listener wins over an HTTP one (the URL scheme
// follows the listener); among listeners of the same protocol the first declared wins. It returns
// false when the Gateway has no usable wildcard listener.
func TenantFromGateway(gw *gwv1.Gateway) (Tenant, bool) {
	for _, proto := range []gwv1.ProtocolType{gwv1.HTTPSProtocolType, gwv1.HTTPProtocolType} {
		for _, l := range gw.Spec.Listeners {
			if l.Protocol != proto || l.Hostname == nil {
				continue
			}
			h := string(*l.Hostname)
			domain, ok := strings.CutPrefix(h, "*.")
			if !ok || domain == "" || len(validation.IsDNS1123Subdomain(domain)) > 0 {
				continue
			}
			return Tenant{Domain: domain, Scheme: strings.ToLower(string(proto)), Listener: l.Name}, true
		}
	}
	return Tenant{}, false
}

// TCPPool returns the Gateway's TCP listeners, the port pool of SSH and TCP endpoints.
func TCPPool(gw *gwv1.Gateway) []gwv1.Listener {
	var out []gwv1.Listener
	for _, l := range gw.Spec.Listeners {
		if l.Protocol == gwv1.TCPProtocolType {
			out = append(out, l)
		}
	}
	return out
}

// HostLabel is the first DNS label of an HTTP endpoint's hostname: the workspace's host base for the
// primary (first) HTTP endpoint, <base>-<endpoint> for the others.
func HostLabel(base, endpoint string, primary bool) string {
	if primary {
		return base
	}
	return base + "-" + endpoint
}

// CheckHostLabel explains why a hostname label cannot be used, or returns "".
func CheckHostLabel(label string) string {
	if len(label) > validation.DNS1123LabelMaxLength {
		return fmt.Sprintf("the hostname label %q has %d characters, more than the 63 a DNS label may have; shorten the workspace or endpoint name",
			label, len(label))
	}
	if errs := validation.IsDNS1123Label(label); len(errs) > 0 {
		return fmt.Sprintf("the hostname label %q is not a DNS label: %s", label, strings.Join(errs, "; "))
	}
	return ""
}

// Qualifier is the short, stable suffix that sets a workspace apart from a same-named workspace of
// another namespace behind the same Gateway: 5 hex characters of the SHA-256 of its namespace
// (names.NamespaceQualifier, which the release namespaces of shared clusters carry too).
func Qualifier(namespace string) string { return names.NamespaceQualifier(namespace) }

// hostBase is the workspace part of its hostnames: the name, or <name>-<qualifier> when qualified.
func hostBase(name, namespace string, qualified bool) string {
	if qualified {
		return name + "-" + Qualifier(namespace)
	}
	return name
}

// RouteNamespacePrefix starts every route namespace. It differs from the release namespaces' "ws-",
// so a route namespace never has the name of a release namespace (a regional cluster may also run
// workspaces, and ws-<name> there is the release namespace of its own workspace of that name).
const RouteNamespacePrefix = "wsr"

// RouteNamespace is the workspace's namespace on a regional cluster that is not its own cluster:
// wsr-<name>, or wsr-<name>-<qualifier> when that is taken by a same-named workspace of another
// namespace.
func RouteNamespace(name, namespace string, qualified bool) string {
	if qualified {
		return names.DNSLabel(RouteNamespacePrefix, name, Qualifier(namespace))
	}
	return names.DNSLabel(RouteNamespacePrefix, name)
}

// BackendService is the name of an endpoint's Service on the child, mirrored on the regional
// cluster: serviceName, else <release>-<endpoint>.
func BackendService(release string, ep workspacesv1.AccessEndpoint) string {
	if ep.ServiceName != "" {
		return ep.ServiceName
	}
	return names.DNSLabel(release, ep.Name)
}

// HTTPURL is the URL of an HTTP endpoint.
func HTTPURL(t Tenant, label string) string {
	return fmt.Sprintf("%s://%s.%s", t.Scheme, label, t.Domain)
}

// PortURL is the URL of an SSH or TCP endpoint on a pool port.
func PortURL(protocol workspacesv1.EndpointProtocol, domain string, port int32) string {
	scheme := "tcp"
	if protocol == workspacesv1.EndpointProtocolSSH {
		scheme = "ssh"
	}
	return fmt.Sprintf("%s://%s:%d", scheme, domain, port)
}
