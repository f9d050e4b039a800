package world

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// ChildCluster is one simulated child cluster: its own API server and etcd, kube-controller-manager,
// kube-scheduler, and kwok faking the nodes.
type ChildCluster struct {
	// Name is the world-unique name, e.g. "<namespace>-<clusterdeployment>".
	Name string
	// Env is the API server (common/testing/testenv).
	Env *testenv.Child
	// Kubeconfig is an admin kubeconfig for the child.
	Kubeconfig []byte
	// KubeconfigPath is where Kubeconfig is written in the run folder.
	KubeconfigPath string

	dir   string
	procs []*Process
	// want are the nodes the config asks for, with their device capacity, under their current
	// names: config are the config's nodes, renames the names of those replaced (ReplaceNode).
	wantMu   sync.Mutex
	want     []corev1.Node
	config   []corev1.Node
	renames  map[string]string
	replaced int
	// stopProvisioner ends the storage provisioner.
	stopProvisioner context.CancelFunc
	// stopKwokSupervisor ends superviseKwok and waits for it.
	stopKwokSupervisor func()
	// restarts counts the restarts of kube-scheduler and kwok by superviseKwok.
	restarts atomic.Int64
}

// ChildOptions tune StartChildWith.
type ChildOptions struct {
	// OnAPIServerUp runs once a new child's API server answers, before its nodes exist or are Ready
	// (Cluster API writes the kubeconfig Secret in that window).
	OnAPIServerUp func(*ChildCluster) error
	// DeferDevices leaves GPUs off the nodes until AdvertiseDevices, as a device plugin advertises
	// them some time after the node is Ready. Without it StartChild advertises them before returning.
	DeferDevices bool
}

// Client returns an admin client of the child.
func (c *ChildCluster) Client() client.Client { return c.Env.Client }

// StartChild starts a child cluster with the nodes of cfg, or returns the running one of that name
// (its nodes brought in line with cfg). It returns once every node is Ready and advertises its GPUs.
func (w *World) StartChild(ctx context.Context, name string, cfg ClusterConfig) (*ChildCluster, error) {
	return w.StartChildWith(ctx, name, cfg, ChildOptions{})
}

// StartChildWith is StartChild with options (see ChildOptions).
func (w *World) StartChildWith(ctx context.Context, name string, cfg ClusterConfig, o ChildOptions) (*ChildCluster, error) {
	nodes, err := cfg.BuildNodes()
	if err != nil {
		return nil, err
	}
	if c := w.Child(name); c != nil {
		c.setWant(nodes)
		if err := c.SyncNodes(ctx, c.wanted()); err != nil {
			return c, err
		}
		if o.DeferDevices {
			return c, nil
		}
		if err := c.WaitNodesReady(ctx, time.Minute); err != nil {
			return c, err
		}
		return c, c.AdvertiseDevices(ctx)
	}
	start := time.Now()
	c, err := w.newChild(name)
	if err != nil {
		return nil, err
	}
	c.setWant(nodes)
	if o.OnAPIServerUp != nil {
		if err := o.OnAPIServerUp(c); err != nil {
			_ = c.stop()
			return nil, err
		}
	}
	if err := c.SyncNodes(ctx, c.wanted()); err != nil {
		_ = c.stop()
		return nil, err
	}
	if err := c.WaitNodesReady(ctx, time.Minute); err != nil {
		_ = c.stop()
		return nil, err
	}
	if !o.DeferDevices {
		if err := c.AdvertiseDevices(ctx); err != nil {
			_ = c.stop()
			return nil, err
		}
	}
	w.mu.Lock()
	if existing := w.children[name]; existing != nil {
		w.mu.Unlock()
		_ = c.stop()
		return existing, nil
	}
	w.children[name] = c
	w.mu.Unlock()
	w.progress("child cluster %s up with %d node(s) at %s (%s)", name, len(nodes), c.Env.Config.Host, time.Since(start).Round(time.Millisecond))
	return c, nil
}

