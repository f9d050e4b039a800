#!/usr/bin/env bash
# Builds the component images without a container engine: each component's static binary packaged by
# hack/nodeimage (go-containerregistry) as an OCI image-layout tarball, dist/images/<component>.tar,
# named IMAGE_REGISTRY/<component>:IMAGE_TAG. `ctr images import`, `docker load` and `podman load`
# read them. The local world's node (docs/NODE.md) imports them into its containerd.
#
# (The release tooling's hack/images.sh writes the same files in the same format; the node accepts
# either: it names a short <component>:<tag> image IMAGE_REGISTRY/<component>:<tag> on import.)
#
# Environment: IMAGE_REGISTRY (default ghcr.io/exalsius/exalsius-operator), IMAGE_TAG (default the
# chart's appVersion), OUT_DIR (default dist/images), COMPONENTS (default all four).
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE_REGISTRY=${IMAGE_REGISTRY:-ghcr.io/exalsius/exalsius-operator}
IMAGE_TAG=${IMAGE_TAG:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/exalsius-operator/Chart.yaml)}
OUT_DIR=${OUT_DIR:-dist/images}
COMPONENTS=${COMPONENTS:-colony-controller workspace-controller inventory-collector webhook}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS=-trimpath
(cd hack/nodeimage && GOWORK=off go build -o "$work/nodeimage" .)
mkdir -p "$OUT_DIR"
for c in $COMPONENTS; do
  go build -ldflags "-s -w" -o "$work/$c" "./$c"
  "$work/nodeimage" -binary "$work/$c" -ref "$IMAGE_REGISTRY/$c:$IMAGE_TAG" -title "exalsius-operator $c" -out "$OUT_DIR/$c.tar"
  echo "[images] $IMAGE_REGISTRY/$c:$IMAGE_TAG -> $OUT_DIR/$c.tar"
done
