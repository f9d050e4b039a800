package owned

import workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"

// Older reports whether a was created before b (by namespace, then name, on a tie): the order of
// first-come, first-served, for the GPU queues and for two workspaces that want one release
// namespace.
func Older(a, b *workspacesv1.WorkspaceDeployment) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}
