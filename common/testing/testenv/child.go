package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/exalsius/exalsius-operator/common/scheme"
)

// Child is a separate API server (its own kube-apiserver and etcd processes, no CRDs) that stands in
// for a child cluster.
type Child struct {
	// Name identifies the child in messages; it need not be unique.
	Name string
	// Config reaches the child as a member of system:masters.
	Config *rest.Config
	// Client is a controller-runtime client for Config.
	Client client.Client
	// Kubeconfig is an admin (system:masters) kubeconfig for the child, as a ClusterDeployment's
	// kubeconfig Secret would hold it. It stays valid across Restart.
	Kubeconfig []byte
	// Env is the underlying envtest environment.
	Env *envtest.Environment

	mu        sync.Mutex
	root      string
	running   bool
	closeLogs func() error
}

// StartChild starts a separate kube-apiserver and etcd on their own ports with their own data.
func StartChild(name string, opts ...ChildOption) (*Child, error) {
	var o childOptions
	for _, opt := range opts {
		opt(&o)
	}
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "testenv-child-")
	if err != nil {
		return nil, fmt.Errorf("child %s: %w", name, err)
	}
	apiPath, etcdPath, err := makeServerDirs(root, assets, o.logDir)
	if err != nil {
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("child %s: %w", name, err)
	}
	etcdDir, certDir := filepath.Join(root, "etcd"), filepath.Join(root, "apiserver")

	// Fixed directories keep etcd's data and the apiserver's serving certificates across Restart;
	// envtest keeps the ports it picked on the first start in these structs.
	api := &envtest.APIServer{Path: apiPath, CertDir: certDir}
	// A child only needs to serve API calls: skip API priority and fairness and profiling.
	api.Configure().
		Set("enable-priority-and-fairness", "false").
		Set("profiling", "false").
		Set(shutdownWatchGraceFlag, shutdownWatchGrace)
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		ControlPlane: envtest.ControlPlane{
			APIServer: api,
			Etcd:      &envtest.Etcd{Path: etcdPath, DataDir: etcdDir},
		},
		Scheme: scheme.New(),
	}
	configureEnv(env)
	// Pods of the local world's node reach children on the node's address (envtest puts it in the
	// serving certificate).
	if addr, err := servingAddress(); err != nil || addr != "" {
		if err == nil {
			err = listenOn(api, addr)
		}
		if err != nil {
			_ = os.RemoveAll(root)
			return nil, fmt.Errorf("child %s: %w", name, err)
		}
	}
	var closeLogs func() error
	if o.logDir != "" {
		if closeLogs, err = serverLogs(env, o.logDir); err != nil {
			_ = os.RemoveAll(root)
			return nil, fmt.Errorf("child %s: %w", name, err)
		}
	}

	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(root)
		if closeLogs != nil {
			_ = closeLogs()
		}
		return nil, fmt.Errorf("starting child API server %s: %w", name, err)
	}
	ch := &Child{Name: name, Config: cfg, Env: env, root: root, running: true, closeLogs: closeLogs}
	if err := ch.init(); err != nil {
		_ = ch.Stop()
		return nil, err
	}
	return ch, nil
}

// StartChildren starts one child per name concurrently. On any failure it stops those that started
// and returns every error.
func StartChildren(names ...string) ([]*Child, error) {
	children := make([]*Child, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { children[i], errs[i] = StartChild(name) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range children {
			_ = c.Stop()
		}
		return nil, err
	}
	return children, nil
}

func (c *Child) init() error {
	cl, err := client.New(c.Config, client.Options{Scheme: c.Env.Scheme})
	if err != nil {
		return fmt.Errorf("child %s: building client: %w", c.Name, err)
	}
	c.Client = cl
	user, err := c.Env.AddUser(envtest.User{Name: "testenv-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("child %s: adding admin user: %w", c.Name, err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("child %s: building kubeconfig: %w", c.Name, err)
	}
	c.Kubeconfig = kc
	return nil
}

// Stop stops the child's processes and removes its data. Stopping twice is harmless.
func (c *Child) Stop() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	if c.running {
		if err := c.Env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping child %s: %w", c.Name, err))
		}
		c.running = false
	}
	if c.root != "" {
		if err := os.RemoveAll(c.root); err != nil {
			errs = append(errs, err)
		}
		c.root = ""
	}
	if c.closeLogs != nil {
		errs = append(errs, c.closeLogs())
		c.closeLogs = nil
	}
	return errors.Join(errs...)
}

// Restart stops the child and starts it again on the same address with the same data, so that
// Config, Client and Kubeconfig keep working. Between the two, the child is unreachable.
func (c *Child) Restart() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.pause(); err != nil {
		return err
	}
	return c.resume()
}

// Pause stops the child's processes but keeps its address and data, so that the child stays
// unreachable until Resume (or Restart). Pausing a paused child is harmless.
func (c *Child) Pause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pause()
}

// Resume starts a paused child again on the same address with the same data. Resuming a running
// child is harmless.
func (c *Child) Resume() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return nil
	}
	return c.resume()
}

func (c *Child) pause() error {
	if c.root == "" {
		return fmt.Errorf("child %s: already stopped for good", c.Name)
	}
	if !c.running {
		return nil
	}
	if err := c.Env.ControlPlane.Stop(); err != nil {
		return fmt.Errorf("stopping child %s: %w", c.Name, err)
	}
	c.running = false
	return nil
}

func (c *Child) resume() error {
	if c.root == "" {
		return fmt.Errorf("child %s: already stopped for good", c.Name)
	}
	if err := c.Env.ControlPlane.Start(); err != nil {
		// The etcd half may be up; stop it so nothing leaks.
		_ = c.Env.ControlPlane.Stop()
		return fmt.Errorf("restarting child %s: %w", c.Name, err)
	}
	c.running = true
	return nil
}
