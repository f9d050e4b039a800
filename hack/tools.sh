#!/usr/bin/env bash
# Builds the project's external tools from the Go module proxy into a version-keyed cache outside the
# repository, skipping whatever is already there. Nothing is downloaded from release sites.
#
#   hack/tools.sh            build every tool (idempotent, prints what it builds and how long it took)
#   hack/tools.sh assets     print the KUBEBUILDER_ASSETS directory
#   hack/tools.sh bindir     print the directory holding every tool (put it on PATH)
#   hack/tools.sh <tool>...  build only the named tools
#   hack/tools.sh node       build the node's tools (kubelet, kube-proxy): only the local
#                            world's node needs them (make run-chart, make test-node), so a plain
#                            `hack/tools.sh` does not pay for them
#   hack/tools.sh oldest     build the oldest supported management-cluster Kubernetes's API server
#                            and kubectl (OLDEST_KUBE_VERSION) next to the same etcd, in an envtest assets
#                            folder of its own; the shared bin dir keeps KUBE_VERSION's binaries
#   hack/tools.sh assets-oldest  print that assets folder
#
# The cache lives under ${XDG_CACHE_HOME:-$HOME/.cache}/exalsius-operator/tools; each binary sits in a
# folder named after its version, so a version bump rebuilds only what changed.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
KUBE_STAGING_VERSION=${KUBE_STAGING_VERSION:-v0.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
CONTROLLER_GEN_VERSION=${CONTROLLER_GEN_VERSION:-v0.23.0}
CRD_REF_DOCS_VERSION=${CRD_REF_DOCS_VERSION:-v0.3.0}
# The oldest Kubernetes a management cluster may run (docs/supported-versions.md): `make test` runs
# the controller and webhook suites against its API server as well (make test-oldest-kube).
OLDEST_KUBE_VERSION=${OLDEST_KUBE_VERSION:-v1.33.13}
OLDEST_KUBE_STAGING_VERSION=${OLDEST_KUBE_STAGING_VERSION:-v0.33.13}
ACTIONLINT_VERSION=${ACTIONLINT_VERSION:-v1.7.12}
GOLANGCI_LINT_VERSION=${GOLANGCI_LINT_VERSION:-v2.15.0}
# promtool comes from the Prometheus module, whose Go versions are v0.<major><minor>.<patch> (v0.316.0 is
# Prometheus 3.16.0); it checks and unit-tests the chart's alerting rules (hack/test-alerts.sh).
PROMTOOL_VERSION=${PROMTOOL_VERSION:-v0.316.0}

CACHE=${EXALSIUS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/exalsius-operator/tools}
ASSETS="$CACHE/assets/kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}"
BIN="$CACHE/bin"
# LINK_BIN=0 builds into the cache and the assets folder without touching the shared bin dir (the
# oldest API server must never shadow KUBE_VERSION's there).
LINK_BIN=${LINK_BIN:-1}
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0

log() { printf '[tools] %s\n' "$*" >&2; }

# built NAME VERSION: true when the cached binary exists.
cached() { [ -x "$CACHE/$1/$2/$1" ]; }

# link NAME VERSION: expose a cached binary in the shared bin dir (and the envtest assets dir).
link() {
  mkdir -p "$BIN" "$ASSETS"
  if [ "$LINK_BIN" = 1 ]; then ln -sfn "$CACHE/$1/$2/$1" "$BIN/$1"; fi
  case "$1" in kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | etcd)
    ln -sfn "$CACHE/$1/$2/$1" "$ASSETS/$1" ;;
  esac
}

timed() {
  local name=$1 version=$2; shift 2
  if cached "$name" "$version"; then link "$name" "$version"; return 0; fi
  log "building $name $version (cold builds take minutes; later runs reuse $CACHE)"
  local start=$SECONDS
  "$@"
  log "built $name $version in $((SECONDS - start))s"
  link "$name" "$version"
}

# go_install NAME VERSION PACKAGE@VERSION: for modules without replace directives.
go_install() {
  local name=$1 version=$2 pkg=$3
  mkdir -p "$CACHE/$name/$version"
  GOBIN="$CACHE/$name/$version" go install -trimpath "$pkg"
}

