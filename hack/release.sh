#!/usr/bin/env bash
# Prepares release VERSION (x.y.z or x.y.z-pre): the one version goes into the chart's version and
# appVersion (the default image tag), the CHANGELOG's Unreleased section becomes the dated entry of the
# version, and dist/ receives install.yaml, the chart package, the images (PLATFORMS), the kubectl
# plugin's archives (dist/plugin, PLUGIN_PLATFORMS), one CycloneDX SBOM per image, SHA256SUMS and,
# with SIGNING_KEY=<PEM PKCS#8 ECDSA P-256 key>, a cosign-format signature of each and cosign.pub;
# then it verifies all of it (imagebuild verify, docs/RELEASE.md).
# It commits and tags nothing: review `git diff`, commit, then push the tag v<VERSION>; the release
# workflow builds and publishes from the tag.
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

# SBOMs, checksums, signatures and the check of all of them: the release subcommands of imagebuild.
tool_dir=$(mktemp -d)
trap 'rm -rf "$tool_dir"' EXIT
(cd hack/imagebuild && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$tool_dir/imagebuild" .)
tool=$tool_dir/imagebuild
# Signatures of an earlier run would no longer match (and a stale cosign.pub would claim a signature).
find dist -name '*.sig' -delete
rm -f dist/cosign.pub
# The kubectl plugin ships as archives (no image): one per PLUGIN_PLATFORMS entry, in SHA256SUMS and
# signed like the rest. sums, sign and verify read the same list.
plugin_platforms=(--plugin-platforms "${PLUGIN_PLATFORMS:-linux/amd64,linux/arm64,darwin/amd64,darwin/arm64}")
rm -rf dist/plugin
"$tool" plugin --dist dist --version "$version" --repo-root . "${plugin_platforms[@]}"
"$tool" sbom --dist dist --version "$version"
"$tool" sums --dist dist --version "$version" "${plugin_platforms[@]}"
verify_flags=()
if [ -n "${SIGNING_KEY:-}" ]; then
  "$tool" sign --dist dist --key "$SIGNING_KEY" "${plugin_platforms[@]}"
else
  echo "[release] !!! SIGNING_KEY is not set: the release is NOT SIGNED (no .sig files, no cosign.pub) !!!" >&2
  echo "[release] !!! sign it with: SIGNING_KEY=path/to/key.pem make release VERSION=$version (docs/RELEASE.md) !!!" >&2
  verify_flags+=(--allow-unsigned)
fi
"$tool" verify --dist dist --version "$version" "${plugin_platforms[@]}" "${verify_flags[@]}"
echo "[release] dist/ holds install.yaml, exalsius-operator-$version.tgz, images/, plugin/, sbom/, SHA256SUMS$([ -n "${SIGNING_KEY:-}" ] && echo ", the .sig files and cosign.pub") (images labelled with the working tree's state)."
echo "[release] next: review git diff, commit, 'git tag v$version', push the tag; .github/workflows/release.yaml publishes it."
