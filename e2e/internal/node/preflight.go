// Package node runs one real Kubernetes node for the local world's management cluster: containerd
// with runc (Debian's packages, hack/node-deps.sh), kubelet and kube-proxy (v1.37.2, hack/tools.sh
// node), CNI bridge networking, a pause image the project builds itself (hack/imagebuild/pause), and
// kube-scheduler for the management cluster. The component images (hack/images.sh) are imported into
// its containerd, so the umbrella chart's pods run from them without any registry.
//
// The node needs root, the cgroup v1 or v2 hierarchies writable, overlayfs and network namespaces;
// Preflight says exactly what is missing. docs/NODE.md says what the node models and what it does not.
//
// It is test tooling: nothing here runs in production.
package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// Binaries the node runs, from Debian's packages (hack/node-deps.sh).
const (
	containerdBin = "/usr/bin/containerd"
	ctrBin        = "/usr/bin/ctr"
	runcBin       = "/usr/sbin/runc"
	cniBinDir     = "/usr/lib/cni"
)

// Preflight returns nil when this machine can run the node, else an error that says exactly what is
// missing and how to get it. It changes nothing.
func Preflight() error {
	var problems []string
	if os.Geteuid() != 0 {
		problems = append(problems, "not root: containerd, runc, CNI and kube-proxy need root (network namespaces, iptables, cgroups, mounts)")
	}
	for _, b := range []string{containerdBin, ctrBin, runcBin, filepath.Join(cniBinDir, "bridge"), filepath.Join(cniBinDir, "host-local"), filepath.Join(cniBinDir, "loopback")} {
		if _, err := os.Stat(b); err != nil {
			problems = append(problems, fmt.Sprintf("%s missing: run hack/node-deps.sh (Debian packages containerd, runc, containernetworking-plugins)", b))
		}
	}
	for _, b := range []string{"iptables", "conntrack", "ip"} {
		if _, err := exec.LookPath(b); err != nil {
			problems = append(problems, fmt.Sprintf("%s not on PATH: run hack/node-deps.sh", b))
		}
	}
	for _, t := range []string{"kubelet", "kube-proxy", "kube-scheduler", "helm"} {
		if _, err := world.FindTool(t); err != nil {
			problems = append(problems, fmt.Sprintf("%s missing: run `hack/tools.sh node` (kubelet, kube-proxy) and `make tools`", t))
		}
	}
	if len(problems) == 0 {
		if err := probeCgroups(); err != nil {
			problems = append(problems, err.Error())
		}
		if err := probeNetns(); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// CgroupV1 reports whether the host mounts the legacy (v1) cgroup hierarchies rather than the unified
// (v2) one.
func CgroupV1() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err != nil
}

// probeCgroups creates and removes a memory cgroup, as kubelet's pod cgroups need.
func probeCgroups() error {
	base := "/sys/fs/cgroup/memory"
	if !CgroupV1() {
		base = "/sys/fs/cgroup"
	}
	d := filepath.Join(base, fmt.Sprintf("exalsius-preflight-%d", os.Getpid()))
	if err := os.Mkdir(d, 0o755); err != nil {
		return fmt.Errorf("cannot create a cgroup under %s (kubelet needs writable cgroups): %v", base, err)
	}
	_ = os.Remove(d)
	return nil
}

// probeNetns creates and deletes a network namespace, as CNI does for every pod.
func probeNetns() error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := fmt.Sprintf("exalsius-preflight-%d", os.Getpid())
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Errorf("cannot create a network namespace (CNI needs one per pod): %v: %s", err, strings.TrimSpace(string(out)))
	}
	_ = exec.CommandContext(ctx, "ip", "netns", "delete", name).Run()
	return nil
}
