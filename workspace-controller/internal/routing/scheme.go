package routing

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/exalsius/exalsius-operator/common/scheme"
)

// Scheme is the scheme of regional-cluster clients: the operator's scheme plus the Gateway API
// (gateway.networking.k8s.io/v1: Gateway, HTTPRoute and TCPRoute).
func Scheme() *runtime.Scheme {
	s := scheme.New()
	utilruntime.Must(gwv1.Install(s))
	return s
}
