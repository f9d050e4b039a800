// Package gitops checks the GitOps examples of examples/gitops: the Flux and Argo CD manifests parse,
// the chart renders with the values they pass it, and their health checks (Flux CEL expressions, Argo
// CD Lua scripts) read the four kinds the way kstatus does. Its tests are the whole package.
package gitops
