package clustercachebench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

const (
	// benchNS holds every Secret and Cluster of the benchmark.
	benchNS = "ccbench"
	// changeLabel is the Node label the change phases rewrite on changedNode of child 0.
	changeLabel = "bench.exalsius.ai/change"
	changedNode = "bench-node-0"
	// clusterCRDFile is the CAPI Cluster CRD inside the cluster-api module.
	clusterCRDFile = "core/config/crd/bases/cluster.x-k8s.io_clusters.yaml"
)

// role is what a cluster is for in the benchmark.
type role int

const (
	// roleReachable: a cluster on one of the child servers, through that server's shared identity or,
	// with distinct identities, a user of its own.
	roleReachable role = iota
	// roleHole: a cluster whose server accepts TCP and never answers.
	roleHole
	// roleFrozen: a reachable cluster on child 1 reached through a proxy that the frozen phase freezes.
	roleFrozen
	// roleRotated: a reachable cluster on child 2 whose credential (a ServiceAccount token) the
	// rotation phase replaces and revokes.
	roleRotated
)

// benchCluster is one cluster of the benchmark: a `<name>-kubeconfig` Secret and a CAPI Cluster
// object of the same name.
type benchCluster struct {
	key   types.NamespacedName
	role  role
	child int // index into world.children; -1 for a hole
}

// world is the management server, the child servers and the clusters' fixtures.
type world struct {
	mgmt     *testenv.Management
	children []*testenv.Child
	clusters []benchCluster
	nodes    int
	// proxy is the frozen cluster's way to child 1.
	proxy *freezingProxy
	// rotatedSA is the ServiceAccount whose token the rotated cluster's Secret holds.
	rotatedSA string
	closers   []func()
}

// envInt reads a positive integer from the environment.
func envInt(name string, def int) int {
	var v int
	if _, err := fmt.Sscanf(os.Getenv(name), "%d", &v); err == nil && v > 0 {
		return v
	}
	return def
}

// newScheme is the project's scheme plus CAPI's Cluster (v1beta2), which the ClusterCache reads.
func newScheme() (*runtime.Scheme, error) {
	s := scheme.New()
	if err := clusterv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding cluster.x-k8s.io/v1beta2 to the scheme: %w", err)
	}
	return s, nil
}

// clusterCRDDir writes CAPI's Cluster CRD, as the cluster-api module in the module cache has it,
// into a temporary folder for envtest, serving only v1beta2 and without a conversion webhook: the
// CRD's v1beta1 needs CAPI's webhook to convert, and nothing here reads v1beta1. The CRD is never
// copied into the repository; the module's folder is found with `go list`.
func clusterCRDDir(tb testing.TB) string {
	tb.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("locating the cluster-api module (go list -m sigs.k8s.io/cluster-api): %v", err)
	}
	data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), clusterCRDFile))
	if err != nil {
		tb.Fatalf("reading CAPI's Cluster CRD: %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		tb.Fatalf("parsing CAPI's Cluster CRD: %v", err)
	}
	var served []apiextensionsv1.CustomResourceDefinitionVersion
	for _, v := range crd.Spec.Versions {
		if v.Name == clusterv1.GroupVersion.Version {
			v.Served, v.Storage = true, true
			served = append(served, v)
		}
	}
	if len(served) != 1 {
		tb.Fatalf("CAPI's Cluster CRD has no version %s", clusterv1.GroupVersion.Version)
	}
	crd.Spec.Versions = served
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	out, err = yaml.Marshal(crd)
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cluster.x-k8s.io_clusters.yaml"), out, 0o600); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// startWorld starts the servers, creates the children's Nodes and the n clusters' Secrets and
// Clusters. Every tenth cluster is a hole; cluster 1 is frozen, cluster 2 rotated. With distinct,
// every reachable cluster has a user of its own on its child (one connection each); otherwise the
// reachable clusters of a child share its admin kubeconfig.
func startWorld(tb testing.TB, n, nodes int, distinct bool) *world {
	tb.Helper()
	ctx := context.Background()
	s, err := newScheme()
	if err != nil {
		tb.Fatal(err)
	}
	mgmt, err := testenv.StartManagement(testenv.WithCRDDirs(clusterCRDDir(tb)), testenv.WithScheme(s))
	if err != nil {
		tb.Fatal(err)
	}
	w := &world{mgmt: mgmt, nodes: nodes}
	w.closers = append(w.closers, func() { _ = mgmt.Stop() })
	children, err := testenv.StartChildren("child-0", "child-1", "child-2")
	if err != nil {
		w.stop()
		tb.Fatal(err)
	}
	w.children = children
	for _, ch := range children {
		w.closers = append(w.closers, func() { _ = ch.Stop() })
	}
	if err := w.createNodes(ctx); err != nil {
		w.stop()
		tb.Fatal(err)
	}
	if err := w.createClusters(ctx, n, distinct); err != nil {
		w.stop()
		tb.Fatal(err)
	}
	return w
}

// stop stops the proxy, the black holes and the servers, in the reverse order of their start.
func (w *world) stop() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
	w.closers = nil
}

