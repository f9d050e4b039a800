#!/usr/bin/env bash
# Checks the chart's alerting rules with promtool (built by `make tools` from the Go module proxy):
#   1. renders the PrometheusRule (monitoring.prometheusRule.enabled=true, every component on) and takes
#      its rule groups as a Prometheus rules file;
#   2. promtool check rules: the file parses, every expression is valid PromQL, and no two rules have
#      the same name and labels (lint errors fail);
#   3. promtool test rules hack/alerts/alerts_test.yaml: each alert fires on the series it is meant for,
#      with its labels and annotations (runbook_url included), and stays quiet before its `for` and on
#      the series it is not meant for; every alert of the rendered file must have a test.
# The runbook base URL is fixed here (runbooks.test) so that the tests do not change with each release;
# common/testing/charttest checks the default URL and that every anchor is a heading of
# docs/operations.md.
set -euo pipefail
cd "$(dirname "$0")/.."
chart=charts/exalsius-operator
bindir=$(hack/tools.sh bindir)
HELM=${HELM:-$bindir/helm}
PROMTOOL=${PROMTOOL:-$bindir/promtool}
[ -x "$HELM" ] || { echo "[alerts] helm not found at $HELM: run 'make tools'" >&2; exit 1; }
[ -x "$PROMTOOL" ] || { echo "[alerts] promtool not found at $PROMTOOL: run 'hack/tools.sh promtool' (or make tools)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The rule groups are the PrometheusRule's spec, one level up: everything under "spec:", dedented.
"$HELM" template exalsius-operator "$chart" --namespace exalsius-system --kube-version v1.37.2 \
  --show-only templates/prometheusrule.yaml \
  --set monitoring.prometheusRule.enabled=true \
  --set monitoring.prometheusRule.runbookBaseURL=https://runbooks.test/operations.md |
  sed -n '/^spec:$/,$p' | tail -n +2 | sed 's/^  //' >"$work/rules.yaml"
grep -q '^groups:$' "$work/rules.yaml" || { echo "[alerts] the rendered PrometheusRule has no rule groups" >&2; exit 1; }
cp hack/alerts/alerts_test.yaml "$work/"

echo "[alerts] promtool check rules --lint=all --lint-fatal"
"$PROMTOOL" check rules --lint=all --lint-fatal "$work/rules.yaml"

# Every alert the chart renders has a unit test.
missing=""
for a in $(sed -n 's/^ *- alert: *//p' "$work/rules.yaml" | sort -u); do
  grep -q "alertname: $a\$" hack/alerts/alerts_test.yaml || missing+=" $a"
done
[ -z "$missing" ] || { echo "[alerts] alerts without a test in hack/alerts/alerts_test.yaml:$missing" >&2; exit 1; }

echo "[alerts] promtool test rules hack/alerts/alerts_test.yaml"
(cd "$work" && "$PROMTOOL" test rules alerts_test.yaml)
echo "[alerts] ok"
