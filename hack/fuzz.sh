#!/usr/bin/env bash
# Runs every fuzz test of every module for FUZZTIME each (default 20s). Seed corpora also run as
# ordinary tests under `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-20s}
for m in common $(cat common/components/names); do
  [ -d "$m" ] || continue
  while IFS= read -r line; do
    file=${line%%:*}; name=$(sed -E 's/.*func (Fuzz[A-Za-z0-9_]*).*/\1/' <<<"$line")
    pkg=./$(dirname "${file#"$m"/}")
    echo "[fuzz] $m $pkg $name ($FUZZTIME)"
    (cd "$m" && go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg")
  done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' "$m" || true)
done
