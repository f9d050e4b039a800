// Package conformance holds tests that apply published artefacts unchanged to a real API server: the
// public workspace catalog's manifests, with k0rdent's own CRDs, validated by the workspaceclass
// reconciler. The artefacts are data outside the repository; the tests skip, saying so, when they are
// not on the machine.
package conformance
