package validation

import (
	"fmt"
	"net"
	"strings"

	"github.com/Masterminds/semver/v3"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/classpaths"
)

// ImmutableClassMessage is the detail of the denial of a WorkspaceClass spec change.
const ImmutableClassMessage = "a WorkspaceClass is immutable: publish a new WorkspaceClass with the new version in its " +
	"name (for example jupyter-notebook-0-4-0) and point WorkspaceDeployments at it"

// WorkspaceClass checks a class on create (and on an update that changes it).
func WorkspaceClass(wc *workspacesv1.WorkspaceClass) field.ErrorList {
	spec := field.NewPath("spec")
	s := &wc.Spec
	var errs field.ErrorList
	errs = append(errs, dnsSubdomain(wc.Name, field.NewPath("metadata", "name"))...)
	if strings.TrimSpace(s.DisplayName) == "" {
		errs = append(errs, field.Required(spec.Child("displayName"), "a class needs a display name"))
	}
	errs = append(errs, serviceTemplate(&s.ServiceTemplate, spec.Child("serviceTemplate"))...)
	errs = append(errs, classResources(&s.DefaultResources, spec.Child("defaultResources"))...)
	errs = append(errs, prerequisites(s, spec.Child("prerequisites"))...)
	errs = append(errs, accessEndpoints(s.AccessEndpoints, spec.Child("accessEndpoints"))...)
	errs = append(errs, classpaths.Check(classpaths.Of(s, spec))...)
	errs = append(errs, userFacingConfig(s, spec)...)
	errs = append(errs, positiveDuration(s.DeployTimeout, spec.Child("deployTimeout"))...)
	errs = append(errs, positiveDuration(s.PrerequisiteDeployTimeout, spec.Child("prerequisiteDeployTimeout"))...)
	if s.AllowedNamespaces != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.AllowedNamespaces,
			metav1validation.LabelSelectorValidationOptions{}, spec.Child("allowedNamespaces"))...)
	}
	if np := s.NetworkPolicy; np != nil {
		for i, peer := range np.AllowFrom {
			errs = append(errs, networkPeer(peer, spec.Child("networkPolicy", "allowFrom").Index(i))...)
		}
	}
	if s.EnforcedValues != nil {
		if vals, err := decodeObject(s.EnforcedValues.Raw); err != nil {
			errs = append(errs, field.Invalid(spec.Child("enforcedValues"), field.OmitValueType{}, err.Error()))
		} else if _, ok := vals[workspacesv1.ExalsiusValuesKey]; ok {
			errs = append(errs, field.Forbidden(spec.Child("enforcedValues", workspacesv1.ExalsiusValuesKey),
				"is written by the operator; set resources in spec.defaultResources"))
		}
	}
	if s.DefaultValues != nil {
		if vals, err := decodeObject(s.DefaultValues.Raw); err != nil {
			errs = append(errs, field.Invalid(spec.Child("defaultValues"), field.OmitValueType{}, err.Error()))
		} else if _, ok := vals[workspacesv1.ExalsiusValuesKey]; ok {
			errs = append(errs, field.Forbidden(spec.Child("defaultValues", workspacesv1.ExalsiusValuesKey),
				"is written by the operator; set resources in spec.defaultResources"))
		}
	}
	return Sort(errs)
}

