#!/usr/bin/env bash
# Fails when generated files drift from their sources, or on gofmt, go vet or golangci-lint findings.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0

unformatted=$(git ls-files -co --exclude-standard '*.go' | xargs -r gofmt -l)
if [ -n "$unformatted" ]; then echo "[verify] gofmt would change:"; echo "$unformatted"; fail=1; fi

echo "[verify] go vet"
for m in common $(cat common/components/names) kubectl-exalsius e2e; do
  (cd "$m" && go vet ./...) || fail=1
done

# .golangci.yml at the root holds the settings; each module is linted from its own folder. Another
# golangci-lint on the machine (another checkout's verify) holds a lock: wait for it, never fail on it.
echo "[verify] golangci-lint"
golangci_lint="$(hack/tools.sh bindir)/golangci-lint"
if [ -x "$golangci_lint" ]; then
  for m in common $(cat common/components/names) kubectl-exalsius e2e; do
    (cd "$m" && "$golangci_lint" run --allow-serial-runners ./...) || fail=1
  done
  # hack/imagebuild and e2e/clustercachebench are outside go.work: linted as they are built, from
  # their modules alone.
  for m in hack/imagebuild e2e/clustercachebench; do
    (cd "$m" && GOWORK=off "$golangci_lint" run --allow-serial-runners ./...) || fail=1
  done
else
  echo "[verify] golangci-lint is missing: run 'hack/tools.sh golangci-lint' (or make tools)"; fail=1
fi

echo "[verify] every module builds alone (GOWORK=off) and its go.mod is tidy"
for m in common $(cat common/components/names) kubectl-exalsius e2e hack/imagebuild e2e/clustercachebench; do
  if ! (cd "$m" && GOWORK=off GOFLAGS=-mod=mod go mod tidy -diff >/dev/null); then
    echo "[verify] $m/go.mod is not tidy: run 'cd $m && GOWORK=off go mod tidy'"; fail=1
  fi
  # The images are built this way (hack/imagebuild): from the module alone, with go.mod's replace of
  # ../common, not through go.work.
  if ! (cd "$m" && GOWORK=off go build ./...); then
    echo "[verify] $m does not build alone: GOWORK=off go build ./... fails"; fail=1
  fi
done
for m in hack/imagebuild e2e/clustercachebench; do (cd "$m" && GOWORK=off go vet ./...) || fail=1; done

echo "[verify] actionlint .github/workflows"
actionlint="$(hack/tools.sh bindir)/actionlint"
if [ -x "$actionlint" ]; then
  "$actionlint" -no-color .github/workflows/*.yaml || fail=1
else
  echo "[verify] actionlint is missing: run 'hack/tools.sh actionlint' (or make tools)"; fail=1
fi

echo "[verify] generated files"
generated=(common/api common/config '*/config/rbac' '*/config/webhook' charts docs/api.md)
before=$(git status --porcelain --untracked-files=all -- "${generated[@]}" | sort; git diff -- "${generated[@]}" | sha256sum)
hack/generate.sh >/dev/null
after=$(git status --porcelain --untracked-files=all -- "${generated[@]}" | sort; git diff -- "${generated[@]}" | sha256sum)
if [ "$before" != "$after" ]; then
  echo "[verify] generated files drifted; run 'make generate' and commit:"; git status --short -- "${generated[@]}"
  fail=1
fi

# Relative links in Markdown resolve (headings included), the examples parse into the API types and
# every condition and event reason of the code is in a reason table (docs/STATUS_AND_EVENTS.md, docs/COLONY.md);
# webhook/internal/server/examples_test.go checks that the API server accepts them.
echo "[verify] docs"
(cd e2e && go run ./cmd/docscheck --repo-root ..) || fail=1
# The repository stands on its own: no comment, doc or chart cites a document outside it.
outside=$(git grep -n -I -E 'SPEC (step|section)|shared/(SPEC|STYLE|k0rdent-contract)\.md' -- . ':!hack/verify.sh' || true)
if [ -n "$outside" ]; then echo "[verify] references to documents outside the repository:"; echo "$outside"; fail=1; fi
[ $fail -eq 0 ] && echo "[verify] clean"
exit $fail
