#!/usr/bin/env bash
# Builds the local world node's pause (pod sandbox) image with the project's one image builder
# (hack/imagebuild): hack/imagebuild/pause, a static Go program, as an OCI image-layout tarball
# DIR/pause.tar whose image is named exalsius.local/pause:1.0 (PAUSE_REF). Nothing can be pulled where
# the node runs, so the project builds its own. Reproducible: the same commit gives the same digest.
#
#   hack/pause-image.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: hack/pause-image.sh DIR}
PAUSE_REF=${PAUSE_REF:-exalsius.local/pause:1.0}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd hack/imagebuild && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$bin/imagebuild" .)
"$bin/imagebuild" --component pause --dir hack/imagebuild/pause --repo-root . --platforms "linux/$(go env GOARCH)" \
  --version "${PAUSE_REF##*:}" --revision "$(git rev-parse HEAD)" --created "$(git log -1 --format=%cI)" \
  --name "$PAUSE_REF" --out "$dir/pause.tar" >/dev/null
echo "[pause-image] $PAUSE_REF -> $dir/pause.tar" >&2
