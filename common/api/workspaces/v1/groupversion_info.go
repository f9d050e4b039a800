// Package v1 holds the workspaces.exalsius.ai/v1 API: WorkspaceClass, an administrator's versioned
// catalog entry, and WorkspaceDeployment, a user's request for one instance of a class on one
// ClusterDeployment.
//
// +kubebuilder:object:generate=true
// +groupName=workspaces.exalsius.ai
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "workspaces.exalsius.ai", Version: "v1"}

	// SchemeBuilder registers the types of this API with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
