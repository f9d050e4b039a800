package testenv

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Tenant returns a client that acts as user, a tenant whose only rights are rules in namespace: a Role
// `<user>` with rules and a RoleBinding of it to user, created (or updated) here, and impersonation
// of user on the management API server. Tests of the trust boundary write what a tenant writes
// through it, never as system:masters, so that the API server's own authorization shows what a
// tenant can reach. The namespace is created when missing.
func (m *Management) Tenant(ctx context.Context, namespace, user string, rules []rbacv1.PolicyRule) (client.Client, error) {
	return Tenant(ctx, m.Client, m.Config, namespace, user, rules)
}

// Tenant is Management.Tenant for any API server: admin and cfg reach it as an administrator (cfg's
// identity must be allowed to impersonate).
func Tenant(ctx context.Context, admin client.Client, cfg *rest.Config, namespace, user string, rules []rbacv1.PolicyRule) (client.Client, error) {
	if err := ensureNamespace(ctx, admin, namespace); err != nil {
		return nil, err
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user}, Rules: rules}
	if err := admin.Create(ctx, role); apierrors.IsAlreadyExists(err) {
		err = admin.Update(ctx, role)
		if err != nil {
			return nil, fmt.Errorf("updating Role %s/%s: %w", namespace, user, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("creating Role %s/%s: %w", namespace, user, err)
	}
	return bindAndImpersonate(ctx, admin, cfg, namespace, user, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user}, rules)
}

// TenantBoundTo returns a client that acts as user, a tenant whose only right is a RoleBinding in
// namespace to the ClusterRole clusterRole (one the chart ships), created here; check is a rule the
// role grants, waited for until the API server's authorizer allows it.
func TenantBoundTo(ctx context.Context, admin client.Client, cfg *rest.Config, namespace, user, clusterRole string, check rbacv1.PolicyRule) (client.Client, error) {
	if err := ensureNamespace(ctx, admin, namespace); err != nil {
		return nil, err
	}
	return bindAndImpersonate(ctx, admin, cfg, namespace, user,
		rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole}, []rbacv1.PolicyRule{check})
}

// bindAndImpersonate binds role to user in namespace (a RoleBinding named after the user), waits until
// the authorizer allows the first of rules, and returns a client impersonating user.
func bindAndImpersonate(ctx context.Context, admin client.Client, cfg *rest.Config, namespace, user string,
	role rbacv1.RoleRef, rules []rbacv1.PolicyRule) (client.Client, error) {
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user},
		RoleRef:    role,
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := admin.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating RoleBinding %s/%s: %w", namespace, user, err)
	}
	if err := waitAuthorized(ctx, admin, namespace, user, rules); err != nil {
		return nil, err
	}
	tc := rest.CopyConfig(cfg)
	tc.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return client.New(tc, client.Options{Scheme: admin.Scheme()})
}

// waitAuthorized waits until the API server's authorizer, which reads RBAC from its own cache,
// allows user the first verb of the first rule in namespace.
func waitAuthorized(ctx context.Context, admin client.Client, namespace, user string, rules []rbacv1.PolicyRule) error {
	if len(rules) == 0 || len(rules[0].Verbs) == 0 || len(rules[0].Resources) == 0 {
		return nil
	}
	r := rules[0]
	attrs := &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: r.Verbs[0], Resource: r.Resources[0]}
	if len(r.APIGroups) > 0 {
		attrs.Group = r.APIGroups[0]
	}
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, tenantAuthorizedWait, true, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:authenticated"}, ResourceAttributes: attrs}}
		if err := admin.Create(ctx, sar); err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	})
}

// tenantAuthorizedWait bounds the wait for a new RoleBinding to take effect.
const tenantAuthorizedWait = 60 * time.Second