// networkPeer checks one NetworkPolicy peer as the child's API server will: an ipBlock alone, or
// pod and namespace selectors that parse, so that a class never makes the release namespaces'
// NetworkPolicy fail on every child.
func networkPeer(peer networkingv1.NetworkPolicyPeer, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	selectors := peer.PodSelector != nil || peer.NamespaceSelector != nil
	switch {
	case peer.IPBlock != nil && selectors:
		return field.ErrorList{field.Forbidden(p, "an ipBlock peer may not also have a podSelector or namespaceSelector")}
	case peer.IPBlock == nil && !selectors:
		return field.ErrorList{field.Required(p, "one of podSelector, namespaceSelector and ipBlock")}
	case peer.IPBlock != nil:
		_, cidr, err := net.ParseCIDR(peer.IPBlock.CIDR)
		if err != nil {
			return field.ErrorList{field.Invalid(p.Child("ipBlock", "cidr"), peer.IPBlock.CIDR, "not a CIDR")}
		}
		for j, ex := range peer.IPBlock.Except {
			_, exNet, err := net.ParseCIDR(ex)
			if err != nil || !cidr.Contains(exNet.IP) {
				errs = append(errs, field.Invalid(p.Child("ipBlock", "except").Index(j), ex, "not a CIDR within ipBlock.cidr"))
			}
		}
		return errs
	}
	if peer.PodSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.PodSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("podSelector"))...)
	}
	if peer.NamespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.NamespaceSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("namespaceSelector"))...)
	}
	return errs
}

// WorkspaceClassUpdate checks a class update: the spec never changes.
func WorkspaceClassUpdate(oldWC, newWC *workspacesv1.WorkspaceClass) field.ErrorList {
	if apiequality.Semantic.DeepEqual(oldWC.Spec, newWC.Spec) {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec"), ImmutableClassMessage)}
}

func positiveDuration(d *metav1.Duration, p *field.Path) field.ErrorList {
	if d != nil && d.Duration <= 0 {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), "must be greater than zero")}
	}
	return nil
}

func serviceTemplate(st *workspacesv1.ServiceTemplateRef, p *field.Path) field.ErrorList {
	return serviceTemplateRef(st, p, "the ServiceTemplate holding the workspace's chart")
}

// serviceTemplateRef checks a ServiceTemplate reference: name, namespace and version range.
func serviceTemplateRef(st *workspacesv1.ServiceTemplateRef, p *field.Path, what string) field.ErrorList {
	var errs field.ErrorList
	if st.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), what))
	} else {
		errs = append(errs, dnsSubdomain(st.Name, p.Child("name"))...)
	}
	if st.Namespace != "" {
		errs = append(errs, dnsLabel(st.Namespace, p.Child("namespace"))...)
	}
	if st.VersionConstraint != "" {
		if _, err := semver.NewConstraint(st.VersionConstraint); err != nil {
			errs = append(errs, field.Invalid(p.Child("versionConstraint"), st.VersionConstraint,
				"must be a semantic version range such as `>=0.3.0, <0.4.0`: "+err.Error()))
		}
	}
	return errs
}

// classResources checks a class's defaultResources; a class may not pick GPU nodes.
func classResources(r *workspacesv1.DefaultResources, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.Replicas != nil && *r.Replicas < 1 {
		errs = append(errs, field.Invalid(p.Child("replicas"), *r.Replicas, "must be at least 1"))
	}
	if r.PerReplica == nil {
		return errs
	}
	pr := p.Child("perReplica")
	errs = append(errs, perReplicaQuantities(r.PerReplica, pr)...)
	if r.PerReplica.GPUType != "" {
		errs = append(errs, field.Forbidden(pr.Child("gpuType"), "a WorkspaceClass may not set gpuType; a WorkspaceDeployment picks it"))
	}
	if len(r.PerReplica.GPUNodeSelector) > 0 {
		errs = append(errs, field.Forbidden(pr.Child("gpuNodeSelector"), "a WorkspaceClass may not set gpuNodeSelector; a WorkspaceDeployment picks it"))
	}
	return errs
}

// perReplicaQuantities checks the quantities, the GPU count and the vendor of per-replica resources.
func perReplicaQuantities(r *workspacesv1.PerReplicaResources, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, positiveQuantity(r.CPU, p.Child("cpu"))...)
	errs = append(errs, positiveQuantity(r.Memory, p.Child("memory"))...)
	errs = append(errs, positiveQuantity(r.Storage, p.Child("storage"))...)
	if r.GPUCount != nil && (*r.GPUCount < 0 || *r.GPUCount > 64) {
		errs = append(errs, field.Invalid(p.Child("gpuCount"), *r.GPUCount, "must be between 0 and 64"))
	}
	switch r.GPUVendor {
	case "", workspacesv1.GPUVendorNVIDIA, workspacesv1.GPUVendorAMD:
	default:
		errs = append(errs, field.NotSupported(p.Child("gpuVendor"), r.GPUVendor,
			[]workspacesv1.GPUVendor{workspacesv1.GPUVendorNVIDIA, workspacesv1.GPUVendorAMD}))
	}
	return errs
}

