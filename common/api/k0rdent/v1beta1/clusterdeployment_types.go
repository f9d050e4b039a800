package v1beta1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterDeploymentSpec is the desired state of a child cluster.
type ClusterDeploymentSpec struct {
	// Template is the name of the ClusterTemplate, in the ClusterDeployment's namespace, the cluster is
	// made from. Its status.valid must be true.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Template string `json:"template"`

	// Credential is the name of the Credential, in the ClusterDeployment's namespace, for the cluster's
	// infrastructure. KCM's webhook and its ServiceSet adapter both need it.
	// +optional
	Credential string `json:"credential,omitempty"`

	// Config are the Helm values of the ClusterTemplate's chart. Always send it (`{}` at least): when it
	// is null, KCM's mutating webhook fills in the template's defaults and sets dryRun.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Config *apiextensionsv1.JSON `json:"config,omitempty"`

	// DryRun validates the ClusterDeployment without creating the cluster.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// PropagateCredentials passes the Credential on to the child cluster (for cloud controllers).
	// +optional
	// +kubebuilder:default=true
	PropagateCredentials *bool `json:"propagateCredentials,omitempty"`

	// ClusterAuth names a ClusterAuthentication (added after KCM v1.3).
	// +optional
	ClusterAuth string `json:"clusterAuth,omitempty"`

	// DataSource names a DataSource for the cluster's datastore; it may not be added or removed after
	// creation (added after KCM v1.3).
	// +optional
	DataSource string `json:"dataSource,omitempty"`

	// AuditPolicy names an audit policy (added after KCM v1.3).
	// +optional
	AuditPolicy string `json:"auditPolicy,omitempty"`

	// IPAMClaim is a reference to, or the inline spec of, an IP address claim (added after KCM v1.3).
	// Kept as written.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	IPAMClaim *apiextensionsv1.JSON `json:"ipamClaim,omitempty"`

	// ServiceSpec lists services to install on the cluster.
	// +optional
	ServiceSpec ServiceSpec `json:"serviceSpec,omitempty"`

	// CleanupOnDeletion removes resources the cluster created (load balancers, volumes) on deletion
	// (added after KCM v1.3).
	// +optional
	CleanupOnDeletion bool `json:"cleanupOnDeletion,omitempty"`
}

// ClusterDeploymentStatus is the observed state of a child cluster.
type ClusterDeploymentStatus struct {
	// Conditions include CAPIClusterSummary, ServicesInReadyState and the aggregate Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Services are the states of every service deployed to the cluster, aggregated from every
	// ServiceSet whose spec.cluster names this ClusterDeployment.
	// +optional
	Services []ServiceState `json:"services,omitempty"`

	// ServicesUpgradePaths list the upgrades available to each service.
	// +optional
	ServicesUpgradePaths []ServiceUpgradePaths `json:"servicesUpgradePaths,omitempty"`

	// KubernetesVersion is the cluster's Kubernetes version.
	// +optional
	KubernetesVersion string `json:"k8sVersion,omitempty"`

	// Region is the regional cluster this cluster lives on, if any (added after KCM v1.3).
	// +optional
	Region string `json:"region,omitempty"`

	// AvailableUpgrades are the ClusterTemplates the cluster may be moved to.
	// +optional
	AvailableUpgrades []string `json:"availableUpgrades,omitempty"`

	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ClusterDeployment is a k0rdent child cluster, made from a ClusterTemplate with a Credential.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=clusterd;cld
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Services",type=string,JSONPath=`.status.conditions[?(@.type=="ServicesInReadyState")].message`
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.template`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec ClusterDeploymentSpec `json:"spec"`

	// Status is the observed state, written by KCM.
	// +optional
	Status ClusterDeploymentStatus `json:"status,omitempty"`
}

// ClusterDeploymentList is a list of ClusterDeployments.
//
// +kubebuilder:object:root=true
type ClusterDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ClusterDeployments.
	Items []ClusterDeployment `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &ClusterDeployment{}, &ClusterDeploymentList{})
}
