package routing

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// RegionalRef names a regional ClusterDeployment: "<namespace>/<name>", or "<name>" for one in the
// child ClusterDeployment's namespace.
type RegionalRef struct {
	Namespace, Name string
}

// ParseRegionalRef parses a --default-regional-cluster value; "" gives the zero RegionalRef (no
// default).
func ParseRegionalRef(s string) (RegionalRef, error) {
	if s == "" {
		return RegionalRef{}, nil
	}
	ns, name, found := strings.Cut(s, "/")
	if !found {
		ns, name = "", s
	}
	if found && len(validation.IsDNS1123Label(ns)) > 0 {
		return RegionalRef{}, fmt.Errorf("the namespace %q of regional cluster %q is not a DNS label", ns, s)
	}
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return RegionalRef{}, fmt.Errorf("the ClusterDeployment name %q of regional cluster %q is not a DNS subdomain", name, s)
	}
	return RegionalRef{Namespace: ns, Name: name}, nil
}

// IsZero reports whether no regional cluster is named.
func (r RegionalRef) IsZero() bool { return r.Name == "" }

// RegionalCluster finds the regional ClusterDeployment of a child: the KOF label
// k0rdent.mirantis.com/kof-regional-cluster-name (with ...-namespace, else the child's namespace),
// else the operator's default. The second result says where the answer came from, for messages; ok
// is false when neither names one.
func RegionalCluster(cd *k0rdentv1beta1.ClusterDeployment, def RegionalRef) (key types.NamespacedName, source string, ok bool) {
	if name := cd.Labels[RegionalClusterNameLabel]; name != "" {
		ns := cd.Labels[RegionalClusterNamespaceLabel]
		if ns == "" {
			ns = cd.Namespace
		}
		return types.NamespacedName{Namespace: ns, Name: name}, "label " + RegionalClusterNameLabel + " of ClusterDeployment " + cd.Namespace + "/" + cd.Name, true
	}
	if def.IsZero() {
		return types.NamespacedName{}, "", false
	}
	ns := def.Namespace
	if ns == "" {
		ns = cd.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: def.Name}, "the operator's --default-regional-cluster", true
}
