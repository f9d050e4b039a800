package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/webhook/internal/admission"
)

const (
	vfNamespace = "vf-team"
	vfTenant    = "vf-tenant"
	// vfGroup is the tenant's group; the grant to read sources is bound to it, so that an accepted
	// request also shows the review carries the request's groups.
	vfGroup = "vf-team-devs"
	// vfSecretContent must never appear in an answer.
	vfSecretContent = "vf-hunter2-content"
)

func secretSource(name string) workspacesv1.ValuesFromSource {
	return workspacesv1.ValuesFromSource{Kind: workspacesv1.ValuesSourceSecret, Name: name}
}

func configMapSource(name string) workspacesv1.ValuesFromSource {
	return workspacesv1.ValuesFromSource{Kind: workspacesv1.ValuesSourceConfigMap, Name: name}
}

// impersonating is a client acting as user in groups (the API server adds system:authenticated).
func impersonating(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(mgmt.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: mgmt.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grant creates a Role in the namespace and binds it to subject.
func grant(t *testing.T, ns, name string, subject rbacv1.Subject, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	must(t, mgmt.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}))
	must(t, mgmt.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{subject}}))
}

// waitAllowed waits until the API server's authorizer has seen a grant: user in groups may do attrs.
func waitAllowed(t *testing.T, user string, groups []string, attrs authorizationv1.ResourceAttributes) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups, ResourceAttributes: &attrs}}
		if err := mgmt.Client.Create(ctx, sar); err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("%s never got %s %s/%s: %v", user, attrs.Verb, attrs.Resource, attrs.Name, err)
	}
}

func vfDeployment(name string, sources ...workspacesv1.ValuesFromSource) *workspacesv1.WorkspaceDeployment {
	d := deployment(vfNamespace, name, "vf-class-1-0-0", map[string]any{"profile": "small"})
	d.Spec.ValuesFrom = sources
	return d
}

// A tenant who may create WorkspaceDeployments but not read Secrets cannot have the operator copy a
// Secret (or ConfigMap) into a workspace by naming it in spec.valuesFrom: the webhook asks, for the
// requesting user, whether they may get each source.
func TestValuesFromNeedsTheRightToReadEachSource(t *testing.T) {
	ctx := context.Background()
	must(t, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: vfNamespace}}))
	must(t, mgmt.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: vfNamespace, Name: "db-password"},
		StringData: map[string]string{"values.yaml": "auth: {password: " + vfSecretContent + "}"}}))
	must(t, mgmt.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: vfNamespace, Name: "platform-token"},
		StringData: map[string]string{"values.yaml": "token: " + vfSecretContent}}))
	must(t, mgmt.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: vfNamespace, Name: "settings"},
		Data: map[string]string{"values.yaml": "profile: large"}}))

	// The tenant may edit WorkspaceDeployments of its namespace, and nothing else.
	grant(t, vfNamespace, "workspace-editor", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: vfTenant},
		rbacv1.PolicyRule{APIGroups: []string{workspacesv1.GroupVersion.Group}, Resources: []string{"workspacedeployments"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch"}})
	groups := []string{vfGroup, "system:authenticated"}
	waitAllowed(t, vfTenant, groups, authorizationv1.ResourceAttributes{Namespace: vfNamespace, Verb: "create",
		Group: workspacesv1.GroupVersion.Group, Resource: "workspacedeployments"})
	tenant := impersonating(t, vfTenant, vfGroup)

	// Not allowed to read the Secret nor the ConfigMap: refused, each source named by its index.
	err := tenant.Create(ctx, vfDeployment("vf-notebook", secretSource("db-password"), configMapSource("settings")))
	denied(t, err, "spec.valuesFrom[0]")
	denied(t, err, "spec.valuesFrom[1]")
	for _, want := range []string{`user "vf-tenant" may not get Secret db-password in namespace vf-team`,
		`user "vf-tenant" may not get ConfigMap settings in namespace vf-team`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the denial lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), vfSecretContent) {
		t.Fatalf("the denial shows the Secret's content: %v", err)
	}

	// A Role of the tenant's group that may get that one Secret and that one ConfigMap, by name.
	grant(t, vfNamespace, "read-notebook-sources", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: vfGroup},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"db-password"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"settings"}, Verbs: []string{"get"}})
	waitAllowed(t, vfTenant, groups, authorizationv1.ResourceAttributes{Namespace: vfNamespace, Verb: "get", Resource: "secrets", Name: "db-password"})
	waitAllowed(t, vfTenant, groups, authorizationv1.ResourceAttributes{Namespace: vfNamespace, Verb: "get", Resource: "configmaps", Name: "settings"})
	mine := vfDeployment("vf-notebook", secretSource("db-password"), configMapSource("settings"))
	must(t, tenant.Create(ctx, mine))

	// The grant names one Secret; another one of the namespace is still refused, on create and when an
	// update adds it.
	denied(t, tenant.Create(ctx, vfDeployment("vf-other", secretSource("platform-token"))), "spec.valuesFrom[0]")
	before := mine.DeepCopy()
	mine.Spec.ValuesFrom = append(mine.Spec.ValuesFrom, secretSource("platform-token"))
	denied(t, tenant.Patch(ctx, mine, client.MergeFrom(before)), "spec.valuesFrom[2]")

	// A source named by someone who may read it (here the platform admin) is not checked again when
	// the tenant edits other fields: the edit makes the operator read nothing new.
	theirs := vfDeployment("vf-admin-made", secretSource("platform-token"))
	must(t, mgmt.Client.Create(ctx, theirs))
	must(t, tenant.Get(ctx, client.ObjectKeyFromObject(theirs), theirs))
	before = theirs.DeepCopy()
	theirs.Spec.Values = jsonOf(map[string]any{"profile": "large"})
	must(t, tenant.Patch(ctx, theirs, client.MergeFrom(before)))
	// ... but a source the tenant adds is.
	before = theirs.DeepCopy()
	theirs.Spec.ValuesFrom = append(theirs.Spec.ValuesFrom, configMapSource("unreadable"))
	denied(t, tenant.Patch(ctx, theirs, client.MergeFrom(before)), "spec.valuesFrom[1]")
}

