package v1

// ExalsiusValuesKey is the top-level Helm values key the workspace-controller writes its own block to
// (resources, scheduling) for every chart. Classes and deployments may not write to it, and a class's
// resourceInjection paths may not point into it.
const ExalsiusValuesKey = "_exalsius"
