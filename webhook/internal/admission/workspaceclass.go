package admission

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/webhook/internal/validation"
)

// MaxNamedUsers is how many WorkspaceDeployments a denied class deletion names.
const MaxNamedUsers = 5

// listPageSize bounds each page of the WorkspaceDeployment list on class deletion.
const listPageSize = 500

// ClassValidator validates WorkspaceClasses: the spec is checked on create and never changes, and a
// class is not deleted while a WorkspaceDeployment uses it.
type ClassValidator struct {
	// Reader lists WorkspaceDeployments; it should read the API server directly.
	Reader client.Reader
}

// ValidateCreate checks a new class.
func (v *ClassValidator) ValidateCreate(_ context.Context, wc *workspacesv1.WorkspaceClass) (admission.Warnings, error) {
	return nil, invalid(classKind, wc.Name, validation.WorkspaceClass(wc))
}

// ValidateUpdate denies any change of the spec. Metadata and status changes pass.
func (v *ClassValidator) ValidateUpdate(_ context.Context, oldWC, newWC *workspacesv1.WorkspaceClass) (admission.Warnings, error) {
	return nil, invalid(classKind, newWC.Name, validation.WorkspaceClassUpdate(oldWC, newWC))
}

// ValidateDelete denies deleting a class that WorkspaceDeployments use, naming a few of them.
func (v *ClassValidator) ValidateDelete(ctx context.Context, wc *workspacesv1.WorkspaceClass) (admission.Warnings, error) {
	users, total, err := v.users(ctx, wc.Name)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing the WorkspaceDeployments of WorkspaceClass %s: %w", wc.Name, err))
	}
	if total == 0 {
		return nil, nil
	}
	return nil, invalid(classKind, wc.Name, field.ErrorList{field.Forbidden(field.NewPath("metadata", "name"), InUseMessage(wc.Name, users, total))})
}

// InUseMessage says which WorkspaceDeployments keep a class from being deleted.
func InUseMessage(class string, named []string, total int) string {
	list := strings.Join(named, ", ")
	if more := total - len(named); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	noun := "WorkspaceDeployments use"
	if total == 1 {
		noun = "WorkspaceDeployment uses"
	}
	return fmt.Sprintf("WorkspaceClass %s cannot be deleted: %d %s it (%s); delete them first", class, total, noun, list)
}

// ClassRefField is the selectable field of WorkspaceDeployments (the CRD's selectableFields) that
// names their class: the API server filters on it, so the delete check reads only the deployments of
// the class, and only their metadata.
const ClassRefField = "spec.workspaceClassRef"

// users returns up to MaxNamedUsers `namespace/name` of the deployments of a class, sorted, and how
// many there are in all. It asks the API server for the metadata of the class's deployments only
// (selected by ClassRefField): a deletion, which anyone who reaches the webhook can have it check,
// never makes it read every WorkspaceDeployment in full. An API server that cannot select on the
// field (a CRD from before the field was selectable) is read the old way, every deployment in
// pages.
func (v *ClassValidator) users(ctx context.Context, class string) ([]string, int, error) {
	names, err := v.selectedUsers(ctx, class)
	if apierrors.IsBadRequest(err) {
		names, err = v.scannedUsers(ctx, class)
	}
	if err != nil {
		return nil, 0, err
	}
	sort.Strings(names)
	total := len(names)
	if len(names) > MaxNamedUsers {
		names = names[:MaxNamedUsers]
	}
	return names, total, nil
}

// selectedUsers lists the metadata of the class's deployments, selected by the API server.
func (v *ClassValidator) selectedUsers(ctx context.Context, class string) ([]string, error) {
	var names []string
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(workspacesv1.GroupVersion.WithKind("WorkspaceDeploymentList"))
	sel := client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(ClassRefField, class)}
	opts := []client.ListOption{client.Limit(listPageSize), sel}
	for {
		if err := v.Reader.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			names = append(names, list.Items[i].Namespace+"/"+list.Items[i].Name)
		}
		if list.Continue == "" {
			return names, nil
		}
		opts = []client.ListOption{client.Limit(listPageSize), sel, client.Continue(list.Continue)}
	}
}

// scannedUsers reads every deployment, in pages, and keeps those of the class.
func (v *ClassValidator) scannedUsers(ctx context.Context, class string) ([]string, error) {
	var names []string
	list := &workspacesv1.WorkspaceDeploymentList{}
	opts := []client.ListOption{client.Limit(listPageSize)}
	for {
		if err := v.Reader.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			if list.Items[i].Spec.WorkspaceClassRef == class {
				names = append(names, list.Items[i].Namespace+"/"+list.Items[i].Name)
			}
		}
		if list.Continue == "" {
			return names, nil
		}
		opts = []client.ListOption{client.Limit(listPageSize), client.Continue(list.Continue)}
	}
}
