// Package crdtests holds the tests of the project's CRDs (Colony, WorkspaceClass, WorkspaceDeployment)
// and of the k0rdent mirror's CRDs against a real kube-apiserver: every CEL rule, enum, bound, pattern,
// default and list-map key, with valid and invalid objects, plus the names, categories and printer
// columns `kubectl` shows. The package has no code of its own; see the _test.go files.
package crdtests
