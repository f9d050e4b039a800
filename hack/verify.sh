#!/usr/bin/env bash
# Fails when generated files drift from their sources, or on gofmt or go vet findings.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0

unformatted=$(git ls-files -co --exclude-standard '*.go' | xargs -r gofmt -l)
if [ -n "$unformatted" ]; then echo "[verify] gofmt would change:"; echo "$unformatted"; fail=1; fi

echo "[verify] go vet"
for m in common colony-controller workspace-controller inventory-collector webhook e2e; do
  (cd "$m" && go vet ./...) || fail=1
done
(cd hack/nodeimage && GOWORK=off go vet ./...) || fail=1 # its own module, outside go.work

echo "[verify] generated files"
before=$(git status --porcelain --untracked-files=all -- common/api common/config '*/config/rbac' '*/config/webhook' charts | sort; git diff -- common/api common/config '*/config/rbac' '*/config/webhook' charts | sha256sum)
hack/generate.sh >/dev/null
after=$(git status --porcelain --untracked-files=all -- common/api common/config '*/config/rbac' '*/config/webhook' charts | sort; git diff -- common/api common/config '*/config/rbac' '*/config/webhook' charts | sha256sum)
if [ "$before" != "$after" ]; then
  echo "[verify] generated files drifted; run 'make generate' and commit:"; git status --short -- common/api common/config '*/config/rbac' '*/config/webhook' charts
  fail=1
fi
[ $fail -eq 0 ] && echo "[verify] clean"
exit $fail
