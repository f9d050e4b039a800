#!/usr/bin/env bash
# Builds the component images without a container engine: each component's static binary packaged by
# hack/imagebuild (go-containerregistry) as an OCI image-layout tarball, dist/images/<component>.tar,
# named IMAGE_REGISTRY/<component>:IMAGE_TAG. `ctr images import`, `docker load` and `podman load`
# read them. The local world's node imports them into its containerd.
#
#   hack/images.sh                       every component image into dist/images
#   hack/images.sh pause DIR             the node's pause image (hack/imagebuild/pause) into DIR/pause.tar
#
# Environment: IMAGE_REGISTRY (default ghcr.io/exalsius/exalsius-operator), IMAGE_TAG (default the
# chart's appVersion), IMAGES_DIR (default dist/images), COMPONENTS (default all four).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
IMAGE_REGISTRY=${IMAGE_REGISTRY:-ghcr.io/exalsius/exalsius-operator}
IMAGE_TAG=${IMAGE_TAG:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/exalsius-operator/Chart.yaml)}
IMAGES_DIR=${IMAGES_DIR:-dist/images}
COMPONENTS=${COMPONENTS:-colony-controller workspace-controller inventory-collector webhook}
PAUSE_REF=${PAUSE_REF:-exalsius.local/pause:1.0}

log() { printf '[images] %s\n' "$*" >&2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS=-trimpath
(cd hack/imagebuild && GOWORK=off go build -o "$work/imagebuild" .)

if [ "${1:-}" = pause ]; then
  dir=${2:?usage: hack/images.sh pause DIR}
  (cd hack/imagebuild && GOWORK=off go build -ldflags "-s -w" -o "$work/pause" ./pause)
  "$work/imagebuild" -binary "$work/pause" -path /pause -user 65535:65535 -ref "$PAUSE_REF" \
    -title "exalsius-operator local world pause" -out "$dir/pause.tar"
  log "$PAUSE_REF -> $dir/pause.tar"
  exit 0
fi

mkdir -p "$IMAGES_DIR"
for c in $COMPONENTS; do
  go build -ldflags "-s -w" -o "$work/$c" "./$c"
  "$work/imagebuild" -binary "$work/$c" -ref "$IMAGE_REGISTRY/$c:$IMAGE_TAG" \
    -title "exalsius-operator $c" -out "$IMAGES_DIR/$c.tar"
  log "$IMAGE_REGISTRY/$c:$IMAGE_TAG -> $IMAGES_DIR/$c.tar"
done
