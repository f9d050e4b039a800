#!/usr/bin/env bash
# Prepares release VERSION (x.y.z or x.y.z-pre): the one version goes into the chart's version and
# appVersion (the default image tag), the CHANGELOG's Unreleased section becomes the dated entry of the
# version, and dist/ receives install.yaml, the chart package and the images (PLATFORMS). It commits
# and tags nothing: review `git diff`, commit, then push the tag v<VERSION>; the release workflow
# builds and publishes from the tag.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: hack/release.sh x.y.z}
if ! [[ $version =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "[release] VERSION: $version is not a semantic version x.y.z (without a leading v)" >&2
  exit 1
fi
chart=charts/exalsius-operator/Chart.yaml
sed -i -E "s/^version: .*/version: $version/; s/^appVersion: .*/appVersion: \"$version\"/" "$chart"
echo "[release] $chart: version and appVersion $version"

changelog=CHANGELOG.md
if grep -q "^## \[$version\]" "$changelog"; then
  echo "[release] $changelog already has an entry for $version"
elif grep -q '^## \[Unreleased\]' "$changelog"; then
  today=$(date -u +%F)
  awk -v v="$version" -v d="$today" '
    /^## \[Unreleased\]/ && !done { print; print ""; print "## [" v "] - " d; done=1; next }
    { print }' "$changelog" >"$changelog.tmp" && mv "$changelog.tmp" "$changelog"
  echo "[release] $changelog: the Unreleased changes are now $version ($today)"
else
  echo "[release] $changelog has no '## [Unreleased]' section" >&2
  exit 1
fi

hack/chart-readme.sh
make --no-print-directory bundle IMAGE_TAG="$version"
make --no-print-directory chart-package
VERSION=$version hack/images.sh
echo "[release] dist/ holds install.yaml, exalsius-operator-$version.tgz and images/ (labelled with the working tree's state)."
echo "[release] next: review git diff, commit, 'git tag v$version', push the tag; .github/workflows/release.yaml publishes it."
