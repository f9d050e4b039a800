package validation

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/tenancy"
)

// Colony checks a Colony: unique clusterNames, valid ClusterDeployment names, a clusterDeploymentSpec
// that is an object naming a template, valid labels and annotations, and none of the labels the
// colony-controller sets itself.
func Colony(c *infrav1.Colony) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "colonyClusters")
	seen := map[string]int{}
	for i := range c.Spec.ColonyClusters {
		cc := &c.Spec.ColonyClusters[i]
		ip := p.Index(i)
		np := ip.Child("clusterName")
		switch cc.ClusterName {
		case "":
			errs = append(errs, field.Required(np, "names the cluster within the Colony"))
		default:
			if first, dup := seen[cc.ClusterName]; dup {
				errs = append(errs, field.Invalid(np, cc.ClusterName, fmt.Sprintf("is already used by %s", p.Index(first))))
			} else {
				seen[cc.ClusterName] = i
			}
			if lerrs := dnsLabel(cc.ClusterName, np); len(lerrs) > 0 {
				errs = append(errs, lerrs...)
			} else if cd := c.Name + "-" + cc.ClusterName; len(dnsLabelMsgs(cd)) > 0 {
				errs = append(errs, field.Invalid(np, cc.ClusterName, fmt.Sprintf(
					"the ClusterDeployment name %q must be a DNS label of at most 63 characters: %s", cd, dnsLabelMsgs(cd)[0])))
			}
		}
		if cc.HasClusterDeploymentSpec() { // an entry without one makes no ClusterDeployment (as upstream)
			errs = append(errs, clusterDeploymentSpec(cc.ClusterDeploymentSpec.Raw, ip.Child("clusterDeploymentSpec"))...)
		}
		errs = append(errs, labelMap(cc.ClusterLabels, ip.Child("clusterLabels"))...)
		errs = append(errs, annotationKeys(cc.ClusterAnnotations, ip.Child("clusterAnnotations"))...)
		for _, reserved := range []string{infrav1.ColonyLabel, infrav1.ColonyClusterLabel} {
			if _, ok := cc.ClusterLabels[reserved]; ok {
				errs = append(errs, field.Forbidden(ip.Child("clusterLabels").Key(reserved), "is set by the colony-controller"))
			}
		}
	}
	return Sort(errs)
}

// regionalRef is a regional cluster that the KOF labels of entry index of a Colony name in another
// namespace than the Colony's.
type regionalRef struct {
	index int
	key   types.NamespacedName
}

// newRegionalRefs lists the regional clusters in other namespaces that the KOF labels of c's entries
// name and that old (nil on create) did not already name for the entry of the same clusterName: a
// reference admitted earlier is left to the workspace-controller, which checks it on every pass.
func newRegionalRefs(c, old *infrav1.Colony) []regionalRef {
	type entryRef struct {
		cluster string
		key     types.NamespacedName
	}
	had := map[entryRef]bool{}
	if old != nil {
		for _, cc := range old.Spec.ColonyClusters {
			if key, ok := k0rdentv1beta1.KOFRegionalCluster(cc.ClusterLabels, old.Namespace); ok {
				had[entryRef{cc.ClusterName, key}] = true
			}
		}
	}
	var refs []regionalRef
	for i, cc := range c.Spec.ColonyClusters {
		key, ok := k0rdentv1beta1.KOFRegionalCluster(cc.ClusterLabels, c.Namespace)
		if !ok || tenancy.SameNamespace(c.Namespace, key.Namespace) {
			continue
		}
		if had[entryRef{cc.ClusterName, key}] {
			continue
		}
		refs = append(refs, regionalRef{index: i, key: key})
	}
	return refs
}

// ColonyRegionalNamespaces returns, sorted and once each, the namespaces whose tenancy annotation
// ColonyRegional needs: those, other than c's, in which the KOF labels of c's entries newly name a
// regional cluster (see newRegionalRefs). Values that are not namespace names are left out: no
// namespace has such a name, and ColonyRegional refuses them.
func ColonyRegionalNamespaces(c, old *infrav1.Colony) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range newRegionalRefs(c, old) {
		if ns := r.key.Namespace; !seen[ns] && len(dnsLabelMsgs(ns)) == 0 {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	sort.Strings(out)
	return out
}

// ColonyRegional applies the tenancy rule (common/tenancy, docs/TENANCY.md) to the regional clusters
// that the KOF labels of c's entries name: the ClusterDeployments the colony-controller makes carry
// those labels, and the workspace-controller routes their workspaces through the regional cluster's
// Gateway, so a regional cluster in another namespace must be in one that allows c's namespace.
// namespaces holds the Namespaces that ColonyRegionalNamespaces listed; one that is absent does not
// exist. old is the Colony before an update (nil on create): a reference it already made is not
// checked again.
func ColonyRegional(c, old *infrav1.Colony, namespaces map[string]*corev1.Namespace) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "colonyClusters")
	for _, r := range newRegionalRefs(c, old) {
		ok, why := tenancy.Allowed(c.Namespace, namespaces[r.key.Namespace])
		if ok {
			continue
		}
		errs = append(errs, field.Forbidden(p.Index(r.index).Child("clusterLabels").Key(k0rdentv1beta1.KOFRegionalClusterNamespaceLabel),
			fmt.Sprintf("names regional cluster %s (with label %s), but a regional cluster in another namespace must be in one that allows this Colony's: %s (see docs/TENANCY.md)",
				r.key, k0rdentv1beta1.KOFRegionalClusterNameLabel, why)))
	}
	return Sort(errs)
}