// createNodes creates the nodes of every child, concurrently. They look like a kubelet's, with the
// status fields a real node carries (conditions, addresses, node info, images), so that what a cache
// keeps of them weighs what it would in production; the inventory bench's nodes carry allocatable and
// Ready only.
func (w *world) createNodes(ctx context.Context) error {
	errs := make([]error, len(w.children))
	var wg sync.WaitGroup
	for i, ch := range w.children {
		wg.Go(func() {
			for j := range w.nodes {
				if err := createNode(ctx, ch.Client, fmt.Sprintf("bench-node-%d", j)); err != nil {
					errs[i] = fmt.Errorf("%s: %w", ch.Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// createNode creates a GPU node with a kubelet-like status.
func createNode(ctx context.Context, c client.Client, name string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": name,
			"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
			"node.kubernetes.io/instance-type": "gpu-8x-b200", "topology.kubernetes.io/region": "eu-central",
			"topology.kubernetes.io/zone": "eu-central-1a", gpu.LabelGPUModel: "B200",
			"nvidia.com/cuda.driver.major": "570", "nvidia.com/gpu.count": "8",
		},
		Annotations: map[string]string{
			"node.alpha.kubernetes.io/ttl":                           "0",
			"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			"csi.volume.kubernetes.io/nodeid":                        `{"csi.example.com":"` + name + `"}`,
		},
	}}
	if err := c.Create(ctx, node); err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	now := metav1.Now()
	alloc := childtest.GPUs(gpu.ResourceNVIDIA, 8)
	alloc[corev1.ResourceEphemeralStorage] = resource.MustParse("1800Gi")
	node.Status = corev1.NodeStatus{
		Capacity: alloc, Allocatable: alloc,
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.10"}, {Type: corev1.NodeHostName, Address: name}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID: "0123456789abcdef0123456789abcdef", SystemUUID: "01234567-89ab-cdef-0123-456789abcdef",
			BootID: "fedcba98-7654-3210-fedc-ba9876543210", KernelVersion: "6.8.0-52-generic",
			OSImage: "Ubuntu 24.04.1 LTS", ContainerRuntimeVersion: "containerd://2.0.2", KubeletVersion: "v1.37.2",
			OperatingSystem: "linux", Architecture: "amd64",
		},
	}
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady} {
		status, reason := corev1.ConditionFalse, "KubeletHasSufficient"+string(t)
		if t == corev1.NodeReady {
			status, reason = corev1.ConditionTrue, "KubeletReady"
		}
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
			Type: t, Status: status, Reason: reason, Message: "kubelet reports " + string(t) + " " + string(status),
			LastHeartbeatTime: now, LastTransitionTime: now,
		})
	}
	for i := range 20 {
		node.Status.Images = append(node.Status.Images, corev1.ContainerImage{
			Names: []string{
				fmt.Sprintf("registry.example.com/ml/training-image-%02d@sha256:%064d", i, i),
				fmt.Sprintf("registry.example.com/ml/training-image-%02d:v1.%d.0", i, i),
			},
			SizeBytes: int64(500+i) << 20,
		})
	}
	if err := c.Status().Update(ctx, node); err != nil {
		return fmt.Errorf("writing status of node %s: %w", name, err)
	}
	return nil
}

