package suites

import (
	"context"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/exalsius/exalsius-operator/e2e/internal/stack"
)

// TestComponentIdentities checks that every component talks to the management API server as its
// chart ServiceAccount, so that the chart's RBAC alone authorizes it: the API server reports the
// ServiceAccount as the user of the component's kubeconfig, without system:masters, and denies it
// what the chart does not grant.
func TestComponentIdentities(t *testing.T) {
	localOnly(t, "component processes started by the local world")
	f := features.New("components run as their chart ServiceAccounts").
		Assess("each component kubeconfig is its ServiceAccount and nothing more", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, name := range stack.Components {
				c := world.Components[name]
				if c == nil {
					t.Errorf("component %s is not running: %s", name, world.Missing[name])
					continue
				}
				cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
				if err != nil {
					t.Fatalf("%s kubeconfig: %v", name, err)
				}
				cl, err := client.New(cfg, client.Options{})
				if err != nil {
					t.Fatal(err)
				}
				review := &authenticationv1.SelfSubjectReview{}
				if err := cl.Create(ctx, review); err != nil {
					t.Fatalf("%s: SelfSubjectReview: %v", name, err)
				}
				u := review.Status.UserInfo
				if want := stack.ServiceAccountUser(c.ServiceAccount); u.Username != want {
					t.Errorf("%s runs as %q, want %q", name, u.Username, want)
				}
				if slices.Contains(u.Groups, "system:masters") {
					t.Errorf("%s is in system:masters: groups %v", name, u.Groups)
				}
				access := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
					ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "delete", Resource: "namespaces"},
				}}
				if err := cl.Create(ctx, access); err != nil {
					t.Fatalf("%s: SelfSubjectAccessReview: %v", name, err)
				}
				if access.Status.Allowed {
					t.Errorf("%s may delete namespaces; the chart grants it no such right", name)
				}
			}
			return ctx
		}).Feature()
	testEnv.Test(t, f)
}
