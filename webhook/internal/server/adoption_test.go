package server_test

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// testControllerUser is the workspace-controller's user the suite's webhook is configured with.
const testControllerUser = "system:serviceaccount:" + operatorNamespace + ":workspace-controller"

// TestOnlyTheControllerSetsAdoptionAnnotations: the annotations that pin an adopted ServiceSet and
// release are refused from a tenant (on create, when added, changed or removed), and accepted from
// the workspace-controller's identity. The retry annotation, by contrast, is the tenant's.
func TestOnlyTheControllerSetsAdoptionAnnotations(t *testing.T) {
	ctx := context.Background()
	const ns, user = "adopt-team", "adopt-tenant"
	must(t, mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	grant(t, ns, "workspace-editor", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user},
		rbacv1.PolicyRule{APIGroups: []string{workspacesv1.GroupVersion.Group}, Resources: []string{"workspacedeployments"},
			Verbs: []string{"get", "create", "update", "patch"}})
	waitAllowed(t, user, []string{"system:authenticated"}, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create",
		Group: workspacesv1.GroupVersion.Group, Resource: "workspacedeployments"})
	tenant := impersonating(t, user)
	controller := impersonating(t, testControllerUser, "system:serviceaccounts", "system:masters")
	ssPath := "metadata.annotations[" + workspacesv1.ServiceSetNameAnnotation + "]"
	relPath := "metadata.annotations[" + workspacesv1.ReleaseNameAnnotation + "]"

	evil := deployment(ns, "evil", "adopt-class-1-0-0", nil)
	evil.Annotations = map[string]string{workspacesv1.ServiceSetNameAnnotation: "gpu-cluster"}
	denied(t, tenant.Create(ctx, evil), ssPath)

	d := deployment(ns, "nb", "adopt-class-1-0-0", nil)
	must(t, tenant.Create(ctx, d))
	update := func(c client.Client, mutate func(*workspacesv1.WorkspaceDeployment)) error {
		cur := &workspacesv1.WorkspaceDeployment{}
		must(t, mgmt.Client.Get(ctx, client.ObjectKeyFromObject(d), cur))
		mutate(cur)
		return c.Update(ctx, cur)
	}
	setAnn := func(k, v string) func(*workspacesv1.WorkspaceDeployment) {
		return func(w *workspacesv1.WorkspaceDeployment) {
			if w.Annotations == nil {
				w.Annotations = map[string]string{}
			}
			if v == "" {
				delete(w.Annotations, k)
			} else {
				w.Annotations[k] = v
			}
		}
	}
	denied(t, update(tenant, setAnn(workspacesv1.ReleaseNameAnnotation, "kube-system")), relPath)
	// The controller adopts: allowed.
	must(t, update(controller, func(w *workspacesv1.WorkspaceDeployment) {
		setAnn(workspacesv1.ServiceSetNameAnnotation, "wsd-gpu-cluster-nb")(w)
		setAnn(workspacesv1.ReleaseNameAnnotation, "wsd-gpu-cluster-nb")(w)
	}))
	// The tenant edits the workspace otherwise: allowed; changes or removes the pin: refused.
	must(t, update(tenant, setAnn("team.example/owner", "alice")))
	// The retry annotation is the tenant's to set: it only retries their own workspace.
	must(t, update(tenant, setAnn(workspacesv1.RetryRequestedAtAnnotation, "2026-12-04T10:00:00Z")))
	must(t, update(tenant, setAnn(workspacesv1.RetryRequestedAtAnnotation, "2026-12-04T11:00:00Z")))
	denied(t, update(tenant, setAnn(workspacesv1.ServiceSetNameAnnotation, "gpu-cluster")), ssPath)
	denied(t, update(tenant, setAnn(workspacesv1.ReleaseNameAnnotation, "")), relPath)
}
