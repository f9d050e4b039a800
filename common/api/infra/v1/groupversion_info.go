// Package v1 holds the infra.exalsius.ai/v1 API: the Colony, a group of child clusters that the
// colony-controller provisions as k0rdent ClusterDeployments.
//
// +kubebuilder:object:generate=true
// +groupName=infra.exalsius.ai
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "infra.exalsius.ai", Version: "v1"}

	// SchemeBuilder registers the types of this API with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
