// Package childcluster keeps one live connection per child cluster, reached through the kubeconfig
// Secret k0rdent (Cluster API) writes next to each ClusterDeployment: `<cd>-kubeconfig`, key `value`.
//
// A connection is built on the first Get: the Secret is read, a rest.Config is built through the
// kubeconfig sanitizer (common/kubeconfig: only inline credentials and https servers are accepted),
// and watches (a Reflector each, watcher.go) on the child's Nodes and Pods keep only what resource
// arithmetic needs. Later Gets return the same connection. ClusterDeployments whose kubeconfigs have
// the same content (the same API server and identity) share one connection. It is rebuilt when the Secret's data
// changes (compared by hash: a resourceVersion also moves on label edits), stopped by Forget, by an
// optional idle timeout and by stopping the Cache. Connects run with bounded concurrency, and a failed
// connect is retried only after an exponential backoff.
//
// Source tells controllers that a child's Nodes or Pods changed, or that it became
// unreachable or reachable again, debounced per child and never blocking the watches.
//
// # What the caller's manager needs
//
// The Cache reads Secrets through the client.Reader it is given. Pass the manager's APIReader (one GET
// per Get call) or a cache restricted to kubeconfig Secrets (for example by the label
// cluster.x-k8s.io/cluster-name); never a cache of every Secret's data cluster-wide. The caller's RBAC
// needs `get` on secrets in the ClusterDeployments' namespaces (plus `list` and `watch` when a
// caching reader is used), and, for adopted and regional clusters (locate.go), `get` on
// sveltosclusters (lib.projectsveltos.io), credentials and regions (k0rdent.mirantis.com) and on the
// Secrets they name; the Region's kubeconfig needs `get` on secrets of the ClusterDeployments'
// namespaces on the regional cluster. The child side needs get/list/watch on nodes and pods (and, with
// Options.OwnedSelector, list/watch on namespaces, resourcequotas and networkpolicies), which a
// ClusterDeployment's admin kubeconfig has. Kubeconfig contents never reach logs or errors.
package childcluster

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/common/kubeconfig"
	"github.com/exalsius/exalsius-operator/common/scheme"
)

