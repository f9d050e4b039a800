package scheme

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestNewKnowsEveryGroup: the shared scheme holds the built-in types, both exalsius groups and every
// kind of the k0rdent mirror.
func TestNewKnowsEveryGroup(t *testing.T) {
	s := New()
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "Secret"},
		{Group: "infra.exalsius.ai", Version: "v1", Kind: "Colony"},
		{Group: "workspaces.exalsius.ai", Version: "v1", Kind: "WorkspaceClass"},
		{Group: "workspaces.exalsius.ai", Version: "v1", Kind: "WorkspaceDeployment"},
		{Group: "k0rdent.mirantis.com", Version: "v1beta1", Kind: "ClusterDeployment"},
		{Group: "k0rdent.mirantis.com", Version: "v1beta1", Kind: "ClusterDeploymentList"},
		{Group: "k0rdent.mirantis.com", Version: "v1beta1", Kind: "ServiceSet"},
		{Group: "k0rdent.mirantis.com", Version: "v1beta1", Kind: "ServiceSetList"},
		{Group: "k0rdent.mirantis.com", Version: "v1beta1", Kind: "ServiceTemplate"},
		{Group: "k0rdent.mirantis.com", Version: "v1beta1", Kind: "ClusterTemplate"},
		{Group: "k0rdent.mirantis.com", Version: "v1beta1", Kind: "Credential"},
	} {
		if !s.Recognizes(gvk) {
			t.Errorf("scheme.New() does not recognise %s", gvk)
		}
	}
}