func (w *World) newChild(name string) (c *ChildCluster, err error) {
	dir := filepath.Join(w.RunDir, "children", name)
	env, err := testenv.StartChild(name, testenv.WithChildLogDir(dir))
	if err != nil {
		return nil, fmt.Errorf("child %s: starting the API server: %w", name, err)
	}
	c = &ChildCluster{Name: name, Env: env, Kubeconfig: env.Kubeconfig, dir: dir}
	defer func() {
		if err != nil {
			_ = c.stop()
		}
	}()
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	c.KubeconfigPath = filepath.Join(c.dir, "admin.kubeconfig")
	if err := os.WriteFile(c.KubeconfigPath, env.Kubeconfig, 0o600); err != nil {
		return nil, err
	}
	if err := c.ensureStorageClass(context.Background()); err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(context.Background())
	c.stopProvisioner = cancel
	go c.runProvisioner(pctx)
	kcm, err := startControllerManager("child/"+name+"/kube-controller-manager", c.KubeconfigPath, c.dir)
	if kcm != nil {
		c.procs = append(c.procs, kcm)
	}
	if err != nil {
		return nil, err
	}
	sched, err := FindTool("kube-scheduler")
	if err != nil {
		return nil, err
	}
	sp := &Process{
		Name:    "child/" + name + "/kube-scheduler",
		Path:    sched,
		Args:    []string{"--kubeconfig=" + c.KubeconfigPath, "--leader-elect=false", "--secure-port=0", "--v=1"},
		LogPath: filepath.Join(c.dir, "kube-scheduler.log"),
	}
	c.procs = append(c.procs, sp)
	if err := sp.Start(); err != nil {
		return nil, err
	}
	kwok, err := FindTool("kwok")
	if err != nil {
		return nil, err
	}
	stages := filepath.Join(c.dir, "kwok-stages.yaml")
	if err := WriteKwokConfig(stages); err != nil {
		return nil, err
	}
	kp := &Process{
		Name: "child/" + name + "/kwok",
		Path: kwok,
		Args: []string{
			"--kubeconfig=" + c.KubeconfigPath,
			"--config=" + stages,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=" + KwokNodeAnnotationValue,
			"--node-lease-duration-seconds=40",
		},
		LogPath: filepath.Join(c.dir, "kwok.log"),
	}
	c.procs = append(c.procs, kp)
	if err := kp.Start(); err != nil {
		return nil, err
	}
	sctx, stopSupervisor := context.WithCancel(context.Background())
	supervised := make(chan struct{})
	go func() {
		defer close(supervised)
		c.superviseKwok(sctx, sp, kp)
	}()
	c.stopKwokSupervisor = func() { stopSupervisor(); <-supervised }
	return c, nil
}