// Options configure a Cache. Zero values take the defaults named on each field.
type Options struct {
	// Reader reads the kubeconfig Secrets (required): an APIReader or a narrowly filtered cache.
	Reader client.Reader
	// MetadataReader, when set, reads the kubeconfig Secrets' metadata, typically the manager's
	// client backed by a metadata-only watch of Secrets (WatchesMetadata). Get then reads a Secret's
	// data through Reader only when its resourceVersion differs from the one last read, so a busy
	// child costs no Secret GET per change. Nil reads the data on every Get.
	MetadataReader client.Reader
	// Scheme is the scheme of each cluster's direct client (default: common/scheme.New()).
	Scheme *runtime.Scheme
	// Logger logs connects and disconnects, by ClusterDeployment name only.
	Logger logr.Logger
	// WatchWorkloadEvents also watches each child's FailedCreate and SuccessfulCreate Events
	// (WorkloadEventReasons; Cluster.WorkloadEvents), one watch per reason, and tells a change of them
	// as a change of their namespace's Pods. A connect does not wait for them: credentials that may
	// not list Events cluster-wide leave them unread (WorkloadEvents says so) and the child reachable.
	WatchWorkloadEvents bool
	// OwnedSelector, a label selector, also watches each child's Namespaces, ResourceQuotas and
	// NetworkPolicies that it selects: the objects the caller keeps there. Cluster.OwnedClient reads
	// them from the watch, and a change of one by someone else (not one that came) is told as
	// Change.Owned. A connect does not wait for them, and credentials that may not list them leave
	// them to be read on the child. Empty (the default) watches none.
	OwnedSelector string
	// MaxConcurrentConnects bounds how many children are listed and watched for the first time at
	// once (default 4). A connect takes its slot only once the child answered its first request (8
	// times as many first requests may be under way), so children that do not answer hold none.
	// Connects that retry after a failure run at most half as many at once (rounded down, at least
	// one), so the others stay free for new children and changed Secrets.
	MaxConcurrentConnects int
	// SyncTimeout bounds each step of a connect: the child's answer to its first request, then listing
	// its Nodes and Pods (default 30s).
	SyncTimeout time.Duration
	// IdleTimeout stops a connection that no Get used for this long (default 0: never). Leave it at 0
	// when the connection must keep watching without Gets, as the inventory does.
	IdleTimeout time.Duration
	// HealthInterval is the period of the reachability probe of a connected child (default 15s).
	HealthInterval time.Duration
	// ProbeTimeout bounds one probe (default 10s).
	ProbeTimeout time.Duration
	// ProbeFailureThreshold is how many probes in a row must fail before a connected child counts as
	// unreachable (default 2). A failing list or watch counts at once.
	ProbeFailureThreshold int
	// Debounce is the window in which a child's changes are folded into one notification (default 1s).
	Debounce time.Duration
	// NotifyAtOnce tells a child's first change after a quiet Debounce window at once, instead of at
	// the end of the window; the changes that follow it within the window are folded into one
	// notification at its end. A child is told at most once per window either way; a burst of
	// changes is told twice (its first change, then the rest) instead of once. Default false.
	NotifyAtOnce bool
	// BackoffBase and BackoffMax bound the wait before a failed connect is retried; it doubles with each
	// failure (defaults 2s and 5m). A changed Secret retries at once.
	BackoffBase, BackoffMax time.Duration
	// QPS and Burst limit each child client (defaults 20 and 40).
	QPS   float32
	Burst int
	// UserAgent is sent to the children (default "exalsius-childcluster").
	UserAgent string
	// SystemNamespace is k0rdent's system namespace, where a Region's kubeconfig Secret lives
	// (default DefaultSystemNamespace, "kcm-system").
	SystemNamespace string
	// Kubeconfig is what a kubeconfig Secret may ask for beyond inline credentials (default: nothing;
	// exec, auth plugins, file paths, impersonation, proxies, plain HTTP and, unless allowed here,
	// insecure TLS are refused with ReasonKubeconfigInvalid).
	Kubeconfig kubeconfig.Policy
	// OnConnect, when set, is called after each connect attempt with its duration and error.
	OnConnect func(cd types.NamespacedName, took time.Duration, err error)
}

func (o *Options) defaults() {
	if o.Scheme == nil {
		o.Scheme = scheme.New()
	}
	if o.MaxConcurrentConnects <= 0 {
		o.MaxConcurrentConnects = 4
	}
	if o.SyncTimeout <= 0 {
		o.SyncTimeout = 30 * time.Second
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = 15 * time.Second
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 10 * time.Second
	}
	if o.ProbeFailureThreshold <= 0 {
		o.ProbeFailureThreshold = 2
	}
	if o.Debounce <= 0 {
		o.Debounce = time.Second
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = 2 * time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 5 * time.Minute
	}
	if o.QPS <= 0 {
		o.QPS = 20
	}
	if o.Burst <= 0 {
		o.Burst = 40
	}
	if o.SystemNamespace == "" {
		o.SystemNamespace = DefaultSystemNamespace
	}
	if o.UserAgent == "" {
		o.UserAgent = "exalsius-childcluster"
	}
}

// entry is the state of one ClusterDeployment in the cache. Its connection (connecting, connected or
// failed) is a conn, shared by every ClusterDeployment whose kubeconfig has the same content: the
// same API server and the same identity are watched once, however many ClusterDeployments reach them.
type entry struct {
	key      types.NamespacedName
	hash     [32]byte
	secretRV string // resourceVersion of the Secret the data were read from
	conn     *conn
	lastUsed time.Time
}

