package routing

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/tenancy"
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
// is false when neither names one. A reference taken from the labels may be used only when
// allowRegional allows it.
func RegionalCluster(cd *k0rdentv1beta1.ClusterDeployment, def RegionalRef) (key types.NamespacedName, source string, ok bool) {
	if key, ok := k0rdentv1beta1.KOFRegionalCluster(cd.Labels, cd.Namespace); ok {
		return key, "label " + RegionalClusterNameLabel + " of ClusterDeployment " + cd.Namespace + "/" + cd.Name, true
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

// allowRegional applies the tenancy rule (common/tenancy, docs/TENANCY.md) to the regional cluster
// key that RegionalCluster found for cd: when the KOF labels named it, its namespace must allow cd's
// namespace. Those labels are tenant input (a Colony's clusterLabels); without the rule a tenant could
// publish URLs under another tenant's domain, spend its Gateway's TCP ports and have the operator use
// its regional cluster's credentials. The operator's --default-regional-cluster is the platform team's
// choice and is not checked. It returns "" when key may be used, else a message saying why not; an
// error means the namespace could not be read.
func allowRegional(ctx context.Context, r Regionals, cd *k0rdentv1beta1.ClusterDeployment, key types.NamespacedName) (string, error) {
	if cd == nil { // no ClusterDeployment, no labels: only the default can have named key
		return "", nil
	}
	if _, fromLabels := k0rdentv1beta1.KOFRegionalCluster(cd.Labels, cd.Namespace); !fromLabels || tenancy.SameNamespace(cd.Namespace, key.Namespace) {
		return "", nil
	}
	var target *corev1.Namespace
	if len(validation.IsDNS1123Label(key.Namespace)) == 0 {
		ns, err := r.Namespace(ctx, key.Namespace)
		if err != nil {
			return "", fmt.Errorf("reading namespace %s of regional cluster %s: %w", key.Namespace, key, err)
		}
		target = ns
	}
	if ok, why := tenancy.Allowed(cd.Namespace, target); !ok {
		return fmt.Sprintf("regional cluster %s (named by the labels %s and %s of ClusterDeployment %s/%s) is not used: %s (see docs/TENANCY.md)",
			key, RegionalClusterNameLabel, RegionalClusterNamespaceLabel, cd.Namespace, cd.Name, why), nil
	}
	return "", nil
}