// SyncNodes makes the child's kwok nodes exactly the given ones: missing nodes are created, labels,
// schedulability and capacity of existing ones corrected, and kwok nodes not listed deleted; and it
// creates the RuntimeClasses their GPU operators would (RuntimeClasses).
func (c *ChildCluster) SyncNodes(ctx context.Context, nodes []corev1.Node) error {
	cl := c.Env.Client
	var existing corev1.NodeList
	if err := cl.List(ctx, &existing); err != nil {
		return fmt.Errorf("child %s: listing nodes: %w", c.Name, err)
	}
	have := map[string]*corev1.Node{}
	for i := range existing.Items {
		have[existing.Items[i].Name] = &existing.Items[i]
	}
	want := map[string]bool{}
	for i := range nodes {
		n := nodes[i].DeepCopy()
		want[n.Name] = true
		cur := have[n.Name]
		// A device plugin advertises GPUs only on a node that runs (is Ready).
		if cur == nil || !nodeReady(cur) {
			withoutDevices(n)
		}
		if cur == nil {
			status := n.Status
			err := cl.Create(ctx, n)
			switch {
			case apierrors.IsAlreadyExists(err):
				// Another sync of the same nodes made it since the list (the simulator brings a
				// cluster's nodes in line with its ClusterDeployment while a test replaces one), or a
				// create that timed out was stored before client-go tried it again. It is corrected
				// below like any node that was there.
				n.Status = status
				cur = &corev1.Node{}
				if err := cl.Get(ctx, client.ObjectKeyFromObject(n), cur); err != nil {
					return fmt.Errorf("child %s: reading node %s: %w", c.Name, n.Name, err)
				}
			case err != nil:
				return fmt.Errorf("child %s: creating node %s: %w", c.Name, n.Name, err)
			default:
				if !equality.Semantic.DeepEqual(n.Status.Allocatable, status.Allocatable) {
					n.Status.Capacity, n.Status.Allocatable = status.Capacity, status.Allocatable
					if err := cl.Status().Update(ctx, n); err != nil {
						return fmt.Errorf("child %s: setting capacity of node %s: %w", c.Name, n.Name, err)
					}
				}
				continue
			}
		}
		// The config cordons a node when it is made; later a cordon is the cluster's own (kubectl
		// cordon, a drain), which Cluster API leaves alone: it is not reverted here.
		if !equality.Semantic.DeepEqual(cur.Labels, n.Labels) {
			patch := client.MergeFrom(cur.DeepCopy())
			cur.Labels = n.Labels
			if err := cl.Patch(ctx, cur, patch); err != nil {
				return fmt.Errorf("child %s: updating node %s: %w", c.Name, n.Name, err)
			}
		}
		if !equality.Semantic.DeepEqual(cur.Status.Allocatable, n.Status.Allocatable) {
			patch := client.MergeFrom(cur.DeepCopy())
			cur.Status.Capacity, cur.Status.Allocatable = n.Status.Capacity, n.Status.Allocatable
			if err := cl.Status().Patch(ctx, cur, patch); err != nil {
				return fmt.Errorf("child %s: updating capacity of node %s: %w", c.Name, n.Name, err)
			}
		}
	}
	for name, n := range have {
		if want[name] || n.Annotations[KwokNodeAnnotation] != KwokNodeAnnotationValue {
			continue
		}
		if err := cl.Delete(ctx, n); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("child %s: deleting node %s: %w", c.Name, name, err)
		}
	}
	// What the nodes' GPU operators create besides labels and devices (RuntimeClasses); like an
	// operator's, they stay when the nodes go.
	for _, rc := range RuntimeClasses(nodes) {
		if err := cl.Create(ctx, &rc); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("child %s: creating RuntimeClass %s: %w", c.Name, rc.Name, err)
		}
	}
	return nil
}

// withoutDevices removes extended resources (GPUs) from a node's capacity.
func withoutDevices(n *corev1.Node) {
	for _, l := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		for name := range l {
			if strings.Contains(string(name), "/") {
				delete(l, name)
			}
		}
	}
}

// setWant records the config's nodes; the nodes wanted are those, under their current names.
func (c *ChildCluster) setWant(nodes []corev1.Node) {
	c.wantMu.Lock()
	defer c.wantMu.Unlock()
	c.config = nodes
	c.want = c.renamedLocked(nodes)
}

// wanted returns the nodes wanted now.
func (c *ChildCluster) wanted() []corev1.Node {
	c.wantMu.Lock()
	defer c.wantMu.Unlock()
	return c.want
}

// renamedLocked returns the config's nodes under their current names (and hostname labels).
func (c *ChildCluster) renamedLocked(nodes []corev1.Node) []corev1.Node {
	if len(c.renames) == 0 {
		return nodes
	}
	out := make([]corev1.Node, len(nodes))
	for i := range nodes {
		n := nodes[i].DeepCopy()
		if to, ok := c.renames[n.Name]; ok {
			n.Name = to
			n.Labels[corev1.LabelHostname] = to
		}
		out[i] = *n
	}
	return out
}

