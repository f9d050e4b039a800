// Package charttest holds the tests of the umbrella Helm chart, charts/exalsius-operator: it renders
// the chart with the helm binary that `make tools` builds (hack/tools.sh bindir, or $HELM), checks the
// rendered objects (the production pod contract, RBAC without wildcards, one workload per component,
// isolation between components) and applies them to a real API server with a server-side dry run.
// hack/test-chart.sh runs it after helm lint.
package charttest
