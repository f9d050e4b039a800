package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// The workspace-controller reads spec.valuesFrom with its own rights and copies what it reads into the
// workspace's release (a Secret's content through the values Secret, a ConfigMap's inline in the
// ServiceSet). So that naming a source never reads more than the requesting user may, the webhook asks
// the API server, with a SubjectAccessReview, whether that user may get each source it checks.
//
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// AccessReviewer creates SubjectAccessReviews; a client.Client (not cached: reviews are only created)
// is one.
type AccessReviewer interface {
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
}

// valuesFromAccess refuses each source of wsd.Spec.ValuesFrom at the given indexes that the
// requesting user (the admission request's userInfo, from ctx) may not get in the workspace's
// namespace. Anything that stops the check (no request in ctx, no reviewer, a review that fails)
// refuses the request: it fails closed.
func (v *DeploymentValidator) valuesFromAccess(ctx context.Context, wsd *workspacesv1.WorkspaceDeployment, indexes []int) (field.ErrorList, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(errors.New("spec.valuesFrom: the admission request names no user, so the webhook cannot check that it may read the sources"))
	}
	if v.Reviewer == nil {
		return nil, apierrors.NewInternalError(errors.New("spec.valuesFrom: the webhook has no client for SubjectAccessReviews, so it cannot check that the requesting user may read the sources"))
	}
	ns := req.Namespace
	if ns == "" {
		ns = wsd.Namespace
	}
	p := field.NewPath("spec", "valuesFrom")
	var errs field.ErrorList
	for _, i := range indexes {
		src := wsd.Spec.ValuesFrom[i]
		sar := readReview(req.UserInfo, ns, src)
		if err := v.Reviewer.Create(ctx, sar); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("spec.valuesFrom[%d]: could not check whether user %q may get %s %s in namespace %s "+
				"(SubjectAccessReview: %w); refusing until it can be checked", i, req.UserInfo.Username, src.Kind, src.Name, ns, err))
		}
		if !sar.Status.Allowed || sar.Status.Denied {
			errs = append(errs, field.Forbidden(p.Index(i), fmt.Sprintf(
				"user %q may not get %s %s in namespace %s: a workspace may only take values from a Secret or ConfigMap "+
					"that whoever names it may read", req.UserInfo.Username, src.Kind, src.Name, ns)))
		}
	}
	return errs, nil
}

// readReview is the SubjectAccessReview asking whether user may get the valuesFrom source src in
// namespace ns: the user's name, groups, uid and extra, as the API server authenticated them.
func readReview(user authenticationv1.UserInfo, ns string, src workspacesv1.ValuesFromSource) *authorizationv1.SubjectAccessReview {
	var extra map[string]authorizationv1.ExtraValue
	if len(user.Extra) > 0 {
		extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, val := range user.Extra {
			extra[k] = authorizationv1.ExtraValue(slices.Clone(val))
		}
	}
	resource := "configmaps"
	if src.Kind == workspacesv1.ValuesSourceSecret {
		resource = "secrets"
	}
	return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user.Username,
		Groups: slices.Clone(user.Groups),
		UID:    user.UID,
		Extra:  extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "get", Group: "", Version: "v1", Resource: resource, Name: src.Name,
		},
	}}
}
