// Package childns keeps the release namespace ws-<name> of a WorkspaceDeployment on its child
// cluster: whose it is (its owner labels), the claim before the GPU gate, the namespace the
// controller makes (owner labels, Pod Security level) and the ResourceQuota that caps its GPU
// requests at the admission, the refusals of that quota the child reports, the deletion by its owner,
// and the older workspace of the same name (from another namespace) that keeps ws-<name> on a cluster.
//
// It acts through a client of the child (and, for the older same-named workspace, a reader of the
// management cluster's workspaces) and returns what it found as an Outcome; the reconciler
// (internal/workspace) turns an Outcome into the workspace's conditions and phase. The package sets
// no condition, reads no scope and imports nothing of the reconciler.
//
// Whose a namespace is, is one rule (Check), applied in the same order wherever ws-<name> is found:
//
//  1. labels that name another workspace: a conflict; the namespace is neither used nor deleted;
//  2. no owner labels: this workspace's only when it has evidence of having made it
//     (MayAdoptUnlabelled); otherwise a conflict, and it is never deleted;
//  3. being deleted (a deletionTimestamp): Terminating. A terminating ws-<name> is never used,
//     labelled, given a quota or deleted again: a pass waits for it to go and makes it again then, and
//     a deletion counts it as done. The reconciler reports it the same way wherever it is found:
//     Pending with ReleaseNamespaceTerminating (an admission the workspace holds stays held).
package childns
