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
//     a deletion counts it as done. The reconciler reports it as ReleaseNamespaceTerminating in the
//     phase the pass is in where it was found: Pending at the claim before the gate, Deploying once
//     the gate admitted the workspace in this pass (it then holds its admission while it waits).
package childns
