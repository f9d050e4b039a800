// Package scheme builds the runtime scheme every component and test shares: the Kubernetes built-in
// types, the exalsius APIs, the k0rdent mirror and Cluster API's Cluster (its own types, v1beta2,
// which the colony-controller reads and nothing writes).
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// adders lists every API group the project uses.
var adders = []func(*runtime.Scheme) error{
	clientgoscheme.AddToScheme,
	infrav1.AddToScheme,
	workspacesv1.AddToScheme,
	k0rdentv1beta1.AddToScheme,
	clusterv1.AddToScheme,
}

// New returns a scheme with every API group the project uses registered.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range adders {
		utilruntime.Must(add(s))
	}
	return s
}
