package admission

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// adoptionAnnotationKeys are the annotations the workspace-controller writes when it adopts the
// upstream operator's ServiceSet of a workspace. They name a ServiceSet and a Helm release, so nobody
// but the controller may set, change or remove them. (The controller also honours them only for the
// upstream name; this keeps a workspace author from trying.)
var adoptionAnnotationKeys = []string{workspacesv1.ServiceSetNameAnnotation, workspacesv1.ReleaseNameAnnotation}

// adoptionAnnotations refuses a create or update (old nil on create) that sets, changes or removes an
// adoption annotation, unless the requesting user is the workspace-controller. Without a configured
// controller user nothing is checked.
func (v *DeploymentValidator) adoptionAnnotations(ctx context.Context, old, cur *workspacesv1.WorkspaceDeployment) field.ErrorList {
	if v.ControllerUser == "" {
		return nil
	}
	var changed []string
	for _, k := range adoptionAnnotationKeys {
		before := ""
		if old != nil {
			before = old.Annotations[k]
		}
		if cur.Annotations[k] != before {
			changed = append(changed, k)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	user := ""
	if req, err := admission.RequestFromContext(ctx); err == nil {
		user = req.UserInfo.Username
	}
	if user == v.ControllerUser {
		return nil
	}
	var errs field.ErrorList
	for _, k := range changed {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(k),
			fmt.Sprintf("only the workspace-controller (%s) sets this annotation, when it adopts the upstream operator's ServiceSet", v.ControllerUser)))
	}
	return errs
}
