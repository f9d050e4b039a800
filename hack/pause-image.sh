#!/usr/bin/env bash
# Builds the local world node's pause (pod sandbox) image: hack/nodeimage/pause, a static Go program,
# packaged by hack/nodeimage as an OCI image-layout tarball DIR/pause.tar named exalsius.local/pause:1.0.
# Nothing can be pulled where the node runs, so the project builds its own.
#
#   hack/pause-image.sh DIR
set -euo pipefail
cd "$(dirname "$0")/nodeimage"
dir=${1:?usage: hack/pause-image.sh DIR}
PAUSE_REF=${PAUSE_REF:-exalsius.local/pause:1.0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOWORK=off CGO_ENABLED=0 GOFLAGS=-trimpath
go build -o "$work/nodeimage" .
go build -ldflags "-s -w" -o "$work/pause" ./pause
"$work/nodeimage" -binary "$work/pause" -path /pause -user 65535:65535 -ref "$PAUSE_REF" \
  -title "exalsius-operator local world pause" -out "$dir/pause.tar"
echo "[pause-image] $PAUSE_REF -> $dir/pause.tar" >&2
