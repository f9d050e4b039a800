#!/usr/bin/env bash
# make test-node: the chart-on-a-node e2e suite (e2e/suites/chartnode). It checks the host first; where
# the host cannot run containers it says so loudly and exactly why, and exits 0 so that the rest of
# `make test` still runs (set NODE_REQUIRED=1 to make that a failure instead).
#
# On a host that can: installs the node's Debian packages (hack/node-deps.sh), builds kubelet and
# kube-proxy (hack/tools.sh node), the component images (hack/images.sh), and runs the suite.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

banner() {
  printf '\n%s\n' "########################################################################################"
  printf '# test-node: %s\n' "$@"
  printf '%s\n\n' "########################################################################################"
}

cannot() {
  banner "SKIPPED: this host cannot run the local world's node:" "$@" \
    "The chart-on-a-node suite did NOT run; nothing about pods, images or the chart on a kubelet was tested."
  [ "${NODE_REQUIRED:-0}" = 1 ] && exit 1
  exit 0
}

[ "$(uname -s)" = Linux ] || cannot "not Linux ($(uname -s)): containerd, runc and CNI need a Linux kernel"
[ "$(id -u)" = 0 ] || cannot "not root (uid $(id -u)): containerd, runc, CNI and kube-proxy need root for namespaces, mounts, cgroups and iptables"
if ! hack/node-deps.sh check 2>/dev/null; then
  command -v apt-get >/dev/null || cannot "containerd/runc/CNI plugins/iptables/conntrack are not installed and there is no apt-get to install them"
  hack/node-deps.sh || cannot "installing containerd, runc, the CNI plugins, iptables and conntrack from Debian failed (see above)"
fi
# Can this kernel and sandbox run a container at all? runc needs writable cgroups, overlay mounts and
# namespaces; probe each so the message names the one that is missing.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then cg=/sys/fs/cgroup; else cg=/sys/fs/cgroup/memory; fi
mkdir "$cg/exalsius-probe-$$" 2>/dev/null && rmdir "$cg/exalsius-probe-$$" || cannot "cgroups under $cg are not writable: kubelet cannot create pod cgroups"
mkdir -p "$probe"/{l,u,w,m}
mount -t overlay overlay -o "lowerdir=$probe/l,upperdir=$probe/u,workdir=$probe/w" "$probe/m" 2>/dev/null && umount "$probe/m" ||
  cannot "overlayfs cannot be mounted: containerd's overlayfs snapshotter cannot unpack images"
ip netns add "exalsius-probe-$$" 2>/dev/null && ip netns delete "exalsius-probe-$$" || cannot "network namespaces cannot be created: CNI cannot give pods a network"
unshare --pid --fork --mount-proc true 2>/dev/null || cannot "PID namespaces cannot be created: runc cannot start containers"

start=$SECONDS
hack/tools.sh node
hack/tools.sh kube-scheduler kubectl helm
echo "[test-node] node tools ready ($((SECONDS - start))s)"
hack/images.sh
echo "[test-node] component images built ($((SECONDS - start))s)"
cd e2e
EXALSIUS_NODE_E2E=1 go test ${GO_TEST_FLAGS:--count=1 -timeout 40m} -v ./suites/chartnode/
