package v1beta1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceTemplateSpec is a deployable service: exactly one of helm, kustomize or resources. It is
// immutable.
// +kubebuilder:validation:XValidation:rule="has(self.helm) ? (!has(self.kustomize) && !has(self.resources)): true",message="Helm, Kustomize and Resources are mutually exclusive."
// +kubebuilder:validation:XValidation:rule="has(self.kustomize) ? (!has(self.helm) && !has(self.resources)): true",message="Helm, Kustomize and Resources are mutually exclusive."
// +kubebuilder:validation:XValidation:rule="has(self.resources) ? (!has(self.kustomize) && !has(self.helm)): true",message="Helm, Kustomize and Resources are mutually exclusive."
// +kubebuilder:validation:XValidation:rule="has(self.helm) || has(self.kustomize) || has(self.resources)",message="One of Helm, Kustomize, or Resources must be specified."
type ServiceTemplateSpec struct {
	// Helm is the service's Helm chart.
	// +optional
	Helm *HelmSpec `json:"helm,omitempty"`

	// Kustomize is the source of a Kustomize service (added after KCM v1.3).
	// +optional
	Kustomize *SourceSpec `json:"kustomize,omitempty"`

	// Resources is the source of a raw-resource service (added after KCM v1.3).
	// +optional
	Resources *SourceSpec `json:"resources,omitempty"`

	// HelmOptions are the template's default Helm options, merged with each service's; kept as
	// written.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	HelmOptions *apiextensionsv1.JSON `json:"helmOptions,omitempty"`

	// Version of the template.
	// +optional
	Version string `json:"version,omitempty"`

	// KubernetesConstraint is a semantic version range of the Kubernetes versions the service supports.
	// +optional
	KubernetesConstraint string `json:"k8sConstraint,omitempty"`
}

// ServiceTemplateStatus is the observed state of a ServiceTemplate.
type ServiceTemplateStatus struct {
	TemplateStatusCommon `json:",inline"`

	// KubernetesConstraint is the Kubernetes version range the chart supports.
	// +optional
	KubernetesConstraint string `json:"k8sConstraint,omitempty"`

	// SourceStatus is the observed state of the template's source.
	// +optional
	SourceStatus *SourceStatus `json:"sourceStatus,omitempty"`
}

// ServiceTemplate is a k0rdent template of a service (a Helm chart, as used here) that ServiceSets and
// ClusterDeployments install on child clusters.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=svctmpl
// +kubebuilder:printcolumn:name="Valid",type=boolean,JSONPath=`.status.valid`
// +kubebuilder:printcolumn:name="Description",type=string,JSONPath=`.status.description`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ServiceTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the template; immutable.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Spec is immutable"
	Spec ServiceTemplateSpec `json:"spec,omitempty"`

	// Status is the observed state, written by KCM.
	// +optional
	Status ServiceTemplateStatus `json:"status,omitempty"`
}

// ServiceTemplateList is a list of ServiceTemplates.
//
// +kubebuilder:object:root=true
type ServiceTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ServiceTemplates.
	Items []ServiceTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &ServiceTemplate{}, &ServiceTemplateList{})
}