// ReplaceNode replaces a node by one of the same config under a new name, as Cluster API does when it
// replaces a machine: the old node is deleted (the child's pod garbage collector removes its pods,
// and their controllers make them again elsewhere) and the new one joins, Ready, then advertising
// its GPUs. Later syncs keep the new name. It returns the new name.
func (c *ChildCluster) ReplaceNode(ctx context.Context, name string) (string, error) {
	c.wantMu.Lock()
	orig := name
	for from, to := range c.renames {
		if to == name {
			orig = from
		}
	}
	found := false
	for i := range c.config {
		found = found || c.config[i].Name == orig
	}
	if !found {
		c.wantMu.Unlock()
		return "", fmt.Errorf("child %s: no node %s", c.Name, name)
	}
	c.replaced++
	to := fmt.Sprintf("%s-r%d", orig, c.replaced)
	if c.renames == nil {
		c.renames = map[string]string{}
	}
	c.renames[orig] = to
	c.want = c.renamedLocked(c.config)
	nodes := c.want
	c.wantMu.Unlock()
	if err := c.SyncNodes(ctx, nodes); err != nil {
		return "", err
	}
	if err := c.WaitNodesReady(ctx, time.Minute); err != nil {
		return "", err
	}
	return to, c.AdvertiseDevices(ctx)
}

// AdvertiseDevices gives every Ready node the GPU capacity of its config, as the device plugin does
// once the node runs.
func (c *ChildCluster) AdvertiseDevices(ctx context.Context) error {
	return c.SyncNodes(ctx, c.wanted())
}

// DevicesAdvertised reports whether every node carries the capacity of its config (GPUs included),
// with a description of the first one that does not.
func (c *ChildCluster) DevicesAdvertised(ctx context.Context) (bool, string) {
	nodes := c.wanted()
	for _, want := range nodes {
		var n corev1.Node
		if err := c.Env.Client.Get(ctx, client.ObjectKeyFromObject(&want), &n); err != nil {
			return false, err.Error()
		}
		if !equality.Semantic.DeepEqual(n.Status.Allocatable, want.Status.Allocatable) {
			return false, fmt.Sprintf("node %s allocatable %v, want %v", n.Name, n.Status.Allocatable, want.Status.Allocatable)
		}
	}
	return true, ""
}

// WaitNodesReady waits until every kwok node of the child reports Ready.
func (c *ChildCluster) WaitNodesReady(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		if err := c.Env.Client.List(ctx, &nodes); err != nil {
			last = err.Error()
			return false, nil
		}
		for _, n := range nodes.Items {
			if !nodeReady(&n) {
				last = "node " + n.Name + " is not Ready"
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("child %s: nodes not ready (%s): %w; kwok log:\n%s", c.Name, last, err, c.kwokTail())
	}
	return nil
}

func (c *ChildCluster) kwokTail() string {
	for _, p := range c.procs {
		if filepath.Base(p.LogPath) == "kwok.log" {
			return p.Tail(30)
		}
	}
	return ""
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Processes returns the child's external processes.
func (c *ChildCluster) Processes() []*Process { return c.procs }

// Restart restarts the child's API server (same address and data), as a control-plane blip would.
// kwok is restarted once the server answers again (superviseKwok), so pods keep being staged.
func (c *ChildCluster) Restart() error { return c.Env.Restart() }

func (c *ChildCluster) stop() error {
	if c.stopProvisioner != nil {
		c.stopProvisioner()
	}
	if c.stopKwokSupervisor != nil {
		c.stopKwokSupervisor()
	}
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		errs = append(errs, c.procs[i].Stop(StopGrace))
	}
	if c.Env != nil {
		errs = append(errs, c.Env.Stop())
	}
	return errors.Join(errs...)
}
