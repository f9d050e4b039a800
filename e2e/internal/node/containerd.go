package node

// containerd, the node's CRI runtime: its configuration, the ctr client, image import and the
// removal of every container when the node stops.

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  level = "info"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  enable_selinux = false
  disable_apparmor = true
  # This machine's root has no CAP_SYS_RESOURCE (it is not in the bounding set), so no process may
  # lower its oom_score_adj below 0: kubelet asks -998 for every pod sandbox, and runc's init would
  # die on it ("can't get final child's PID from pipe"). Clamp to containerd's own value instead.
  restrict_oom_score_adj = %[9]t
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = %[6]q
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
`

func (n *Node) startContainerd(ctx context.Context) error {
	dir := filepath.Join(runRoot, "containerd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg := filepath.Join(runRoot, "containerd.toml")
	body := fmt.Sprintf(containerdConfig, filepath.Join(stateRoot, "containerd"), filepath.Join(runRoot, "containerd", "state"),
		n.socket, filepath.Join(dir, "containerd.sock.ttrpc"), PauseImage, runcBin, cniBinDir, filepath.Join(runRoot, "cni", "net.d"), !canLowerOOMScoreAdj())
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	if err := n.startProc("node/containerd", containerdBin, []string{"--config", cfg}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return exec.CommandContext(ctx, ctrBin, "--address", n.socket, "version").Run() == nil, nil
	})
}

// canLowerOOMScoreAdj reports whether this process may set a negative oom_score_adj (CAP_SYS_RESOURCE),
// as kubelet does for pod sandboxes and Guaranteed pods. It tries it on itself and puts it back.
func canLowerOOMScoreAdj() bool {
	const path = "/proc/self/oom_score_adj"
	old, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	if err := os.WriteFile(path, []byte("-1"), 0o644); err != nil {
		return false
	}
	_ = os.WriteFile(path, old, 0o644)
	return true
}

// Ctr runs ctr in the CRI namespace (k8s.io) of the node's containerd.
func (n *Node) Ctr(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, ctrBin, append([]string{"--address", n.socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Import imports an OCI image-layout tarball (hack/images.sh, hack/pause-image.sh) into the CRI
// namespace, under the name its index.json gives (io.containerd.image.name), and checks the image is
// there by that name. The name must be a full reference (registry host, repository, tag): containerd
// stores a short name such as webhook:0.1.0 as given, but its CRI plugin, through which the kubelet
// finds images, reads it as docker.io/library/webhook:0.1.0 and a pod of it never starts
// (CreateContainerError "failed to get image from containerd").
func (n *Node) Import(ctx context.Context, tarball string) error {
	names, err := layoutNames(tarball)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := fullReference(name); err != nil {
			return fmt.Errorf("%s: %w; build it with hack/images.sh (IMAGE_REGISTRY)", tarball, err)
		}
	}
	if _, err := n.Ctr(ctx, "images", "import", tarball); err != nil {
		return err
	}
	have, err := n.Images(ctx)
	if err != nil {
		return err
	}
	for _, name := range names {
		if !have[name] {
			return fmt.Errorf("%s: imported, but containerd has no image %s", tarball, name)
		}
	}
	return nil
}

// Images returns the names of the images in the CRI namespace.
func (n *Node) Images(ctx context.Context) (map[string]bool, error) {
	out, err := n.Ctr(ctx, "images", "ls", "-q")
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, name := range strings.Fields(out) {
		have[name] = true
	}
	return have, nil
}

// removeShortNames removes images whose names are not full references (left by an earlier image
// builder in the kept image store): the CRI would resolve an image that also carries such a name by it
// and fail to find it.
func (n *Node) removeShortNames(ctx context.Context) error {
	have, err := n.Images(ctx)
	if err != nil {
		return err
	}
	for name := range have {
		if strings.HasPrefix(name, "sha256:") || fullReference(name) == nil {
			continue
		}
		if _, err := n.Ctr(ctx, "images", "rm", name); err != nil {
			return err
		}
	}
	return nil
}

// fullReference accepts an image name that a container runtime uses as it is: registry host (with a
// dot or a port, or localhost), repository and tag.
func fullReference(ref string) error {
	host, rest, ok := strings.Cut(ref, "/")
	if !ok || (!strings.ContainsAny(host, ".:") && host != "localhost") {
		return fmt.Errorf("image name %q has no registry host: containerd's CRI would look it up as docker.io/library/%s", ref, ref)
	}
	if i := strings.LastIndex(rest, ":"); i <= 0 || i == len(rest)-1 || strings.Contains(rest, "@") {
		return fmt.Errorf("image name %q has no tag", ref)
	}
	return nil
}

// layoutNames reads the image names (io.containerd.image.name) from the index.json of an OCI
// image-layout tarball.
func layoutNames(tarball string) ([]string, error) {
	f, err := os.Open(tarball)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s: no index.json: not an OCI image layout", tarball)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tarball, err)
		}
		if strings.TrimPrefix(h.Name, "./") != "index.json" {
			continue
		}
		var idx struct {
			Manifests []struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(tr).Decode(&idx); err != nil {
			return nil, fmt.Errorf("%s: index.json: %w", tarball, err)
		}
		var names []string
		for _, m := range idx.Manifests {
			if name := m.Annotations["io.containerd.image.name"]; name != "" {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%s: no manifest of index.json names its image (io.containerd.image.name)", tarball)
		}
		return names, nil
	}
}

// killContainers kills and removes every container of the CRI namespace, so that no shim outlives
// the node.
func (n *Node) killContainers(ctx context.Context) {
	out, err := n.Ctr(ctx, "tasks", "ls", "-q")
	if err == nil {
		for _, id := range strings.Fields(out) {
			_, _ = n.Ctr(ctx, "tasks", "kill", "-s", "SIGKILL", id)
		}
		for _, id := range strings.Fields(out) {
			_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err := n.Ctr(ctx, "tasks", "delete", id)
				return err == nil || strings.Contains(err.Error(), "not found"), nil
			})
		}
	}
	if out, err := n.Ctr(ctx, "containers", "ls", "-q"); err == nil {
		for _, id := range strings.Fields(out) {
			_, _ = n.Ctr(ctx, "containers", "delete", id)
		}
	}
}