// clusterDeploymentSpec checks the raw k0rdent ClusterDeploymentSpec: an object with a template, and
// the well-known keys of the right JSON type. Unknown keys are left alone.
func clusterDeploymentSpec(raw []byte, p *field.Path) field.ErrorList {
	if len(raw) == 0 {
		return field.ErrorList{field.Required(p, "the k0rdent ClusterDeploymentSpec, with at least a template")}
	}
	spec, err := decodeObject(raw)
	if err != nil {
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, err.Error())}
	}
	var errs field.ErrorList
	switch t := spec["template"].(type) {
	case nil:
		errs = append(errs, field.Required(p.Child("template"), "the ClusterTemplate to build the cluster from"))
	case string:
		if t == "" {
			errs = append(errs, field.Required(p.Child("template"), "the ClusterTemplate to build the cluster from"))
		} else {
			errs = append(errs, dnsSubdomain(t, p.Child("template"))...)
		}
	default:
		errs = append(errs, field.Invalid(p.Child("template"), field.OmitValueType{}, "must be a string, not "+jsonKind(t)))
	}
	for key, want := range map[string]string{"credential": "string", "config": "object", "dryRun": "bool",
		"propagateCredentials": "bool", "serviceSpec": "object", "ipamClaim": "object"} {
		v, ok := spec[key]
		if !ok || v == nil {
			continue
		}
		good := false
		switch want {
		case "string":
			_, good = v.(string)
		case "object":
			_, good = v.(map[string]any)
		case "bool":
			_, good = v.(bool)
		}
		if !good {
			errs = append(errs, field.Invalid(p.Child(key), field.OmitValueType{}, fmt.Sprintf("must be %s, not %s", article(want), jsonKind(v))))
		}
	}
	return errs
}

func article(kind string) string {
	switch kind {
	case "object":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return "a " + kind
}

// ColonyCollisions checks that the names a Colony gives its objects do not clash with those of the
// other Colonies of its namespace (others; c itself is skipped by name). A Colony `a` makes the
// ClusterDeployment `a-<clusterName>` per entry, whose kubeconfig Secret k0rdent names
// `a-<clusterName>-kubeconfig`, and its own kubeconfig Secret `a-kubeconfig`. So Colony `a-b` clashes
// with Colony `a`'s entry `b` (both want the Secret `a-b-kubeconfig`), and Colony `a-b`'s entry `c`
// with Colony `a`'s entry `b-c` (both want the ClusterDeployment `a-b-c`).
func ColonyCollisions(c *infrav1.Colony, others []infrav1.Colony) field.ErrorList {
	type owner struct{ colony, cluster string }
	clusters := map[string]owner{} // ClusterDeployment name -> the other Colony's entry
	colonies := map[string]bool{}  // names of the other Colonies
	for i := range others {
		o := &others[i]
		if o.Name == c.Name || o.DeletionTimestamp != nil {
			continue
		}
		colonies[o.Name] = true
		for _, cc := range o.Spec.ColonyClusters {
			clusters[o.Name+"-"+cc.ClusterName] = owner{o.Name, cc.ClusterName}
		}
	}
	var errs field.ErrorList
	if o, ok := clusters[c.Name]; ok {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), c.Name, fmt.Sprintf(
			"clashes with entry %q of Colony %q: both would use the Secret %s-kubeconfig; choose another name",
			o.cluster, o.colony, c.Name)))
	}
	p := field.NewPath("spec", "colonyClusters")
	for i, cc := range c.Spec.ColonyClusters {
		cd := c.Name + "-" + cc.ClusterName
		np := p.Index(i).Child("clusterName")
		if o, ok := clusters[cd]; ok {
			errs = append(errs, field.Invalid(np, cc.ClusterName, fmt.Sprintf(
				"clashes with entry %q of Colony %q: both would make the ClusterDeployment %s", o.cluster, o.colony, cd)))
		}
		if colonies[cd] {
			errs = append(errs, field.Invalid(np, cc.ClusterName, fmt.Sprintf(
				"clashes with Colony %q: its kubeconfig Secret and this cluster's would both be named %s", cd, k0rdentv1beta1.KubeconfigSecretName(cd))))
		}
	}
	return Sort(errs)
}
