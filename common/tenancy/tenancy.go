// Package tenancy decides which ClusterDeployments a WorkspaceDeployment may target.
//
// The rule, shared by the workspace-controller and the webhook (docs/TENANCY.md):
//   - a workspace may always target a ClusterDeployment in its own namespace;
//   - it may target a ClusterDeployment in another namespace only when that namespace carries the
//     annotation workspaces.exalsius.ai/allow-workspaces-from, whose value is `*` (every namespace)
//     or a comma-separated list of namespace names that includes the workspace's namespace.
//
// The annotation sits on the namespace that holds the clusters, so the owner of the clusters grants
// access; a workspace's author cannot grant it to themselves.
package tenancy

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// Wildcard in the annotation allows workspaces from every namespace.
const Wildcard = "*"

// Allowed reports whether a workspace in workspaceNamespace may target a ClusterDeployment in the
// target namespace, and, when it may not, why. target may be nil when the namespace does not exist
// (or could not be read); a namespace other than the workspace's own is then not allowed.
func Allowed(workspaceNamespace string, target *corev1.Namespace) (bool, string) {
	if target == nil {
		return false, "the target namespace does not exist"
	}
	if target.Name == workspaceNamespace {
		return true, ""
	}
	value, ok := target.Annotations[workspacesv1.AllowWorkspacesFromAnnotation]
	if !ok {
		return false, fmt.Sprintf("namespace %q does not allow workspaces from namespace %q: it has no %s annotation",
			target.Name, workspaceNamespace, workspacesv1.AllowWorkspacesFromAnnotation)
	}
	if AllowsNamespace(value, workspaceNamespace) {
		return true, ""
	}
	return false, fmt.Sprintf("namespace %q does not allow workspaces from namespace %q: its %s annotation does not list it",
		target.Name, workspaceNamespace, workspacesv1.AllowWorkspacesFromAnnotation)
}

// AllowsNamespace reports whether an allow-workspaces-from annotation value admits namespace. Entries
// are trimmed; empty entries are ignored; `*` admits every namespace.
func AllowsNamespace(annotation, namespace string) bool {
	for _, entry := range strings.Split(annotation, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if entry == Wildcard || entry == namespace {
			return true
		}
	}
	return false
}

// SameNamespace reports whether the target is the workspace's own namespace, which needs no lookup.
// Callers use it to skip reading the Namespace object.
func SameNamespace(workspaceNamespace, targetNamespace string) bool {
	return targetNamespace == "" || targetNamespace == workspaceNamespace
}
