#!/usr/bin/env bash
# Generates deepcopy code, CRDs and per-component RBAC with controller-gen, and copies the CRDs and
# RBAC rules into the chart. Never hand-edit what this writes; `make verify` fails on drift.
set -euo pipefail
cd "$(dirname "$0")/.."
CG="$(hack/tools.sh bindir)/controller-gen"
[ -x "$CG" ] || { echo "controller-gen is missing: run 'make tools'" >&2; exit 1; }
export GOWORK="$PWD/go.work"

echo "[generate] deepcopy"
(cd common && "$CG" object paths=./api/...)

echo "[generate] CRDs"
# Generate into a scratch folder and swap it in whole, so a test starting meanwhile never finds the
# CRD folders empty, and CRDs of removed types do not linger.
crd_tmp=$(mktemp -d common/config/.crd.XXXXXX)
trap 'rm -rf "$crd_tmp"' EXIT
(cd common && "$CG" crd:allowDangerousTypes=false paths=./api/infra/... paths=./api/workspaces/... output:crd:artifacts:config="${crd_tmp#common/}/bases")
if [ -d common/api/k0rdent ]; then
  (cd common && "$CG" crd paths=./api/k0rdent/... output:crd:artifacts:config="${crd_tmp#common/}/k0rdent")
fi
rm -rf common/config/crd.old
[ -d common/config/crd ] && mv common/config/crd common/config/crd.old
mv "$crd_tmp" common/config/crd
rm -rf common/config/crd.old

echo "[generate] RBAC"
for c in colony-controller workspace-controller inventory-collector webhook; do
  [ -d "$c" ] || continue
  if grep -rqs '+kubebuilder:rbac' "$c" common/childcluster 2>/dev/null; then
    (cd "$c" && "$CG" rbac:roleName="$c" paths=./... output:rbac:artifacts:config=config/rbac)
  fi
done

echo "[generate] webhook configurations"
if [ -d webhook/internal/admission ]; then
  (cd webhook && "$CG" webhook paths=./... output:webhook:artifacts:config=config/webhook)
fi

chart=charts/exalsius-operator
if [ -d "$chart" ]; then
  echo "[generate] chart CRDs, RBAC, webhook configurations and README"
  # CRDs are rendered by templates/crds.yaml from files/crds (not crds/), so that crds.enabled and
  # crds.keep apply and `helm upgrade` updates them.
  mkdir -p "$chart/files/crds" "$chart/files/rbac" "$chart/files/webhook"
  rm -f "$chart"/files/crds/*.yaml
  cp common/config/crd/bases/*.yaml "$chart/files/crds/"
  for c in colony-controller workspace-controller inventory-collector webhook; do
    [ -f "$c/config/rbac/role.yaml" ] && cp "$c/config/rbac/role.yaml" "$chart/files/rbac/$c.yaml"
  done
  if [ -f webhook/config/webhook/manifests.yaml ]; then
    cp webhook/config/webhook/manifests.yaml "$chart/files/webhook/manifests.yaml"
  fi
  hack/chart-readme.sh
fi
echo "[generate] done"
