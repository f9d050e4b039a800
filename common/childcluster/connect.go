package childcluster

// Connections: reading a child's kubeconfig, connecting (one connection shared by identical
// kubeconfigs, with backoff after failures) and removing connections.

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// forCluster names the ClusterDeployment key in an *UnreachableError of a shared connection, which
// names the ClusterDeployment it was made for.
func forCluster(err error, key types.NamespacedName) error {
	if u, ok := err.(*UnreachableError); ok && u.Cluster != key {
		cp := *u
		cp.Cluster = key
		return &cp
	}
	return err
}

// failed reports a finished, failed connect.
func (cn *conn) failed() bool {
	select {
	case <-cn.done:
		return cn.err != nil
	default:
		return false
	}
}

// secretVersion returns the kubeconfig Secret's resourceVersion from the MetadataReader, or "" when
// there is none.
func (c *Cache) secretVersion(ctx context.Context, key types.NamespacedName) (string, error) {
	if c.opts.MetadataReader == nil {
		return "", nil
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	name := types.NamespacedName{Namespace: key.Namespace, Name: k0rdentv1beta1.KubeconfigSecretName(key.Name)}
	if err := c.opts.MetadataReader.Get(ctx, name, m); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &UnreachableError{Cluster: key, Reason: ReasonKubeconfigMissing,
				Err: fmt.Errorf("Secret %s not found", name)}
		}
		return "", fmt.Errorf("reading kubeconfig Secret %s metadata: %w", name, err)
	}
	return m.ResourceVersion, nil
}

// readKubeconfig reads the kubeconfig Secret's value.
func (c *Cache) readKubeconfig(ctx context.Context, key types.NamespacedName) ([]byte, string, error) {
	c.secretReads.Add(1)
	secret := &corev1.Secret{}
	name := types.NamespacedName{Namespace: key.Namespace, Name: k0rdentv1beta1.KubeconfigSecretName(key.Name)}
	if err := c.opts.Reader.Get(ctx, name, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", &UnreachableError{Cluster: key, Reason: ReasonKubeconfigMissing,
				Err: fmt.Errorf("Secret %s not found", name)}
		}
		return nil, "", fmt.Errorf("reading kubeconfig Secret %s: %w", name, err)
	}
	data := secret.Data[k0rdentv1beta1.KubeconfigSecretKey]
	if len(data) == 0 {
		return nil, "", &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid,
			Err: fmt.Errorf("Secret %s has no data key %q", name, k0rdentv1beta1.KubeconfigSecretKey)}
	}
	return data, secret.ResourceVersion, nil
}

// SecretReads returns how many times the cache read a kubeconfig Secret's data, for tests and
// debugging.
func (c *Cache) SecretReads() int64 { return c.secretReads.Load() }

// connectLocked adds an entry: it shares the connection of another entry with the same kubeconfig
// content (connecting, connected, or failed and still in its backoff), else starts a connect in the
// background.
func (c *Cache) connectLocked(key types.NamespacedName, hash [32]byte, rv string, data []byte, failures int) *entry {
	e := &entry{key: key, hash: hash, secretRV: rv}
	c.entries[key] = e
	if cn := c.conns[hash]; cn != nil && (!cn.failed() || time.Now().Before(cn.retryAt)) {
		cn.users[key] = struct{}{}
		e.conn = cn
		return e
	}
	ctx, cancel := context.WithCancel(c.ctx)
	cn := &conn{hash: hash, cancel: cancel, done: make(chan struct{}), failures: failures,
		users: map[types.NamespacedName]struct{}{key: {}}}
	c.conns[hash] = cn
	e.conn = cn
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.triggerUsers(cn, deltaAll) // TryGet callers learn that the connect ended
		c.connect(ctx, cn, key, data)
	}()
	return e
}

// triggerUsers notifies the subscribers about every ClusterDeployment of a connection.
func (c *Cache) triggerUsers(cn *conn, d delta) {
	c.mu.Lock()
	keys := make([]types.NamespacedName, 0, len(cn.users))
	for k := range cn.users {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.notifier.trigger(k, d)
	}
}

// retrySlots is how many of n connect slots retries may hold: half (rounded down), at least one.
func retrySlots(n int) int {
	return max(1, n/2)
}

// reachSlots is how many first requests may be under way for n connect slots: a child that has not
// answered yet costs a goroutine and a socket, not the memory of a listing, so 8 times as many.
func reachSlots(n int) int {
	return 8 * n
}

