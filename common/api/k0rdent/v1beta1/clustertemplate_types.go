package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterTemplateSpec is the Helm chart that makes a cluster. It is immutable.
// +kubebuilder:validation:XValidation:rule="!has(self.helm.chartSource)",message=".spec.helm.chartSource is not supported for ClusterTemplates"
type ClusterTemplateSpec struct {
	// Helm is the cluster's Helm chart; chartSource is not allowed here.
	// +required
	Helm HelmSpec `json:"helm"`

	// ProviderContracts maps each Cluster API provider to the contract version the template needs.
	// +optional
	ProviderContracts map[string]string `json:"providerContracts,omitempty"`

	// KubernetesVersion is the Kubernetes version of the clusters this template makes.
	// +optional
	KubernetesVersion string `json:"k8sVersion,omitempty"`

	// Providers are the Cluster API providers the template needs.
	// +optional
	Providers []string `json:"providers,omitempty"`
}

// ClusterTemplateStatus is the observed state of a ClusterTemplate.
type ClusterTemplateStatus struct {
	TemplateStatusCommon `json:",inline"`

	// ProviderContracts are the provider contract versions read from the chart.
	// +optional
	ProviderContracts map[string]string `json:"providerContracts,omitempty"`

	// KubernetesVersion is the Kubernetes version read from the chart.
	// +optional
	KubernetesVersion string `json:"k8sVersion,omitempty"`

	// Providers are the Cluster API providers read from the chart.
	// +optional
	Providers []string `json:"providers,omitempty"`
}

// ClusterTemplate is a k0rdent template of a cluster: a Helm chart of Cluster API objects.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=clustertmpl
// +kubebuilder:printcolumn:name="Valid",type=boolean,JSONPath=`.status.valid`
// +kubebuilder:printcolumn:name="Description",type=string,JSONPath=`.status.description`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the template; immutable.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Spec is immutable"
	Spec ClusterTemplateSpec `json:"spec,omitempty"`

	// Status is the observed state, written by KCM.
	// +optional
	Status ClusterTemplateStatus `json:"status,omitempty"`
}

// ClusterTemplateList is a list of ClusterTemplates.
//
// +kubebuilder:object:root=true
type ClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ClusterTemplates.
	Items []ClusterTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &ClusterTemplate{}, &ClusterTemplateList{})
}
