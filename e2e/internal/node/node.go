package node

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/e2e/internal/world"
)

// The node's fixed network: one bridge whose address is the node's IP. The API servers of the local
// world listen on that address (testenv.EnvServingAddress), so that pods reach them.
const (
	// Name is the Node object's name.
	Name = "exalsius-node"
	// Bridge is the Linux bridge the pods are plugged into (CNI bridge plugin).
	Bridge = "exnode0"
	// IP is the node's address: the bridge's gateway address on the host.
	IP = "10.88.0.1"
	// PodCIDR is the pods' range, allocated by CNI host-local.
	PodCIDR = "10.88.0.0/16"
	// PauseImage is the sandbox image, built by hack/pause-image.sh.
	PauseImage = "exalsius.local/pause:1.0"
)

// Dirs of the node. The containerd root (content and snapshots) persists across runs so that an image
// is unpacked once; everything else is wiped at each start.
const (
	stateRoot = "/var/lib/exalsius-node"
	runRoot   = "/run/exalsius-node"
)

// Options configure a node.
type Options struct {
	// RepoRoot is the repository (hack/pause-image.sh).
	RepoRoot string
	// LogDir receives the logs of containerd, kubelet, kube-proxy and kube-scheduler.
	LogDir string
	// Images are OCI image-layout tarballs to import into containerd (the component images).
	Images []string
	// Out receives progress lines; nil discards them.
	Out func(format string, args ...any)
}

// Node is a running node registered with the management cluster.
type Node struct {
	opts       Options
	socket     string
	procs      []*world.Process
	lock       *os.File
	Kubeconfig string // the kubelet's kubeconfig (system:node:<Name>)
}

