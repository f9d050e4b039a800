// Package v1 holds the workspaces.exalsius.ai/v1 API: WorkspaceClass, an administrator's versioned
// catalog entry, and WorkspaceDeployment, a user's request for one instance of a class on one
// ClusterDeployment.
//
// +kubebuilder:object:generate=true
// +groupName=workspaces.exalsius.ai
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "workspaces.exalsius.ai", Version: "v1"}

	// SchemeBuilder registers the types of this API with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// objectTypes are the package's root types; each types file appends its own in init.
var objectTypes []runtime.Object

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, objectTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
