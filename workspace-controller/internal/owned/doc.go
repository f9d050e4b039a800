// Package owned names everything a WorkspaceDeployment owns, and says whose an object is: the names
// of its ServiceSet, Helm release, values Secret, release namespace and shared prerequisites; the
// labels and annotations the controller writes on them; the field indexes on workspaces; and the
// admission a ServiceSet carries. It is the leaf the workspace-controller's other packages read, and
// reads nothing of theirs.
//
// Keys a user sees on a WorkspaceDeployment (the adoption annotations, auto-stopped) live in the API
// package; the keys here are written on objects only the controller writes.
package owned