// conn is one connection (watches, probe, HTTP client) and its connect attempt, shared by the
// entries of one kubeconfig content.
type conn struct {
	hash     [32]byte
	cancel   context.CancelFunc
	done     chan struct{} // closed when the connect attempt finished
	cluster  *Cluster      // set when connected
	err      error         // set when the attempt failed
	failures int           // consecutive failed attempts with this content
	retryAt  time.Time
	// users are the ClusterDeployments of this connection (guarded by Cache.mu).
	users map[types.NamespacedName]struct{}
}

// Cache holds the connections to child clusters. It is safe for concurrent use. Add it to the
// manager (it is a manager.Runnable) so that it runs its idle sweeper and stops with the manager, or
// call Stop yourself.
type Cache struct {
	opts     Options
	log      logr.Logger
	notifier *notifier
	// sem holds a slot per connect listing its child; reachSem one per connect waiting for the
	// child's first answer (reachSlots), so that children that do not answer (a dropped route waits
	// out a whole TLS handshake timeout) never hold one of sem's few slots. retrySem bounds how many
	// connects that retry after a failure run at once (retrySlots), so that children that keep
	// failing never starve the first connect of a new child or the reconnect of a rotated
	// credential.
	sem      chan struct{}
	reachSem chan struct{}
	retrySem chan struct{}
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu      sync.Mutex
	entries map[types.NamespacedName]*entry
	conns   map[[32]byte]*conn
	stopped bool
	// sources maps a management-cluster Secret read (or looked for) by the lookup of an adopted or
	// regional cluster to those clusters; sourcesOf is the reverse.
	sources   map[types.NamespacedName]map[types.NamespacedName]struct{}
	sourcesOf map[types.NamespacedName][]types.NamespacedName

	// inFlight and peakInFlight count connects listing a child (in a connect slot) now and at most;
	// reaching counts first requests under way (in a reach slot). For tests and debugging.
	inFlight, peakInFlight, reaching atomic.Int32
	// secretReads counts reads of Secret data.
	secretReads atomic.Int64
}

// New returns a Cache. It fails when opts.Reader is nil.
func New(opts Options) (*Cache, error) {
	if opts.Reader == nil {
		return nil, fmt.Errorf("childcluster: Options.Reader is required")
	}
	opts.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Cache{
		opts:      opts,
		log:       opts.Logger,
		notifier:  newNotifier(opts.Debounce, opts.NotifyAtOnce),
		sem:       make(chan struct{}, opts.MaxConcurrentConnects),
		retrySem:  make(chan struct{}, retrySlots(opts.MaxConcurrentConnects)),
		reachSem:  make(chan struct{}, reachSlots(opts.MaxConcurrentConnects)),
		ctx:       ctx,
		cancel:    cancel,
		entries:   map[types.NamespacedName]*entry{},
		conns:     map[[32]byte]*conn{},
		sources:   map[types.NamespacedName]map[types.NamespacedName]struct{}{},
		sourcesOf: map[types.NamespacedName][]types.NamespacedName{},
	}, nil
}

// Get returns the connection to the child of ClusterDeployment namespace/name, connecting when needed
// and waiting for the connect.
//
// Errors: an *UnreachableError (see IsUnreachable) when the kubeconfig Secret is missing or unusable,
// when the child refuses the credentials (ReasonUnauthorized, at the first refusal), when the connect
// failed (a new attempt waits for the backoff; RetryAfter says how long), or when a connected child
// stopped answering (the connection stays and recovers by itself); any other error when the Secret
// could not be read or ctx ended.
func (c *Cache) Get(ctx context.Context, namespace, name string) (*Cluster, error) {
	return c.get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, true)
}

// TryGet is Get without the wait: while a connect is under way it returns an *UnreachableError with
// ReasonConnecting at once, and subscribers (Source) are notified when the connect ends,
// successful or not. A caller that serves many children, like the inventory, uses it so that one slow
// or unreachable child never holds up the others.
func (c *Cache) TryGet(ctx context.Context, namespace, name string) (*Cluster, error) {
	return c.get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, false)
}

