#!/usr/bin/env bash
# Builds the component images without a container engine (hack/imagebuild, go-containerregistry from
# the Go module proxy): one OCI image layout tarball per component at dist/images/<component>.tar,
# its image named IMAGE_REGISTRY/<component>:IMAGE_TAG (the chart's default image references, so that
# `ctr images import`, `docker load` or `podman load` of the tarball gives exactly the image the chart
# runs), and with --push a multi-platform image index per component in the registry.
#
#   hack/images.sh                       build for the host platform into dist/images
#   PLATFORMS=linux/amd64,linux/arm64 hack/images.sh
#   hack/images.sh --push                also push IMAGE_REGISTRY/<component>:IMAGE_TAG (Docker config credentials)
#
# VERSION defaults to the chart's version (charts/exalsius-operator/Chart.yaml, the one place the
# version is set) and is the image tag; the created time is the commit time, so the same commit gives
# the same digests. A dirty tree is labelled <commit>-dirty.
set -euo pipefail
cd "$(dirname "$0")/.."

COMPONENTS=${COMPONENTS:-$(cat common/components/names | tr "\n" " ")}
VERSION=${VERSION:-$(sed -n 's/^version: *//p' charts/exalsius-operator/Chart.yaml)}
IMAGE_TAG=${IMAGE_TAG:-$VERSION}
IMAGE_REGISTRY=${IMAGE_REGISTRY:-ghcr.io/exalsius/exalsius-operator}
PLATFORMS=${PLATFORMS:-linux/$(go env GOARCH)}
OUT_DIR=${OUT_DIR:-dist/images}
REVISION=$(git rev-parse HEAD)
[ -z "$(git status --porcelain --untracked-files=no)" ] || REVISION="$REVISION-dirty"
CREATED=${SOURCE_DATE:-$(git log -1 --format=%cI)}
push=""
[ "${1:-}" = "--push" ] && push=1

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd hack/imagebuild && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$bin/imagebuild" .)

mkdir -p "$OUT_DIR"
: >"$OUT_DIR/digests.txt.tmp"
for c in $COMPONENTS; do
  args=(--component "$c" --repo-root . --platforms "$PLATFORMS" --version "$VERSION" --revision "$REVISION"
    --created "$CREATED" --name "$IMAGE_REGISTRY/$c:$IMAGE_TAG" --out "$OUT_DIR/$c.tar")
  [ -n "$push" ] && args+=(--push "$IMAGE_REGISTRY/$c:$IMAGE_TAG")
  "$bin/imagebuild" "${args[@]}" >>"$OUT_DIR/digests.txt.tmp"
done
mv "$OUT_DIR/digests.txt.tmp" "$OUT_DIR/digests.txt"
echo "[images] $IMAGE_REGISTRY/<component>:$IMAGE_TAG ($REVISION, $PLATFORMS):"
sed 's/^/[images]   /' "$OUT_DIR/digests.txt"
