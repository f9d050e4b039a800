// Package v1beta1 is a minimal typed mirror of the k0rdent KCM API (k0rdent.mirantis.com/v1beta1):
// ClusterDeployment, ServiceSet, ServiceTemplate, ClusterTemplate and Credential.
//
// It is a mirror, not an import, because the Go module proxy refuses github.com/K0rdent/kcm and
// github.com/projectsveltos/libsveltos (their module graphs do not resolve from the proxy alone). The
// mirror keeps exactly the JSON names, kinds, plurals, scopes, short names and required fields of KCM
// (read from KCM v1.12.0-rc and checked against v1.8.0 and v1.11.4, see
// docs/design/k0rdent-contract.md), and holds only the fields this
// project uses. Every field added after KCM v1.3 is optional, so one mirror serves KCM v1.3 to v1.12.
// Free-form fields (config, values, helmOptions, provider.config and the parts of Flux specs the
// project does not read) are raw JSON, so nothing a user or KCM writes is lost on a round trip.
//
// The CRDs generated from this package (common/config/crd/k0rdent) are for tests only: a real
// management cluster gets KCM's own CRDs from KCM's chart.
//
// +kubebuilder:object:generate=true
// +groupName=k0rdent.mirantis.com
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the k0rdent API.
	GroupVersion = schema.GroupVersion{Group: "k0rdent.mirantis.com", Version: "v1beta1"}

	// SchemeBuilder registers the mirrored types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the mirrored types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// objectTypes are the package's root types; each types file appends its own in init.
var objectTypes []runtime.Object

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, objectTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