// prerequisites checks each prerequisite's ServiceTemplate reference like the class's own, that each
// template is named once and is not the class's own, and the optional release namespace.
func prerequisites(s *workspacesv1.WorkspaceClassSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i := range s.Prerequisites {
		pr := &s.Prerequisites[i]
		ip := p.Index(i)
		tp := ip.Child("serviceTemplate")
		errs = append(errs, serviceTemplateRef(&pr.ServiceTemplate, tp, "the prerequisite's ServiceTemplate")...)
		name := pr.ServiceTemplate.Name
		if name != "" && seen[name] {
			errs = append(errs, field.Duplicate(tp.Child("name"), name))
		}
		seen[name] = true
		if name != "" && name == s.ServiceTemplate.Name && pr.TemplateNamespace() == templateNamespace(&s.ServiceTemplate) {
			errs = append(errs, field.Invalid(tp.Child("name"), name, "the class's own ServiceTemplate cannot be its prerequisite"))
		}
		if pr.Namespace != "" {
			errs = append(errs, dnsLabel(pr.Namespace, ip.Child("namespace"))...)
		}
		if pr.Values != nil {
			if _, err := decodeObject(pr.Values.Raw); err != nil {
				errs = append(errs, field.Invalid(ip.Child("values"), field.OmitValueType{}, err.Error()))
			}
		}
	}
	return errs
}

func templateNamespace(st *workspacesv1.ServiceTemplateRef) string {
	if st.Namespace != "" {
		return st.Namespace
	}
	return workspacesv1.DefaultServiceTemplateNamespace
}

// accessEndpoints checks names, protocols and ports: a name is used once, and one port of one Service
// serves one endpoint.
func accessEndpoints(eps []workspacesv1.AccessEndpoint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	ports := map[string]string{}
	for i, ep := range eps {
		ip := p.Index(i)
		if ep.Name == "" {
			errs = append(errs, field.Required(ip.Child("name"), "endpoints are named"))
		} else {
			errs = append(errs, dnsLabel(ep.Name, ip.Child("name"))...)
		}
		if names[ep.Name] {
			errs = append(errs, field.Duplicate(ip.Child("name"), ep.Name))
		}
		names[ep.Name] = true
		switch ep.Protocol {
		case workspacesv1.EndpointProtocolHTTP, workspacesv1.EndpointProtocolTCP, workspacesv1.EndpointProtocolSSH:
		case "":
			errs = append(errs, field.Required(ip.Child("protocol"), "one of HTTP, TCP, SSH"))
		default:
			errs = append(errs, field.NotSupported(ip.Child("protocol"), ep.Protocol, []workspacesv1.EndpointProtocol{
				workspacesv1.EndpointProtocolHTTP, workspacesv1.EndpointProtocolTCP, workspacesv1.EndpointProtocolSSH}))
		}
		if ep.Port < 1 || ep.Port > 65535 {
			errs = append(errs, field.Invalid(ip.Child("port"), ep.Port, "must be between 1 and 65535"))
		}
		if ep.ServiceName != "" {
			errs = append(errs, dnsLabel(ep.ServiceName, ip.Child("serviceName"))...)
		}
		key := fmt.Sprintf("%s:%d", ep.ServiceName, ep.Port)
		if other, ok := ports[key]; ok && ep.Port > 0 {
			errs = append(errs, field.Invalid(ip.Child("port"), ep.Port,
				fmt.Sprintf("endpoint %q already uses this port of the same Service", other)))
		} else {
			ports[key] = ep.Name
		}
	}
	return errs
}
