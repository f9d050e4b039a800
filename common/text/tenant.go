package text

import "strings"

// WorkspaceSeenFrom names the workspace namespace/name for a message a tenant of viewer reads: by its
// name when it is in viewer, or as "a workspace of another namespace" when it is not. A tenant's status,
// events and conditions never name another namespace's objects: they would tell one team what another
// runs, and where.
func WorkspaceSeenFrom(viewer, namespace, name string) string {
	if namespace == viewer {
		return "workspace " + name
	}
	return "a workspace of another namespace"
}

// WorkspaceKeySeenFrom is WorkspaceSeenFrom for a key "namespace/name".
func WorkspaceKeySeenFrom(viewer, key string) string {
	ns, name, ok := strings.Cut(key, "/")
	if !ok {
		return "a workspace of another namespace"
	}
	return WorkspaceSeenFrom(viewer, ns, name)
}
