package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

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
// ManagementOptions are the management API server flags the node needs. One node runs on a machine:
// while another holds the lock, Prepare waits for it up to wait (0: it fails at once), saying so on
// out once.
func Prepare(wait time.Duration, out io.Writer) (unlock func(), err error) {
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
	if err := lockWithin(f, wait, out); err != nil {
		_ = f.Close()
		return nil, err
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

// lockPoll is how often lockWithin tries the node lock again.
const lockPoll = 2 * time.Second

// lockWithin takes an exclusive lock on f, trying again until wait has passed.
func lockWithin(f *os.File, wait time.Duration, out io.Writer) error {
	deadline := time.Now().Add(wait)
	for said := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("locking %s: %w", f.Name(), err)
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("another local world's node runs on this machine (lock %s held, waited %s): one node per machine", f.Name(), wait)
		}
		if !said && out != nil {
			_, _ = fmt.Fprintf(out, "another local world's node runs on this machine (lock %s held): waiting up to %s for it to end\n", f.Name(), wait)
			said = true
		}
		time.Sleep(lockPoll)
	}
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
	if err := n.removeShortNames(ctx); err != nil {
		return n, err
	}
	// The pause image is built at every start by the project's image builder (reproducible, so the
	// same commit gives the same image; a cached copy could be a stale builder's).
	pauseDir := filepath.Join(runRoot, "images")
	if err := runLogged(ctx, filepath.Join(opts.LogDir, "images.log"), []string{"PAUSE_REF=" + PauseImage},
		filepath.Join(opts.RepoRoot, "hack", "pause-image.sh"), pauseDir); err != nil {
		return n, fmt.Errorf("building the pause image: %w", err)
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

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func runLogged(ctx context.Context, logPath string, env []string, name string, args ...string) error {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Run()
	cerr := f.Close()
	if err != nil {
		return fmt.Errorf("%s %s: %v (log %s)", name, strings.Join(args, " "), err, logPath)
	}
	if cerr != nil {
		return fmt.Errorf("%s %s: writing its log %s: %w", name, strings.Join(args, " "), logPath, cerr)
	}
	return nil
}
