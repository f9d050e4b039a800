#!/usr/bin/env bash
# Installs what the local world's node needs from Debian's packages: containerd, runc, the CNI plugins
# (bridge, host-local, loopback, portmap), iptables and conntrack (kube-proxy's iptables mode).
# Idempotent: installs only what is missing, and says so. Needs root (apt-get).
#
#   hack/node-deps.sh          install what is missing
#   hack/node-deps.sh check    exit 0 when everything is installed, else print what is missing
set -euo pipefail

PACKAGES=(containerd runc containernetworking-plugins iptables conntrack)

log() { printf '[node-deps] %s\n' "$*" >&2; }

missing() {
  local p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}

todo=$(missing)
if [ "${1:-install}" = check ]; then
  [ -z "$todo" ] && exit 0
  log "missing Debian packages: $(echo $todo)"
  exit 1
fi
if [ -z "$todo" ]; then
  log "containerd, runc, CNI plugins, iptables and conntrack already installed"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  log "need root to install: $(echo $todo)"
  exit 1
fi
command -v apt-get >/dev/null || { log "apt-get not found: install $(echo $todo) with this system's package manager"; exit 1; }
log "installing $(echo $todo)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $todo >/dev/null
# The Debian package starts containerd under systemd where there is one; the node starts its own
# containerd with its own config and state folders, so a system one is not needed.
log "installed: $(echo $todo)"