// createClusters writes the n clusters' kubeconfig Secrets and CAPI Clusters (infrastructure
// provisioned, so that the ClusterCache connects).
func (w *world) createClusters(ctx context.Context, n int, distinct bool) error {
	for i := range n {
		c := benchCluster{key: types.NamespacedName{Namespace: benchNS, Name: fmt.Sprintf("bench-%03d", i)}, child: i % len(w.children)}
		var kc []byte
		var err error
		switch {
		case i%10 == 9:
			c.role, c.child = roleHole, -1
			kc, err = w.holeKubeconfig()
		case i == 1:
			c.role = roleFrozen
			kc, err = w.frozenKubeconfig(c, distinct)
		case i == 2:
			c.role = roleRotated
			kc, err = w.rotatedKubeconfig(ctx, c, "bench-rotated-a")
		default:
			kc, err = w.kubeconfig(c, distinct)
		}
		if err != nil {
			return fmt.Errorf("kubeconfig of %s: %w", c.key, err)
		}
		if err := w.mgmt.WriteKubeconfigSecret(ctx, benchNS, c.key.Name, kc); err != nil {
			return err
		}
		if err := w.createCAPICluster(ctx, c); err != nil {
			return err
		}
		w.clusters = append(w.clusters, c)
	}
	return nil
}

// createCAPICluster creates the cluster's CAPI Cluster and marks its infrastructure provisioned.
func (w *world) createCAPICluster(ctx context.Context, c benchCluster) error {
	host, port := "127.0.0.1", int32(6443)
	cl := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.key.Namespace, Name: c.key.Name},
		Spec:       clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: host, Port: port}},
	}
	if err := w.mgmt.Client.Create(ctx, cl); err != nil {
		return fmt.Errorf("creating Cluster %s: %w", c.key, err)
	}
	cl.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	if err := w.mgmt.Client.Status().Update(ctx, cl); err != nil {
		return fmt.Errorf("writing status of Cluster %s: %w", c.key, err)
	}
	return nil
}

// kubeconfig is a reachable cluster's kubeconfig: its child's admin kubeconfig, or with distinct a
// user of its own (a client certificate).
func (w *world) kubeconfig(c benchCluster, distinct bool) ([]byte, error) {
	ch := w.children[c.child]
	if !distinct {
		return ch.Kubeconfig, nil
	}
	user, err := ch.Env.AddUser(envtest.User{Name: c.key.Name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return user.KubeConfig()
}

// frozenKubeconfig is the frozen cluster's kubeconfig, through a freezing proxy to its child.
func (w *world) frozenKubeconfig(c benchCluster, distinct bool) ([]byte, error) {
	kc, err := w.kubeconfig(c, distinct)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(w.children[c.child].Config.Host)
	if err != nil {
		return nil, err
	}
	p, err := startFreezingProxy(u.Host)
	if err != nil {
		return nil, err
	}
	w.proxy = p
	w.closers = append(w.closers, p.close)
	return withServer(kc, "https://"+p.addr)
}

// holeKubeconfig is the kubeconfig of a black-holed cluster.
func (w *world) holeKubeconfig() ([]byte, error) {
	addr, closeHole, err := testenv.BlackHole()
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, closeHole)
	return tokenKubeconfig("https://"+addr, w.children[0].Config.CAData, "t")
}

// rotatedKubeconfig creates the ServiceAccount sa (cluster-admin) on the rotated cluster's child and
// returns a kubeconfig with a token of it.
func (w *world) rotatedKubeconfig(ctx context.Context, c benchCluster, sa string) ([]byte, error) {
	ch := w.children[c.child]
	token, err := serviceAccountToken(ctx, ch, sa)
	if err != nil {
		return nil, err
	}
	w.rotatedSA = sa
	return tokenKubeconfig(ch.Config.Host, ch.Config.CAData, token)
}

// rotate gives the rotated cluster a new ServiceAccount and writes its token into the cluster's
// Secret, then revokes the old credential by deleting the old ServiceAccount (the API server checks
// that a bound token's ServiceAccount still exists). It returns when both are done.
func (w *world) rotate(ctx context.Context, c benchCluster, sa string) error {
	old := w.rotatedSA
	kc, err := w.rotatedKubeconfig(ctx, c, sa)
	if err != nil {
		return err
	}
	if err := w.mgmt.WriteKubeconfigSecret(ctx, benchNS, c.key.Name, kc); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(w.children[c.child].Config)
	if err != nil {
		return err
	}
	if err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("revoking ServiceAccount %s: %w", old, err)
	}
	return nil
}

