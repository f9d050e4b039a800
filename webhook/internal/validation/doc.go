// Package validation holds the webhook's admission rules as pure functions over the API types: they
// read nothing from the cluster, so they are unit-tested and fuzzed directly, and the admission
// handlers in internal/admission only add what needs a lookup (the class of a deployment, the
// deployments using a class, the tenancy annotation of a namespace).
//
// Every function returns a field.ErrorList whose entries name the offending field, sorted by Sort so
// that a denial reads the same on every call. Values of userFacingConfig entries of type secret never
// appear in an error.
package validation
