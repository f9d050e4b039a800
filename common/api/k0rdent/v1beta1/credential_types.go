package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CredentialSpec points at the Cluster API identity a cluster's infrastructure is managed with.
type CredentialSpec struct {
	// IdentityRef references the Cluster API identity object (for example an AWSClusterStaticIdentity).
	// +required
	IdentityRef *corev1.ObjectReference `json:"identityRef"`

	// Region names the regional cluster the Credential's clusters live on; empty for the management
	// cluster. Immutable (added after KCM v1.3).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Region is immutable"
	Region string `json:"region,omitempty"`

	// Description of the Credential.
	// +optional
	Description string `json:"description,omitempty"`
}

// CredentialStatus is the observed state of a Credential.
type CredentialStatus struct {
	// Ready is true when the identity exists and the Credential may be used.
	// +required
	// +kubebuilder:default=false
	Ready bool `json:"ready"`

	// Conditions of the Credential.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Credential is a k0rdent credential: the infrastructure identity a ClusterDeployment is made with. It
// must exist and be ready before a ClusterDeployment that names it is created.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=cred
// +kubebuilder:printcolumn:name="Ready",type=boolean,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Description",type=string,JSONPath=`.spec.description`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Credential struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec CredentialSpec `json:"spec"`

	// Status is the observed state, written by KCM.
	// +optional
	Status CredentialStatus `json:"status,omitempty"`
}

// CredentialList is a list of Credentials.
//
// +kubebuilder:object:root=true
type CredentialList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Credentials.
	Items []Credential `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &Credential{}, &CredentialList{})
}
