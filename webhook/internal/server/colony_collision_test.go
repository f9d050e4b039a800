package server_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
)

// TestColonyNameCollisionsDenied: Colony `a-b` would share the Secret `a-b-kubeconfig` with the
// cluster `b` of Colony `a`; the webhook refuses it, and refuses the reverse (an entry added to `a`
// that clashes with an existing Colony) on update. The same names in another namespace are fine.
func TestColonyNameCollisionsDenied(t *testing.T) {
	ctx := context.Background()
	ns := "collide"
	must(t, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	colony := func(ns, name string, clusters ...string) *infrav1.Colony {
		c := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		for _, cl := range clusters {
			c.Spec.ColonyClusters = append(c.Spec.ColonyClusters, infrav1.ColonyCluster{ClusterName: cl,
				ClusterDeploymentSpec: *jsonOf(map[string]any{"template": "hcp-0-1-0"})})
		}
		return c
	}
	a := colony(ns, "a", "b")
	must(t, mgmt.Client.Create(ctx, a))
	denied(t, mgmt.Client.Create(ctx, colony(ns, "a-b", "x")), "metadata.name")
	must(t, mgmt.Client.Create(ctx, colony("default", "a-b", "x")))

	must(t, mgmt.Client.Create(ctx, colony(ns, "a-c", "x")))
	a.Spec.ColonyClusters = append(a.Spec.ColonyClusters, colony(ns, "", "c").Spec.ColonyClusters...)
	denied(t, mgmt.Client.Update(ctx, a), "spec.colonyClusters[1].clusterName")
}
