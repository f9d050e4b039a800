package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceSetSpec lists the services KCM deploys to one cluster through a StateManagementProvider.
type ServiceSetSpec struct {
	// Cluster is the name of the ClusterDeployment, in the ServiceSet's namespace, the services are
	// deployed to.
	// +required
	Cluster string `json:"cluster"`

	// MultiClusterService names the MultiClusterService that made this ServiceSet; empty for
	// ServiceSets made by anything else.
	// +optional
	MultiClusterService string `json:"multiClusterService,omitempty"`

	// Provider picks the StateManagementProvider (ksm-projectsveltos) and its settings.
	// +required
	Provider StateManagementProviderConfig `json:"provider"`

	// Services are deployed to the cluster.
	// +optional
	Services []ServiceWithValues `json:"services,omitempty"`
}

// ServiceSetProviderStatus is the readiness of the ServiceSet's StateManagementProvider.
type ServiceSetProviderStatus struct {
	// Ready is true when the provider is ready.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// Suspended is true when the provider is suspended.
	// +optional
	Suspended bool `json:"suspended,omitempty"`
}

// ServiceSetStatus is the observed state of a ServiceSet.
type ServiceSetStatus struct {
	// Deployed is true when every service in status.services is Deployed.
	// +required
	// +kubebuilder:default=false
	Deployed bool `json:"deployed"`

	// Services are the states of the services.
	// +optional
	Services []ServiceState `json:"services,omitempty"`

	// Conditions: ServiceSetProfile, ServiceSetStatusesCollected, ServicesInReadyState and, since KCM
	// v1.12, ServiceSetHealthRules.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Cluster references the ClusterDeployment the services are deployed to.
	// +optional
	Cluster *corev1.ObjectReference `json:"cluster,omitempty"`

	// Provider is the readiness of the StateManagementProvider.
	// +optional
	Provider ServiceSetProviderStatus `json:"provider,omitempty"`
}

// ServiceSet is a set of services KCM deploys to one ClusterDeployment. KCM processes only
// ServiceSets labelled ksm.k0rdent.mirantis.com/adapter=kcm-controller-manager.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Deployed",type=boolean,JSONPath=`.status.deployed`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ServiceSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +optional
	Spec ServiceSetSpec `json:"spec,omitempty"`

	// Status is the observed state, written by KCM.
	// +optional
	Status ServiceSetStatus `json:"status,omitempty"`
}

// ServiceSetList is a list of ServiceSets.
//
// +kubebuilder:object:root=true
type ServiceSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ServiceSets.
	Items []ServiceSet `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &ServiceSet{}, &ServiceSetList{})
}