// acquire takes a slot of sem, or fails when ctx ends first.
func acquire(ctx context.Context, sem chan struct{}) bool {
	select {
	case sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// connect builds and starts the cluster of a connection. It first reaches the child (its first
// request, within a reach slot) and only then takes a connect slot to list and watch it, so a child
// that does not answer (a black-holed address waits out the dial or TLS handshake timeout, 10 s)
// never holds one of the few connect slots that bound the listings' memory. A retry after a failure
// first takes one of the retry slots. key is the ClusterDeployment the connection is made for (its
// logs and errors name it).
func (c *Cache) connect(ctx context.Context, cn *conn, key types.NamespacedName, data []byte) {
	defer close(cn.done)
	stopped := func() {
		cn.err = ErrStopped
		if c.ctx.Err() == nil {
			cn.err = &UnreachableError{Cluster: key, Reason: ReasonConnectFailed, Err: fmt.Errorf("connection was replaced while waiting to connect")}
		}
	}
	if cn.failures > 0 {
		if !acquire(ctx, c.retrySem) {
			stopped()
			return
		}
		defer func() { <-c.retrySem }()
	}
	start := time.Now()
	cl, err := newCluster(key, data, connectConfig{opts: &c.opts, onChange: func(d delta) { c.triggerUsers(cn, d) }})
	if err == nil {
		if !acquire(ctx, c.reachSem) {
			cl.stop()
			stopped()
			return
		}
		c.reaching.Add(1)
		err = cl.reach(ctx, c.opts.SyncTimeout)
		c.reaching.Add(-1)
		<-c.reachSem
		if err == nil {
			err = c.startInSlot(ctx, cl)
			if errors.Is(err, errNoSlot) {
				stopped()
				return
			}
		}
	}
	if c.opts.OnConnect != nil {
		c.opts.OnConnect(key, time.Since(start), err)
	}
	if err != nil {
		c.mu.Lock()
		cn.failures++
		cn.retryAt = time.Now().Add(c.backoff(cn.failures))
		if u, ok := err.(*UnreachableError); ok {
			u.RetryAt = cn.retryAt
		}
		cn.err = err
		c.mu.Unlock()
		c.log.Info("child cluster connect failed", "clusterDeployment", key.String(), "error", err.Error(), "retryAt", cn.retryAt)
		return
	}
	c.mu.Lock()
	current := len(cn.users) > 0 && !c.stopped
	cn.cluster = cl
	c.mu.Unlock()
	if !current {
		// Forgotten or replaced while connecting.
		cl.stop()
		cn.err = &UnreachableError{Cluster: key, Reason: ReasonConnectFailed, Err: fmt.Errorf("connection was forgotten while connecting")}
		return
	}
	c.log.V(1).Info("child cluster connected", "clusterDeployment", key.String(), "took", time.Since(start).String())
}

// errNoSlot: ctx ended while waiting for a connect slot.
var errNoSlot = errors.New("no connect slot")

// startInSlot lists and watches a reached child within one of the connect slots.
func (c *Cache) startInSlot(ctx context.Context, cl *Cluster) error {
	if !acquire(ctx, c.sem) {
		cl.stop()
		return errNoSlot
	}
	defer func() { <-c.sem }()
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for peak := c.peakInFlight.Load(); n > peak && !c.peakInFlight.CompareAndSwap(peak, n); peak = c.peakInFlight.Load() {
	}
	return cl.start(ctx, c.opts.SyncTimeout, probeConfig{interval: c.opts.HealthInterval, timeout: c.opts.ProbeTimeout, threshold: c.opts.ProbeFailureThreshold})
}

// backoff returns the wait after the n-th consecutive failure.
func (c *Cache) backoff(n int) time.Duration {
	d := c.opts.BackoffBase
	for i := 1; i < n && d < c.opts.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.opts.BackoffMax)
}

// removeLocked drops an entry. When it was its connection's last user, the connection ends: a
// connect still under way is cancelled, a connected cluster is stopped in the background.
func (c *Cache) removeLocked(e *entry) {
	if cn := c.detachLocked(e); cn != nil {
		if cl := cn.cluster; cl != nil {
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				cl.stop()
			}()
		}
	}
}

// detachLocked drops an entry and returns its connection when no other entry uses it any more (its
// connect is cancelled then); nil otherwise.
func (c *Cache) detachLocked(e *entry) *conn {
	if c.entries[e.key] == e {
		delete(c.entries, e.key)
	}
	cn := e.conn
	if cn == nil {
		return nil
	}
	delete(cn.users, e.key)
	if len(cn.users) > 0 {
		return nil
	}
	if c.conns[cn.hash] == cn {
		delete(c.conns, cn.hash)
	}
	cn.cancel() // a connect still under way (say with a revoked credential) ends now
	return cn
}
