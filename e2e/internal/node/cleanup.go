package node

// What a node leaves on the host (shims, mounts, network namespaces, iptables rules, pod cgroups),
// removed when it stops and before it starts.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// cleanup removes what a node leaves on the host: mounts under the kubelet's and containerd's run
// folders, CNI network namespaces, kube-proxy's iptables chains and the pods' cgroups. Images stay in
// the containerd root.
func (n *Node) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// shims left by a crashed run
	_ = exec.CommandContext(ctx, "sh", "-c", `for p in $(pgrep -f "containerd-shim-runc-v2 -namespace k8s.io -id .* -address `+n.socket+`"); do kill -9 $p; done`).Run()
	unmountUnder(filepath.Join(stateRoot, "kubelet"))
	unmountUnder(filepath.Join(runRoot, "containerd"))
	unmountUnder(filepath.Join(stateRoot, "containerd"))
	if ents, err := os.ReadDir("/var/run/netns"); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "cni-") {
				_ = exec.CommandContext(ctx, "ip", "netns", "delete", e.Name()).Run()
			}
		}
	}
	if bin, err := world.FindTool("kube-proxy"); err == nil {
		_ = exec.CommandContext(ctx, bin, "--cleanup").Run()
	}
	for _, d := range []string{filepath.Join(stateRoot, "kubelet"), filepath.Join(runRoot, "containerd"), filepath.Join(runRoot, "cni"), filepath.Join(runRoot, "images")} {
		_ = os.RemoveAll(d)
	}
	removePodCgroups()
}

// unmountUnder unmounts dir and every mount point below it, deepest first (kubelet bind-mounts its
// root folder onto itself to make it shared).
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}

// removePodCgroups removes the kubepods hierarchy kubelet created (cgroupfs driver), leaves first.
func removePodCgroups() {
	roots := []string{"/sys/fs/cgroup/kubepods"}
	if CgroupV1() {
		roots = nil
		ents, _ := os.ReadDir("/sys/fs/cgroup")
		for _, e := range ents {
			roots = append(roots, filepath.Join("/sys/fs/cgroup", e.Name(), "kubepods"))
		}
	}
	for _, r := range roots {
		var dirs []string
		_ = filepath.WalkDir(r, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}