// When the webhook cannot ask (its review is refused, or it has no requesting user or no client), it
// refuses the deployment instead of letting the source through unchecked.
func TestValuesFromAccessFailsClosed(t *testing.T) {
	ctx := context.Background()
	wsd := vfDeployment("vf-closed", secretSource("db-password"))
	wsd.Namespace = "vf-closed"
	req := cradmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: wsd.Namespace,
		Operation: admissionv1.Create, UserInfo: authenticationv1.UserInfo{Username: vfTenant, Groups: []string{vfGroup}}}}
	withUser := cradmission.NewContextWithRequest(ctx, req)
	// An identity without the right to create SubjectAccessReviews: every review fails with 403.
	noReviews := impersonating(t, "vf-webhook-without-rbac")
	cases := []struct {
		name     string
		ctx      context.Context
		reviewer admission.AccessReviewer
		want     string
	}{
		{"the review fails", withUser, noReviews, `spec.valuesFrom[0]: could not check whether user "vf-tenant" may get Secret db-password in namespace vf-closed`},
		{"no requesting user", ctx, mgmt.Client, "spec.valuesFrom: the admission request names no user"},
		{"no reviewer", withUser, nil, "spec.valuesFrom: the webhook has no client for SubjectAccessReviews"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := &admission.DeploymentValidator{Reader: mgmt.Client, LiveReader: mgmt.Client, Reviewer: c.reviewer}
			_, err := v.ValidateCreate(c.ctx, wsd.DeepCopy())
			var status apierrors.APIStatus
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want a refusal containing %q, got %v", c.want, err)
			}
			if !errors.As(err, &status) || status.Status().Code != http.StatusInternalServerError {
				t.Fatalf("want an internal error (500), got %#v", err)
			}
		})
	}
	// Without sources there is nothing to ask, and nothing fails.
	v := &admission.DeploymentValidator{Reader: mgmt.Client, LiveReader: mgmt.Client}
	plain := wsd.DeepCopy()
	plain.Spec.ValuesFrom = nil
	if _, err := v.ValidateCreate(ctx, plain); err != nil {
		t.Fatalf("a deployment without valuesFrom needs no review: %v", err)
	}
}
