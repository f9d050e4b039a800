package childcluster

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// A kubeconfig Secret maps to the clusters its name can belong to, and to nothing else.
func TestClustersForSecret(t *testing.T) {
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "team", Name: name} }
	for name, want := range map[string][]types.NamespacedName{
		"cd-kubeconfig":         {key("cd")},
		"cd-sveltos-kubeconfig": {key("cd-sveltos"), key("cd")},
		"-sveltos-kubeconfig":   {key("-sveltos")},
		"-kubeconfig":           nil,
		"cd-values":             nil,
		"kubeconfig":            nil,
	} {
		if got := ClustersForSecret(key(name)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}