func (c *Cache) get(ctx context.Context, key types.NamespacedName, wait bool) (*Cluster, error) {
	var data []byte
	var hash [32]byte
	rv, err := c.secretVersion(ctx, key)
	if UnreachableReason(err) == ReasonKubeconfigMissing {
		// No `<cd>-kubeconfig`: an adopted or a regional cluster, or one not up yet.
		indirect, found, ierr := c.readIndirect(ctx, key)
		switch {
		case !found && ierr == nil:
		case ierr != nil:
			err = ierr
		default:
			data, err = indirect, nil
		}
	}
	if err != nil {
		if UnreachableReason(err) == ReasonKubeconfigMissing {
			c.disconnect(key)
		}
		return nil, err
	}
	c.mu.Lock()
	e := c.entries[key]
	known := e != nil && rv != "" && e.secretRV == rv
	if known {
		hash = e.hash
	}
	c.mu.Unlock()
	if data == nil && !known {
		var readRV string
		data, readRV, err = c.readKubeconfig(ctx, key)
		if UnreachableReason(err) == ReasonKubeconfigMissing {
			if indirect, found, ierr := c.readIndirect(ctx, key); found || ierr != nil {
				data, readRV, err = indirect, "", ierr
			}
		}
		if err != nil {
			if UnreachableReason(err) == ReasonKubeconfigMissing {
				c.disconnect(key)
			}
			return nil, err
		}
		if rv == "" {
			rv = readRV
		}
	}
	if data != nil {
		hash = sha256.Sum256(data)
	}

	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil, ErrStopped
	}
	e = c.entries[key]
	now := time.Now()
	switch {
	case e == nil && data != nil:
		e = c.connectLocked(key, hash, rv, data, 0)
	case e == nil:
		// Forgotten meanwhile: start over, reading the data.
		c.mu.Unlock()
		return c.get(ctx, key, wait)
	case e.hash != hash:
		c.log.Info("kubeconfig Secret changed, reconnecting", "clusterDeployment", key.String())
		c.removeLocked(e)
		e = c.connectLocked(key, hash, rv, data, 0)
	case e.conn.failed() && !now.Before(e.conn.retryAt):
		if data == nil {
			// The data are needed for a new attempt: read them on the next call.
			e.secretRV = ""
			c.mu.Unlock()
			return c.get(ctx, key, wait)
		}
		failures := e.conn.failures
		c.removeLocked(e)
		e = c.connectLocked(key, hash, rv, data, failures)
	default:
		e.secretRV = rv // same data under a new resourceVersion (a label edit)
	}
	e.lastUsed = now
	c.mu.Unlock()

	cn := e.conn
	if !wait {
		select {
		case <-cn.done:
		default:
			return nil, &UnreachableError{Cluster: key, Reason: ReasonConnecting, Err: fmt.Errorf("connecting")}
		}
	}
	select {
	case <-cn.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if cn.err != nil {
		return nil, forCluster(cn.err, key)
	}
	if err := cn.cluster.Err(); err != nil {
		return nil, forCluster(err, key)
	}
	return cn.cluster, nil
}

// Forget stops the connection to a ClusterDeployment's child, if any, and waits for its watches to
// end. Call it when the ClusterDeployment goes or is no longer of interest.
func (c *Cache) Forget(key types.NamespacedName) {
	c.setSources(key, nil)
	c.disconnect(key)
}

// disconnect is Forget without dropping the Secrets an adopted or regional lookup read (Using): a
// missing kubeconfig disconnects, and its Secret appearing must still be mapped to the cluster.
func (c *Cache) disconnect(key types.NamespacedName) {
	c.mu.Lock()
	e := c.entries[key]
	var cn *conn
	if e != nil {
		cn = c.detachLocked(e)
	}
	c.mu.Unlock()
	if e == nil {
		return
	}
	if cn != nil {
		select {
		case <-cn.done:
			if cn.cluster != nil {
				cn.cluster.stop()
			}
		default:
			// Still connecting: connect sees no user left and stops what it built.
		}
	}
	c.log.V(1).Info("child cluster forgotten", "clusterDeployment", key.String())
}