# kube_build NAME: builds k8s.io/kubernetes/cmd/NAME in a scratch module whose go.mod pins every
# staging module (k8s.io/api, k8s.io/apiserver, ...) to its published version, and stamps the version
# so that discovery reports KUBE_VERSION rather than v0.0.0. The node's binaries (kubelet, kube-proxy)
# get a scratch module of their own, so building them never rewrites the control plane's go.mod.
kube_module() {
  local set=${1:-control} dir="$CACHE/src/kubernetes-$KUBE_VERSION" cmds="kube-apiserver kube-controller-manager kube-scheduler kubectl"
  if [ "$set" = node ]; then dir="$CACHE/src/kubernetes-node-$KUBE_VERSION"; cmds="kubelet kube-proxy"; fi
  if [ ! -f "$dir/.ready" ]; then
    mkdir -p "$dir"
    local mod
    mod=$(GOFLAGS= go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
    {
      echo "module exalsius.local/kubebuild"
      echo
      echo "go 1.26"
      echo
      echo "require k8s.io/kubernetes $KUBE_VERSION"
      echo
      echo "replace ("
      sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$KUBE_STAGING_VERSION"'#p' "$mod"
      echo ")"
    } >"$dir/go.mod"
    {
      printf '//go:build tools\n\npackage kubebuild\n\nimport (\n'
      for c in $cmds; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
      printf ')\n'
    } >"$dir/tools.go"
    (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true; cd "$dir" && go mod download)
    touch "$dir/.ready"
  fi
  echo "$dir"
}

kube_build() {
  local name=$1 dir minor ld="" set=control
  case "$name" in kubelet | kube-proxy) set=node ;; esac
  dir=$(kube_module "$set")
  minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ld+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  mkdir -p "$CACHE/$name/$KUBE_VERSION"
  (cd "$dir" && go build -trimpath -tags tools -ldflags "-s -w $ld" -o "$CACHE/$name/$KUBE_VERSION/$name" "k8s.io/kubernetes/cmd/$name")
}

# etcd: the server module ships the etcd main as a package (etcdmain); a three-line main calls it.
etcd_build() {
  local dir="$CACHE/src/etcd-$ETCD_VERSION"
  mkdir -p "$dir"
  cat >"$dir/go.mod" <<EOF
module exalsius.local/etcdbuild

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOF
  cat >"$dir/main.go" <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
  (cd "$dir" && go mod tidy >/dev/null && go build -trimpath -ldflags "-s -w" -o "$CACHE/etcd/$ETCD_VERSION/etcd" .)
}

build() {
  case "$1" in
  controller-gen) timed controller-gen "$CONTROLLER_GEN_VERSION" go_install controller-gen "$CONTROLLER_GEN_VERSION" "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_GEN_VERSION" ;;
  etcd) timed etcd "$ETCD_VERSION" etcd_build ;;
  kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | kubelet | kube-proxy) timed "$1" "$KUBE_VERSION" kube_build "$1" ;;
  kwok) timed kwok "$KWOK_VERSION" go_install kwok "$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" ;;
  actionlint) timed actionlint "$ACTIONLINT_VERSION" go_install actionlint "$ACTIONLINT_VERSION" "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION" ;;
  golangci-lint) timed golangci-lint "$GOLANGCI_LINT_VERSION" go_install golangci-lint "$GOLANGCI_LINT_VERSION" "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION" ;;
  helm) timed helm "$HELM_VERSION" go_install helm "$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" ;;
  promtool) timed promtool "$PROMTOOL_VERSION" go_install promtool "$PROMTOOL_VERSION" "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION" ;;
  crd-ref-docs) timed crd-ref-docs "$CRD_REF_DOCS_VERSION" go_install crd-ref-docs "$CRD_REF_DOCS_VERSION" "github.com/elastic/crd-ref-docs@$CRD_REF_DOCS_VERSION" ;;
  *) log "unknown tool $1"; return 2 ;;
  esac
}

ALL=(controller-gen etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm promtool crd-ref-docs actionlint golangci-lint)
NODE=(kubelet kube-proxy)

case "${1:-all}" in
assets) echo "$ASSETS" ;;
assets-oldest) echo "$CACHE/assets/kube-${OLDEST_KUBE_VERSION}_etcd-${ETCD_VERSION}" ;;
oldest)
  start=$SECONDS
  KUBE_VERSION=$OLDEST_KUBE_VERSION KUBE_STAGING_VERSION=$OLDEST_KUBE_STAGING_VERSION LINK_BIN=0 "$0" kube-apiserver kubectl etcd
  log "oldest supported API server ready in $("$0" assets-oldest), $((SECONDS - start))s"
  ;;
bindir) echo "$BIN" ;;
all)
  start=$SECONDS
  for t in "${ALL[@]}"; do build "$t"; done
  log "all tools ready in $BIN (envtest assets: $ASSETS), $((SECONDS - start))s"
  ;;
node)
  start=$SECONDS
  for t in "${NODE[@]}"; do build "$t"; done
  log "node tools ready in $BIN, $((SECONDS - start))s"
  ;;
*) for t in "$@"; do build "$t"; done ;;
esac