// Prepare takes the machine-wide node lock, creates the bridge with the node's address and the
// sysctls pods need, and points testenv at the node's address. Call it before the world starts;
// ManagementOptions are the management API server flags the node needs.
func Prepare() (unlock func(), err error) {
	if err := Preflight(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(runRoot, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(runRoot, "node.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("another local world's node runs on this machine (lock %s held): one node per machine", f.Name())
	}
	if err := setupBridge(); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := os.Setenv(testenv.EnvServingAddress, IP); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = os.Unsetenv(testenv.EnvServingAddress); _ = f.Close() }, nil
}

// ManagementOptions are the management API server settings a node needs: no CRDs of the project (the
// chart brings them), the Node authorizer (the
// kubelet is system:node:<Name>), NodeRestriction, and the ServiceAccount admission plugin (envtest
// turns it off) so that pods get their projected service-account tokens.
func ManagementOptions() []testenv.Option {
	return []testenv.Option{
		testenv.WithAPIServerFlag("authorization-mode", "Node,RBAC"),
		testenv.WithAPIServerFlag("enable-admission-plugins", "NodeRestriction,ServiceAccount"),
		testenv.WithAPIServerFlag("disable-admission-plugins", "DefaultIngressClass"),
		// The chart installs the project's CRDs, as on a user's cluster; k0rdent's are there already.
		testenv.WithoutOwnCRDs(),
	}
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func setupBridge() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := net.InterfaceByName(Bridge); err != nil {
		if err := run(ctx, "ip", "link", "add", Bridge, "type", "bridge"); err != nil {
			return err
		}
	}
	if out, _ := exec.CommandContext(ctx, "ip", "-4", "addr", "show", "dev", Bridge).Output(); !strings.Contains(string(out), IP+"/") {
		if err := run(ctx, "ip", "addr", "add", IP+"/16", "dev", Bridge); err != nil {
			return err
		}
	}
	if err := run(ctx, "ip", "link", "set", Bridge, "up"); err != nil {
		return err
	}
	// Forwarding between the bridge and the host (pods to the API servers, the API server to the
	// webhook pod), and bridged traffic through iptables so kube-proxy's DNAT is undone for replies
	// between pods on the bridge.
	for path, v := range map[string]string{
		"/proc/sys/net/ipv4/ip_forward":                "1",
		"/proc/sys/net/bridge/bridge-nf-call-iptables": "1",
	} {
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
			return fmt.Errorf("setting %s=%s: %w", path, v, err)
		}
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start runs kube-scheduler, containerd, kubelet and kube-proxy against the management cluster (which
// must have been started after Prepare with ManagementOptions), imports the pause image and
// opts.Images, and waits until the Node is Ready.
func Start(ctx context.Context, mgmt *testenv.Management, adminKubeconfig string, opts Options) (n *Node, err error) {
	if opts.Out == nil {
		opts.Out = func(string, ...any) {}
	}
	n = &Node{opts: opts, socket: filepath.Join(runRoot, "containerd", "containerd.sock")}
	defer func() {
		if err != nil {
			_ = n.Stop()
		}
	}()
	start := time.Now()
	n.cleanup() // what a crashed run may have left
	for _, d := range []string{opts.LogDir, filepath.Join(stateRoot, "containerd"), filepath.Join(runRoot, "cni", "net.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return n, err
		}
	}

	sched, err := world.FindTool("kube-scheduler")
	if err != nil {
		return n, err
	}
	if err := n.startProc("management/kube-scheduler", sched, []string{"--kubeconfig=" + adminKubeconfig, "--leader-elect=false", "--secure-port=0", "--v=1"}); err != nil {
		return n, err
	}

	if err := n.startContainerd(ctx); err != nil {
		return n, err
	}
	opts.Out("containerd running (%s)", time.Since(start).Round(time.Millisecond))
	pauseDir := filepath.Join(stateRoot, "images")
	if _, err := os.Stat(filepath.Join(pauseDir, "pause.tar")); err != nil {
		if err := runLogged(ctx, filepath.Join(opts.LogDir, "images.log"), filepath.Join(opts.RepoRoot, "hack", "pause-image.sh"), pauseDir); err != nil {
			return n, fmt.Errorf("building the pause image: %w", err)
		}
	}
	for _, img := range append([]string{filepath.Join(pauseDir, "pause.tar")}, opts.Images...) {
		if err := n.Import(ctx, img); err != nil {
			return n, err
		}
	}
	opts.Out("images imported (%s)", time.Since(start).Round(time.Millisecond))
	if err := writeCNIConfig(filepath.Join(runRoot, "cni", "net.d")); err != nil {
		return n, err
	}

	// The kubelet's identity: a client certificate for system:node:<Name> in system:nodes, which the
	// Node authorizer and NodeRestriction admission know.
	kubeletUser, err := mgmt.Env.AddUser(envtest.User{Name: "system:node:" + Name, Groups: []string{"system:nodes"}}, nil)
	if err != nil {
		return n, fmt.Errorf("kubelet credentials: %w", err)
	}
	n.Kubeconfig, err = writeUserKubeconfig(kubeletUser, filepath.Join(runRoot, "kubelet.kubeconfig"))
	if err != nil {
		return n, err
	}
	proxyUser, err := mgmt.Env.AddUser(envtest.User{Name: "system:kube-proxy"}, nil)
	if err != nil {
		return n, fmt.Errorf("kube-proxy credentials: %w", err)
	}
	proxyKubeconfig, err := writeUserKubeconfig(proxyUser, filepath.Join(runRoot, "kube-proxy.kubeconfig"))
	if err != nil {
		return n, err
	}
	if err := n.startKubelet(); err != nil {
		return n, err
	}
	if err := n.startKubeProxy(proxyKubeconfig); err != nil {
		return n, err
	}
	if err := waitNodeReady(ctx, mgmt.Client, 3*time.Minute); err != nil {
		return n, fmt.Errorf("%w; kubelet log:\n%s", err, n.proc("kubelet").Tail(30))
	}
	opts.Out("node %s Ready at %s (%s)", Name, IP, time.Since(start).Round(time.Millisecond))
	return n, nil
}

func writeUserKubeconfig(u *envtest.AuthenticatedUser, path string) (string, error) {
	kc, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, kc, 0o600)
}

func runLogged(ctx context.Context, logPath, name string, args ...string) error {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v (log %s)", name, strings.Join(args, " "), err, logPath)
	}
	return nil
}

func (n *Node) startProc(name, path string, args []string) error {
	p := &world.Process{Name: name, Path: path, Args: args, LogPath: filepath.Join(n.opts.LogDir, filepath.Base(name)+".log")}
	n.procs = append(n.procs, p)
	return p.Start()
}

func (n *Node) proc(base string) *world.Process {
	for _, p := range n.procs {
		if filepath.Base(p.Name) == base {
			return p
		}
	}
	return &world.Process{Name: base, LogPath: filepath.Join(n.opts.LogDir, base+".log")}
}

// Processes returns the node's processes (for log dumps).
func (n *Node) Processes() []*world.Process { return n.procs }

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

// ComponentRegistry is the chart's default image repository prefix.
const ComponentRegistry = "ghcr.io/exalsius/exalsius-operator"

// Import imports an OCI image-layout tarball into the CRI namespace, named as its index says
// (io.containerd.image.name). A short name <component>:<tag> is also tagged
// ComponentRegistry/<component>:<tag>, the chart's default reference.
func (n *Node) Import(ctx context.Context, tarball string) error {
	names, err := layoutNames(tarball)
	if err != nil {
		return err
	}
	if _, err := n.Ctr(ctx, "images", "import", tarball); err != nil {
		return err
	}
	for _, name := range names {
		if !strings.Contains(name, "/") {
			if _, err := n.Ctr(ctx, "images", "tag", "--force", name, ComponentRegistry+"/"+name); err != nil {
				return err
			}
		}
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
	defer f.Close()
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

func writeCNIConfig(dir string) error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "exalsius-node",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": Bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": PodCIDR, "gateway": IP}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(runRoot, "cni", "ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "10-exalsius-node.conflist"), b, 0o644)
}

func (n *Node) startKubelet() error {
	bin, err := world.FindTool("kubelet")
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	healthz, err := freePort()
	if err != nil {
		return err
	}
	cfg := filepath.Join(runRoot, "kubelet.yaml")
	body := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host mounts cgroup v1: kubelet refuses it since v1.35 unless told not to.
failCgroupV1: %t
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%s
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
authorization:
  mode: Webhook
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
failSwapOn: false
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
fileCheckFrequency: 10s
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2%%
  imagefs.available: 2%%
  nodefs.inodesFree: 2%%
maxPods: 60
podPidsLimit: 1024
`, !CgroupV1(), n.socket, IP, port, healthz)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	return n.startProc("node/kubelet", bin, []string{
		"--config=" + cfg,
		"--kubeconfig=" + n.Kubeconfig,
		"--hostname-override=" + Name,
		"--node-ip=" + IP,
		"--root-dir=" + filepath.Join(stateRoot, "kubelet"),
		"--cert-dir=" + filepath.Join(runRoot, "kubelet-pki"),
		"--v=1",
	})
}

func (n *Node) startKubeProxy(kubeconfig string) error {
	bin, err := world.FindTool("kube-proxy")
	if err != nil {
		return err
	}
	metrics, err := freePort()
	if err != nil {
		return err
	}
	cfg := filepath.Join(runRoot, "kube-proxy.yaml")
	body := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
clusterCIDR: %s
bindAddress: %s
healthzBindAddress: ""
metricsBindAddress: 127.0.0.1:%d
nodePortAddresses: ["%s/32"]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  syncPeriod: 30s
  minSyncPeriod: 1s
`, kubeconfig, Name, PodCIDR, IP, metrics, IP)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	return n.startProc("node/kube-proxy", bin, []string{"--config=" + cfg, "--v=1"})
}

func waitNodeReady(ctx context.Context, c client.Client, timeout time.Duration) error {
	last := "not registered"
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		var node corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: Name}, &node); err != nil {
			last = err.Error()
			return false, nil
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s: %s", cond.Status, cond.Message)
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready (%s): %w", Name, last, err)
	}
	return nil
}

// Stop ends the pods' containers, kubelet, kube-proxy, containerd and the scheduler, then removes
// what they leave behind (mounts, network namespaces, kube-proxy's iptables rules, pod cgroups).
func (n *Node) Stop() error {
	var errs []error
	for _, name := range []string{"kubelet", "kube-proxy"} {
		if p := n.proc(name); p.Running() {
			errs = append(errs, p.Stop(world.StopGrace))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if n.proc("containerd").Running() {
		n.killContainers(ctx)
	}
	for i := len(n.procs) - 1; i >= 0; i-- {
		errs = append(errs, n.procs[i].Stop(world.StopGrace))
	}
	n.cleanup()
	return errors.Join(errs...)
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
	for _, d := range []string{filepath.Join(stateRoot, "kubelet"), filepath.Join(runRoot, "containerd"), filepath.Join(runRoot, "cni")} {
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
