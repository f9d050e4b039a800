package v1

import (
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultServiceTemplateNamespace is where a class's ServiceTemplate is looked up when the class names
// no namespace.
const DefaultServiceTemplateNamespace = "kcm-system"

// ServiceTemplateRef names the k0rdent ServiceTemplate (the workspace's Helm chart) of a class.
type ServiceTemplateRef struct {
	// Name of the ServiceTemplate.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace of the ServiceTemplate; kcm-system when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// VersionConstraint is a semantic version range the template's chart version must satisfy, for
	// example `>=0.3.0, <0.4.0`.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	VersionConstraint string `json:"versionConstraint,omitempty"`
}

// DefaultPrerequisiteNamespace is the release namespace on the child of a prerequisite that names
// none, as in k0rdent.
const DefaultPrerequisiteNamespace = "default"

// Prerequisite is a service a workspace needs on its cluster before it is installed (a GPU operator, a
// shared inference gateway). Each is one ServiceSet per cluster, shared by every workspace that needs
// it, or a service the Colony already put on the ClusterDeployment.
type Prerequisite struct {
	// ServiceTemplate names the k0rdent ServiceTemplate of the prerequisite, resolved like the class's
	// own template (namespace kcm-system when empty, versionConstraint checked). Its name is also the
	// Helm release name on the child.
	// +required
	ServiceTemplate ServiceTemplateRef `json:"serviceTemplate"`

	// Namespace on the child cluster the prerequisite is installed in. When empty it is installed in
	// `default`, and a copy another provider (the Colony, another class) already installed in any
	// namespace is accepted. When set, a copy in another namespace is a conflict
	// (PrerequisiteNamespaceConflict).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// Values are the prerequisite's Helm values.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Values *apiextensionsv1.JSON `json:"values,omitempty"`
}

// ReleaseNamespace is the namespace the operator installs the prerequisite in: spec namespace, else
// `default`.
func (p *Prerequisite) ReleaseNamespace() string {
	if p.Namespace != "" {
		return p.Namespace
	}
	return DefaultPrerequisiteNamespace
}

// TemplateNamespace is the namespace of the prerequisite's ServiceTemplate: kcm-system when empty.
func (p *Prerequisite) TemplateNamespace() string {
	if p.ServiceTemplate.Namespace != "" {
		return p.ServiceTemplate.Namespace
	}
	return DefaultServiceTemplateNamespace
}

// EndpointProtocol is the protocol of an access endpoint.
// +kubebuilder:validation:Enum=HTTP;TCP;SSH
type EndpointProtocol string

const (
	// EndpointProtocolHTTP is served at https://<ws>.<tenant-domain>.
	EndpointProtocolHTTP EndpointProtocol = "HTTP"
	// EndpointProtocolTCP is served at a port of the tenant domain.
	EndpointProtocolTCP EndpointProtocol = "TCP"
	// EndpointProtocolSSH is served at ssh://<tenant-domain>:<port>.
	EndpointProtocolSSH EndpointProtocol = "SSH"
)

// AccessEndpoint is one way users reach a workspace.
type AccessEndpoint struct {
	// Name of the endpoint, unique in the class.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Protocol is HTTP, TCP or SSH.
	// +required
	Protocol EndpointProtocol `json:"protocol"`

	// Port of the workspace's Service.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// ServiceName is the workspace's Service on the child that serves the endpoint (for charts with
	// fixed Service names); <release>-<endpoint> when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ServiceName string `json:"serviceName,omitempty"`

	// Description tells users what the endpoint is for.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`
}

// UserFacingConfigType is the type of a value users may set.
// +kubebuilder:validation:Enum=string;int;bool;secret;publicKey
type UserFacingConfigType string

const (
	// UserFacingConfigString is any string.
	UserFacingConfigString UserFacingConfigType = "string"
	// UserFacingConfigInt is a whole number.
	UserFacingConfigInt UserFacingConfigType = "int"
	// UserFacingConfigBool is true or false.
	UserFacingConfigBool UserFacingConfigType = "bool"
	// UserFacingConfigSecret is a string that is never logged, shown in events or copied to status.
	UserFacingConfigSecret UserFacingConfigType = "secret"
	// UserFacingConfigPublicKey is an SSH public key.
	UserFacingConfigPublicKey UserFacingConfigType = "publicKey"
)

// UserFacingConfig is one Helm value that users may set on a WorkspaceDeployment, shown in catalogs.
type UserFacingConfig struct {
	// HelmValuePath is the dot-separated path of the value in the chart's values, with quoted bracket
	// segments for keys holding dots: `a.b["nvidia.com/gpu"]`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	HelmValuePath string `json:"helmValuePath"`

	// DisplayName is the value's name in catalogs.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	DisplayName string `json:"displayName"`

	// Description tells users what the value does.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// Type of the value: string, int, bool, secret or publicKey. Default string, as the upstream
	// operator defaults it.
	// +optional
	// +kubebuilder:default=string
	Type UserFacingConfigType `json:"type,omitempty"`

	// Required values must be set on every WorkspaceDeployment of the class.
	// +optional
	Required bool `json:"required,omitempty"`

	// Default is the value used when the user sets none; it must match the type and the options.
	// +optional
	Default *apiextensionsv1.JSON `json:"default,omitempty"`

	// Options, when set, are the only values allowed.
	// +optional
	// +listType=atomic
	Options []apiextensionsv1.JSON `json:"options,omitempty"`
}

// ResourceInjection lists, for each resolved resource, the Helm value paths it is written to, in the
// same path syntax as userFacingConfig.helmValuePath.
type ResourceInjection struct {
	// Replicas is written to these paths.
	// +optional
	// +listType=atomic
	Replicas []string `json:"replicas,omitempty"`
	// CPU is written to these paths.
	// +optional
	// +listType=atomic
	CPU []string `json:"cpu,omitempty"`
	// Memory is written to these paths.
	// +optional
	// +listType=atomic
	Memory []string `json:"memory,omitempty"`
	// Storage is written to these paths.
	// +optional
	// +listType=atomic
	Storage []string `json:"storage,omitempty"`
	// GPUCount is written to these paths.
	// +optional
	// +listType=atomic
	GPUCount []string `json:"gpuCount,omitempty"`
	// GPUVendor is written to these paths.
	// +optional
	// +listType=atomic
	GPUVendor []string `json:"gpuVendor,omitempty"`
	// GPUType is written to these paths.
	// +optional
	// +listType=atomic
	GPUType []string `json:"gpuType,omitempty"`
	// NodeSelector is written to these paths: the node selector the GPU gate checked, with the
	// admitted node pinned (`_exalsius.scheduling.nodeSelector`). It replaces what a user set there.
	// +optional
	// +listType=atomic
	NodeSelector []string `json:"nodeSelector,omitempty"`
	// Affinity is written to these paths: a required node affinity to the nodes the GPU gate admitted
	// the workspace on (`_exalsius.scheduling.affinity`). It replaces what a user set there.
	// +optional
	// +listType=atomic
	Affinity []string `json:"affinity,omitempty"`
	// Tolerations is written to these paths: the toleration of the GPU resource's taint
	// (`_exalsius.scheduling.tolerations`). It replaces what a user set there.
	// +optional
	// +listType=atomic
	Tolerations []string `json:"tolerations,omitempty"`
}

// WorkspaceClassSpec describes a workspace type. It is immutable: publish a new class, with the new
// version in its name, to change it.
type WorkspaceClassSpec struct {
	// DisplayName is the class's name in catalogs.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	DisplayName string `json:"displayName"`

	// Description tells users what the class gives them.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Description string `json:"description,omitempty"`

	// ServiceTemplate is the k0rdent ServiceTemplate holding the workspace's Helm chart.
	// +required
	ServiceTemplate ServiceTemplateRef `json:"serviceTemplate"`

	// DefaultResources are the resources of each workspace, which a WorkspaceDeployment may override.
	// +optional
	// +kubebuilder:default={replicas: 1}
	DefaultResources DefaultResources `json:"defaultResources,omitempty"`

	// Prerequisites are services installed on the cluster before the workspace; each template name
	// appears once.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(p, self.exists_one(q, q.serviceTemplate.name == p.serviceTemplate.name))",message="each prerequisite ServiceTemplate name appears once"
	Prerequisites []Prerequisite `json:"prerequisites,omitempty"`

	// AccessEndpoints are the ways users reach the workspace.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	AccessEndpoints []AccessEndpoint `json:"accessEndpoints,omitempty"`

	// UserFacingConfig lists the values users may set.
	// +optional
	// +listType=map
	// +listMapKey=helmValuePath
	// +kubebuilder:validation:MaxItems=64
	UserFacingConfig []UserFacingConfig `json:"userFacingConfig,omitempty"`

	// DeployTimeout bounds the time from install to Running; past it the workspace is Failed. A
	// duration such as `15m` or `1h30m` (units h, m, s, ms).
	// +optional
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	DeployTimeout *metav1.Duration `json:"deployTimeout,omitempty"`

	// PrerequisiteDeployTimeout bounds the time the prerequisites take to be deployed. A duration such
	// as `10m` (units h, m, s, ms).
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	PrerequisiteDeployTimeout *metav1.Duration `json:"prerequisiteDeployTimeout,omitempty"`

	// DefaultValues are the chart's Helm values, under the workspace's own values.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	DefaultValues *apiextensionsv1.JSON `json:"defaultValues,omitempty"`

	// EnforcedValues are Helm values the class sets over the workspace's own: deep-merged after
	// spec.values and spec.valuesFrom, so a workspace cannot change them (a security context, a
	// service account, a network setting the platform relies on). The webhook refuses spec.values
	// that set one of their paths; a valuesFrom document that does is overwritten, and
	// ResourcesInjected says so (UserValuesOverwritten).
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	EnforcedValues *apiextensionsv1.JSON `json:"enforcedValues,omitempty"`

	// ResourceInjection writes the resolved resources into the chart's own value paths, in addition to
	// the `_exalsius` block every chart receives.
	// +optional
	ResourceInjection *ResourceInjection `json:"resourceInjection,omitempty"`

	// PodSecurityLevel is the Pod Security Admission level enforced on each workspace's release
	// namespace ws-<name> on the child: privileged, baseline or restricted; baseline when empty.
	// +optional
	PodSecurityLevel PodSecurityLevel `json:"podSecurityLevel,omitempty"`

	// NetworkPolicy is the ingress isolation of each workspace's release namespace on the child. By
	// default (isolation Namespace) a NetworkPolicy there admits traffic to the workspace's pods only
	// from the namespace itself, from the namespaces of the Gateway's and the mesh's data planes (the
	// workspace-controller's --release-ingress-namespaces and --gateway-namespace) and from allowFrom;
	// every other workspace on a shared child is shut out.
	// +optional
	NetworkPolicy *ReleaseNetworkPolicy `json:"networkPolicy,omitempty"`

	// ComputeQuota, when set, also caps CPU and memory requests and the pod count of each release
	// namespace on the child at the workspace's resolved resources times its replicas, plus
	// headroomReplicas for rollouts. Only for charts that set requests on every container (the
	// `_exalsius` block's): the child refuses pods without them.
	// +optional
	ComputeQuota *ComputeQuota `json:"computeQuota,omitempty"`

	// AllowResourceClaims lets the workspaces' pods use DRA ResourceClaims. By default the release
	// namespace's ResourceQuota allows none, so that no device reaches a pod past the GPU gate.
	// +optional
	AllowResourceClaims bool `json:"allowResourceClaims,omitempty"`

	// ValuesPolicy says which Helm values a workspace may set, in spec.values and through
	// spec.valuesFrom: Any (the default) accepts any path; Declared accepts only the paths of
	// spec.userFacingConfig (and what lies under them), so that a chart's other values (extraObjects,
	// namespaceOverride, nodeSelector, affinity, tolerations, ...) stay the class's. A value at any
	// other path is refused by the webhook, and fails the workspace (InvalidValues) when it comes from
	// a valuesFrom source, naming the path.
	// +optional
	// +kubebuilder:default=Any
	ValuesPolicy ValuesPolicy `json:"valuesPolicy,omitempty"`

	// AllowedNamespaces selects, by their labels, the namespaces whose WorkspaceDeployments may use
	// the class; unset allows every namespace, and an empty selector ({}) selects every namespace too.
	// The webhook refuses a workspace of a namespace it does not select; the controller checks again
	// on every pass, and a workspace whose namespace stops matching keeps its installed release as it
	// is, with ClassResolved False (ClassNotAllowed), until it matches again or is deleted.
	// +optional
	AllowedNamespaces *metav1.LabelSelector `json:"allowedNamespaces,omitempty"`

	// HelmOptions are passed as each workspace service's k0rdent helmOptions (wait, timeout, atomic,
	// ...). When empty none are sent, and KCM's defaults apply: from KCM v1.11.3 installs are atomic
	// (they wait for the release's resources, 5 minutes by default) unless atomic is false, whether or
	// not other options are sent. While a workspace is stopped, its service gets them with wait,
	// waitForJobs and atomic set to false.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	HelmOptions *apiextensionsv1.JSON `json:"helmOptions,omitempty"`
}

// ValuesPolicy is which Helm values a class lets workspaces set.
// +kubebuilder:validation:Enum=Any;Declared
type ValuesPolicy string

const (
	// ValuesPolicyAny accepts a value at any path.
	ValuesPolicyAny ValuesPolicy = "Any"
	// ValuesPolicyDeclared accepts values only at the class's userFacingConfig paths.
	ValuesPolicyDeclared ValuesPolicy = "Declared"
)

// ComputeQuota caps a release namespace's CPU, memory and pods.
type ComputeQuota struct {
	// HeadroomReplicas are the replicas' worth of CPU, memory and pods allowed on top of the
	// workspace's replicas, for a rollout that starts new pods before the old ones go (a Deployment's
	// maxSurge) and for the chart's hook and helper pods.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	HeadroomReplicas int32 `json:"headroomReplicas,omitempty"`
}

// NetworkIsolation says whether a release namespace is isolated.
// +kubebuilder:validation:Enum=Namespace;None
type NetworkIsolation string

const (
	// NetworkIsolationNamespace admits ingress from the namespace itself, the data planes and allowFrom.
	NetworkIsolationNamespace NetworkIsolation = "Namespace"
	// NetworkIsolationNone makes no NetworkPolicy.
	NetworkIsolationNone NetworkIsolation = "None"
)

// ReleaseNetworkPolicy is the ingress isolation of a class's release namespaces.
type ReleaseNetworkPolicy struct {
	// Isolation is Namespace (the default) or None.
	// +optional
	Isolation NetworkIsolation `json:"isolation,omitempty"`
	// AllowFrom are further peers that may reach the workspaces' pods, for example a monitoring
	// namespace that scrapes them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	AllowFrom []networkingv1.NetworkPolicyPeer `json:"allowFrom,omitempty"`
}

// PodSecurityLevel is a Pod Security Admission level.
// +kubebuilder:validation:Enum=privileged;baseline;restricted
type PodSecurityLevel string

const (
	// PodSecurityPrivileged enforces nothing.
	PodSecurityPrivileged PodSecurityLevel = "privileged"
	// PodSecurityBaseline prevents known privilege escalations; the default.
	PodSecurityBaseline PodSecurityLevel = "baseline"
	// PodSecurityRestricted follows pod hardening best practices.
	PodSecurityRestricted PodSecurityLevel = "restricted"
)

// WorkspaceClassStatus is the observed state of a WorkspaceClass.
type WorkspaceClassStatus struct {
	// Valid is true when the ServiceTemplate exists and is valid and the class's paths parse.
	// +optional
	Valid bool `json:"valid"`

	// ValidationError says why the class is not valid.
	// +optional
	ValidationError string `json:"validationError,omitempty"`

	// Conditions: Ready; Reconciling while the class waits for a ServiceTemplate to exist or to be
	// validated, Stalled while it is invalid otherwise (the kstatus conventions; both repeat Ready's
	// reason and message and are absent while the class is valid).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// InUseBy is the number of WorkspaceDeployments that use the class.
	// +optional
	InUseBy int32 `json:"inUseBy"`
}

// WorkspaceClass is an administrator's catalog entry for a workspace type. The name carries the
// version (`jupyter-notebook-0-3-0`) and the spec never changes.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=exalsius,shortName=wsc
// +kubebuilder:printcolumn:name="Display Name",type=string,JSONPath=`.spec.displayName`
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.serviceTemplate.name`
// +kubebuilder:printcolumn:name="Valid",type=boolean,JSONPath=`.status.valid`
// +kubebuilder:printcolumn:name="In Use",type=integer,JSONPath=`.status.inUseBy`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="spec is immutable: publish a new WorkspaceClass with the new version in its name",fieldPath=.spec
type WorkspaceClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec describes the workspace type.
	// +required
	Spec WorkspaceClassSpec `json:"spec"`

	// Status is the observed state.
	// +optional
	Status WorkspaceClassStatus `json:"status,omitempty"`
}

// WorkspaceClassList is a list of WorkspaceClasses.
//
// +kubebuilder:object:root=true
type WorkspaceClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkspaceClass `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &WorkspaceClass{}, &WorkspaceClassList{})
}
