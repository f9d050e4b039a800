package tenancy

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// ClassRestricted reports whether a class limits the namespaces that may use it
// (spec.allowedNamespaces is set): only then does ClassAllowed need the namespace's labels.
func ClassRestricted(class *workspacesv1.WorkspaceClass) bool {
	return class != nil && class.Spec.AllowedNamespaces != nil
}

// ClassAllowed reports whether the workspaces of a namespace with nsLabels may use class, and, when
// they may not, why (naming the class's field). A namespace that does not exist has no labels. A
// selector that does not parse allows no namespace (the webhook refuses such a class).
func ClassAllowed(class *workspacesv1.WorkspaceClass, namespace string, nsLabels map[string]string) (bool, string) {
	if !ClassRestricted(class) {
		return true, ""
	}
	sel, err := metav1.LabelSelectorAsSelector(class.Spec.AllowedNamespaces)
	if err != nil {
		return false, fmt.Sprintf("WorkspaceClass %q has a spec.allowedNamespaces that is not a valid selector (%v); it allows no namespace", class.Name, err)
	}
	if sel.Matches(labels.Set(nsLabels)) {
		return true, ""
	}
	return false, fmt.Sprintf("WorkspaceClass %q is not for namespace %q: its spec.allowedNamespaces (%s) does not select the namespace's labels",
		class.Name, namespace, sel.String())
}
