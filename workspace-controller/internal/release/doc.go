// Package release is the workspace's Helm release as k0rdent carries it: the ServiceSet and the values
// Secret the controller wants for a workspace (built from a plain Input, docs/design/k0rdent-contract.md),
// the drift of the existing objects from them and their correction, the values hash and the digest the
// cache keeps of inline values (the ServiceSet cache transform), and the rollout k0rdent reports in the
// ServiceSet's status: whether the current rollout is deployed, failed, re-syncing, still installing or
// past its deployTimeout.
//
// Everything here is pure: it reads and changes the objects it is given, and never the API server. The
// reconciler (internal/workspace) reads and writes the objects, and turns what this package says into
// conditions and phases. The package reads internal/owned for names, labels and annotations.
package release