// serviceAccountToken creates a ServiceAccount bound to cluster-admin in the child's default
// namespace and returns a bound token of it (valid for an hour, or until the ServiceAccount goes).
func serviceAccountToken(ctx context.Context, ch *testenv.Child, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(ch.Config)
	if err != nil {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating ServiceAccount %s: %w", name, err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: name}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("binding ServiceAccount %s: %w", name, err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token of ServiceAccount %s: %w", name, err)
	}
	return tr.Status.Token, nil
}

// tokenKubeconfig is a kubeconfig for server with a bearer token.
func tokenKubeconfig(server string, ca []byte, token string) ([]byte, error) {
	return clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: server, CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{"x": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "x",
	})
}

// withServer returns the kubeconfig with every cluster's server set to server.
func withServer(kc []byte, server string) ([]byte, error) {
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	return clientcmd.Write(*cfg)
}

// setChangeLabel writes value into changeLabel of changedNode on child 0.
func (w *world) setChangeLabel(ctx context.Context, value string) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, changeLabel, value)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: changedNode}}
	if err := w.children[0].Client.Patch(ctx, node, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("labelling node %s of child-0: %w", changedNode, err)
	}
	return nil
}

// withRole returns the clusters of a role.
func (w *world) withRole(r role) []benchCluster {
	var out []benchCluster
	for _, c := range w.clusters {
		if c.role == r {
			out = append(out, c)
		}
	}
	return out
}

// reachable returns the keys of the clusters on a child server.
func (w *world) reachable() []types.NamespacedName {
	var out []types.NamespacedName
	for _, c := range w.clusters {
		if c.role != roleHole {
			out = append(out, c.key)
		}
	}
	return out
}

// onChild0 returns the keys of the reachable clusters on child 0, whose node the change phases label.
func (w *world) onChild0() []types.NamespacedName {
	var out []types.NamespacedName
	for _, c := range w.clusters {
		if c.role != roleHole && c.child == 0 {
			out = append(out, c.key)
		}
	}
	return out
}

// freezingProxy forwards TCP connections to a child's API server until freeze; then it reads nothing
// more from either side and keeps the connections open, like an API server process that stopped
// (SIGSTOP) or a route that drops packets.
type freezingProxy struct {
	addr     string
	listener net.Listener
	frozen   chan struct{}
	once     sync.Once

	mu    sync.Mutex
	conns []net.Conn
}

func startFreezingProxy(target string) (*freezingProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &freezingProxy{addr: l.Addr().String(), listener: l, frozen: make(chan struct{})}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				_ = in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go p.pipe(out, in)
			go p.pipe(in, out)
		}
	}()
	return p, nil
}

// pipe copies src to dst until either fails or the proxy freezes.
func (p *freezingProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		select {
		case <-p.frozen:
			return
		default:
		}
		n, err := src.Read(buf)
		select {
		case <-p.frozen:
			return // what arrived after the freeze is dropped
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// freeze stops forwarding; connections stay open and new ones are accepted and never served.
func (p *freezingProxy) freeze() { p.once.Do(func() { close(p.frozen) }) }

// close closes the listener and every connection.
func (p *freezingProxy) close() {
	p.freeze()
	_ = p.listener.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}
