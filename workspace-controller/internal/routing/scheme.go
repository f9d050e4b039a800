package routing

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"github.com/exalsius/exalsius-operator/common/scheme"
)

// Scheme is the scheme of regional-cluster clients: the operator's scheme plus the Gateway API
// (gateway.networking.k8s.io/v1: Gateway, HTTPRoute and TCPRoute; v1alpha2 for the TCPRoute of
// regional clusters on Gateway API 1.4 and 1.5, tcpversion.go).
func Scheme() *runtime.Scheme {
	s := scheme.New()
	utilruntime.Must(gwv1.Install(s))
	utilruntime.Must(gwv1alpha2.Install(s))
	return s
}
