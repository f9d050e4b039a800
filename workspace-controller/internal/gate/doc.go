// Package gate is the GPU gate: it decides whether a workspace's resolved resources may start on a
// cluster now (Admit), and which of several candidate clusters a workspace is placed on (Place).
//
// Both calls take a Request and return a Decision; the caller (the workspace reconciler) turns the
// decision into conditions and a phase. Behind the calls live everything a decision needs and nothing
// else reads: the reservations of the other workspaces on a cluster (their admissions, less the
// replicas the child shows bound, and the waiters ahead in the priority queue), the namespace's
// WorkspaceQuota count, tightest fit across candidates, the per-cluster and per-namespace locks that
// serialise decisions, and the memory of the admissions and placements this process wrote that the
// manager's cache may not show yet. An admission the gate grants is recorded before the locks are
// released (remembered until the pass's status write and carried by the ServiceSet the pass makes,
// or written through the request's Record), so the next decision, in this process or after a
// restart, counts it.
//
// The WorkspaceQuota status controller (QuotaReconciler) lives here too: it shares the counting.
//
// The arithmetic (quota use and violations, priority order, reservations, tightest fit, the
// admission's node placement) is plain functions with unit tests; the decisions are tested through
// the workspace reconciler against real API servers.
package gate
