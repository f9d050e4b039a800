// Package prerequisites owns the shared per-cluster prerequisites of WorkspaceClasses: the
// ServiceSet `<cd>-prereq-<template>` that installs one prerequisite on a cluster for every workspace
// that needs it, and its collector.
//
// Installer.Ensure is step 9 of a workspace's pass (docs/RECONCILIATION.md, Prerequisites). For each
// prerequisite of the class it reads the shared ServiceSet in the ClusterDeployment's namespace, or
// finds the service the Colony put on the ClusterDeployment, or creates the shared ServiceSet; it
// corrects the ServiceSet's drift (values, helmOptions, valuesFrom) for the class that owns its values,
// and reports a namespace, chart version or values conflict. It reads ServiceSets, ServiceTemplates,
// WorkspaceDeployments (by the owned.IndexCluster index) and the ClusterDeployment it is handed, and
// writes only shared prerequisite ServiceSets. It returns what it observed (Result): the statuses for
// status.prerequisites and which prerequisites conflict, failed or are pending. The workspace
// reconciler (internal/workspace, step_prerequisites.go) calls it and turns the Result into the
// PrerequisitesMet condition and the phase; this package decides no phase.
//
// Collector is the prerequisite-collector controller: it marks a shared prerequisite ServiceSet that
// no live workspace on its cluster needs (owned.AnnotationUnusedSince), clears the mark when one needs
// it again, and deletes the ServiceSet once the grace period has passed. It reads
// WorkspaceDeployments (by the workspace reconciler's owned.IndexCluster index), WorkspaceClasses and
// ClusterDeployments, and writes only prerequisite ServiceSets. internal/workspace's Setup registers it.
//
// The package reads internal/owned (names, labels, annotations, indexes) and internal/helmvalues, and
// nothing of internal/workspace.
package prerequisites
