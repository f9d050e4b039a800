#!/usr/bin/env bash
# Checks the umbrella chart, charts/exalsius-operator:
#   1. its README is what hack/chart-readme.sh generates from values.yaml;
#   2. helm lint (strict) under the default values and every values file in ci/;
#   3. helm template under the same values (renders, and the schema accepts them);
#   4. the Go tests of common/testing/charttest: assertions over the rendered objects (pod contract, RBAC
#      without wildcards, one workload per enabled component, isolation between components, CRDs in
#      sync, schema rejections), a server-side dry run of every rendered object on a real API server,
#      and SubjectAccessReviews as each component's ServiceAccount;
#   5. the alerting rules with promtool: check rules, and a unit test of every alert (hack/test-alerts.sh).
# helm and promtool come from `make tools` (hack/tools.sh bindir) and the API server from KUBEBUILDER_ASSETS.
set -euo pipefail
cd "$(dirname "$0")/.."
chart=charts/exalsius-operator
bindir=$(hack/tools.sh bindir)
HELM=${HELM:-$bindir/helm}
[ -x "$HELM" ] || { echo "[chart] helm not found at $HELM: run 'make tools'" >&2; exit 1; }
export HELM
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$(hack/tools.sh assets)}

hack/chart-readme.sh --check

values=("")
for f in "$chart"/ci/*.yaml; do values+=("$f"); done
for v in "${values[@]}"; do
  args=()
  [ -n "$v" ] && args=(--values "$v")
  echo "[chart] helm lint --strict ${v:-(default values)}"
  "$HELM" lint --strict "$chart" --namespace exalsius-system --kube-version v1.37.2 "${args[@]}"
  echo "[chart] helm template ${v:-(default values)}"
  "$HELM" template exalsius-operator "$chart" --namespace exalsius-system --kube-version v1.37.2 "${args[@]}" >/dev/null
done

echo "[chart] go test ./testing/charttest (rendered-object assertions, server-side dry run, RBAC reviews)"
(cd common && go test -count=1 ${GO_TEST_ARGS:-} ./testing/charttest/...)
hack/test-alerts.sh
echo "[chart] ok"