// MetadataReader reads objects' metadata on the management cluster the way the cache does:
// Options.MetadataReader, else Options.Reader. Users of the cache read what decides whether a
// cluster may be used at all (the tenancy annotation of its namespace) through it.
func (c *Cache) MetadataReader() client.Reader {
	if c.opts.MetadataReader != nil {
		return c.opts.MetadataReader
	}
	return c.opts.Reader
}

// Keys returns the ClusterDeployments the cache holds an entry for (connecting, connected or failed).
func (c *Cache) Keys() []types.NamespacedName {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(c.entries))
	for k := range c.entries {
		out = append(out, k)
	}
	return out
}

// Peers returns the other ClusterDeployments the cache is connected through to the same cluster as
// key: those whose child shows the same identity (Cluster.Identity), sorted. Nil when key is not
// connected or its identity is not known. Only connected ClusterDeployments are known: one that was
// never asked for, or whose connect failed, is not among them.
func (c *Cache) Peers(key types.NamespacedName) []types.NamespacedName {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil || e.conn.cluster == nil || e.conn.cluster.identity == "" {
		return nil
	}
	id := e.conn.cluster.identity
	var out []types.NamespacedName
	for k, o := range c.entries {
		if k != key && o.conn.cluster != nil && o.conn.cluster.identity == id {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// subscribe returns a channel that receives a ClusterDeployment's Change after its child's Nodes or
// Pods changed, or after it became unreachable or reachable again; and a function that cancels the
// subscription and closes the channel. Changes of one child within the debounce window give one
// Change, folded; a subscriber that reads slowly gets each pending cluster once, with what changed
// meanwhile folded. Controllers use Source.
func (c *Cache) subscribe() (<-chan Change, func()) {
	return c.notifier.subscribe()
}

// Start runs the idle sweeper until ctx ends, then stops the cache. It makes the Cache a
// manager.Runnable.
func (c *Cache) Start(ctx context.Context) error {
	if c.opts.IdleTimeout > 0 {
		t := time.NewTicker(max(c.opts.IdleTimeout/4, 100*time.Millisecond))
		defer t.Stop()
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case <-c.ctx.Done():
				break loop
			case <-t.C:
				c.sweep()
			}
		}
	} else {
		select {
		case <-ctx.Done():
		case <-c.ctx.Done():
		}
	}
	c.Stop()
	return nil
}

// NeedLeaderElection returns false: every replica that uses the cache needs it running.
func (c *Cache) NeedLeaderElection() bool { return false }

// sweep stops connections unused for longer than the idle timeout.
func (c *Cache) sweep() {
	cutoff := time.Now().Add(-c.opts.IdleTimeout)
	c.mu.Lock()
	var idle []types.NamespacedName
	for k, e := range c.entries {
		if e.lastUsed.Before(cutoff) {
			idle = append(idle, k)
		}
	}
	c.mu.Unlock()
	for _, k := range idle {
		c.log.V(1).Info("child cluster idle, disconnecting", "clusterDeployment", k.String())
		c.Forget(k)
	}
}

// Stop stops every connection and subscription and waits for their goroutines. Get fails afterwards.
func (c *Cache) Stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		c.wg.Wait()
		return
	}
	c.stopped = true
	conns := c.conns
	c.entries = map[types.NamespacedName]*entry{}
	c.conns = map[[32]byte]*conn{}
	c.mu.Unlock()
	c.cancel()
	c.notifier.close()
	// Each connection stops on its own: one slow child does not hold the others' stops.
	var stops sync.WaitGroup
	for _, cn := range conns {
		stops.Go(func() {
			<-cn.done
			if cn.cluster != nil {
				cn.cluster.stop()
			}
		})
	}
	stops.Wait()
	c.wg.Wait()
}
