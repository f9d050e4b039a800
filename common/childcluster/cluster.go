package childcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	networkingv1client "k8s.io/client-go/kubernetes/typed/networking/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/connrotation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/exalsius/exalsius-operator/common/kubeconfig"
)

// podFieldSelector keeps finished pods out of the cache: they hold no resources. A pod that finishes
// leaves the watch as a deletion.
var podFieldSelector = fields.AndSelectors(
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
).String()

// Cluster is a live connection to one child cluster: watches of its Nodes and Pods, trimmed to what
// resource arithmetic needs, and a direct client. It is shared by every caller of Cache.Get for the
// same ClusterDeployment; treat the objects it returns as read-only.
type Cluster struct {
	key    types.NamespacedName
	client client.Client
	nodes  *watcher
	pods   *watcher
	// events watch the child's workload Events (WorkloadEventReasons), one per reason, when
	// Options.WatchWorkloadEvents is set; a connect does not wait for them.
	events []*watcher
	// owned watch the objects Options.OwnedSelector selects (owned.go); nil without it. A connect does
	// not wait for them.
	owned *ownedWatchers

	core       corev1client.CoreV1Interface
	dialer     *connrotation.Dialer
	httpClient *http.Client
	onChange   func(delta)

	// identity is the UID of the child's kube-system namespace, read once at connect; empty when it
	// could not be read (Identity).
	identity types.UID

	// health is the current *UnreachableError, or nil while the child answers.
	health       atomic.Pointer[UnreachableError]
	lastWatchErr atomic.Int64 // unix nanos of the last list/watch failure
	lastContact  atomic.Int64 // unix nanos of the last answer from the child

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	// changes counts the changes of the Nodes and Pods seen after the initial listing; memo keeps
	// values derived from them (Memo).
	changes atomic.Uint64
	memoMu  sync.Mutex
	memo    map[string]memoEntry

	// listFailed is closed at the first failed list or watch; a connect waiting for the initial
	// listing gives up then instead of waiting for the sync timeout (the cache's backoff retries).
	listFailed chan struct{}
	failOnce   sync.Once
}

// Key returns the ClusterDeployment this cluster belongs to.
func (c *Cluster) Key() types.NamespacedName { return c.key }

// Client returns a direct (uncached) client for the child, for example to delete a namespace there.
func (c *Cluster) Client() client.Client { return c.client }

// Nodes returns the child's Nodes as last seen (trimmed: name, labels, unschedulable, allocatable and
// the Ready condition's status).
func (c *Cluster) Nodes() []corev1.Node {
	items := c.nodes.List()
	out := make([]corev1.Node, 0, len(items))
	for _, o := range items {
		if n, ok := o.(*corev1.Node); ok {
			out = append(out, *n)
		}
	}
	return out
}

// Pods returns the child's non-terminal Pods as last seen, rebuilt from what the cache keeps (name,
// namespace, node, phase, one container holding the pod's effective requests, and the PodScheduled
// condition while the scheduler reports the pod Unschedulable; see pod). Their request maps are
// shared with the cache: read them, never change them.
func (c *Cluster) Pods() []corev1.Pod {
	items := c.pods.List()
	out := make([]corev1.Pod, 0, len(items))
	for _, o := range items {
		if p, ok := o.(*pod); ok {
			out = append(out, p.asPod())
		}
	}
	return out
}

// PodsIn returns the non-terminal Pods of one namespace of the child as last seen, rebuilt as Pods
// does, with the PodScheduled condition of those the scheduler reports Unschedulable.
func (c *Cluster) PodsIn(namespace string) []corev1.Pod {
	var out []corev1.Pod
	for _, o := range c.pods.List() {
		if p, ok := o.(*pod); ok && p.Namespace == namespace {
			out = append(out, p.asPod())
		}
	}
	return out
}

// Err returns an *UnreachableError while the child does not answer, else nil.
func (c *Cluster) Err() error {
	if u := c.health.Load(); u != nil {
		return u
	}
	return nil
}

// connectConfig holds what a connect needs from the Cache's options.
type connectConfig struct {
	opts     *Options
	onChange func(delta)
}

// restConfigFrom turns a kubeconfig read from a Secret into a client configuration through the
// sanitizer (common/kubeconfig): exec, auth plugins, file paths, impersonation, proxies and plain
// HTTP are refused, naming the field. Its errors never quote the kubeconfig.
func restConfigFrom(data []byte, policy kubeconfig.Policy) (*rest.Config, error) {
	return kubeconfig.RESTConfig(data, policy)
}

// must adapts a transform that cannot fail to the watcher's trim.
func must(trim func(any) (any, error)) func(any) any {
	return func(obj any) any {
		out, _ := trim(obj)
		return out
	}
}

// newCluster builds the clients and watchers for a kubeconfig but starts nothing.
func newCluster(key types.NamespacedName, data []byte, cc connectConfig) (*Cluster, error) {
	cfg, err := restConfigFrom(data, cc.opts.Kubeconfig)
	if err != nil {
		return nil, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid, Err: err}
	}
	cfg.QPS, cfg.Burst = cc.opts.QPS, cc.opts.Burst
	cfg.UserAgent = cc.opts.UserAgent
	// A dialer of our own per cluster: stopping the cluster closes its connections, and client-go's
	// transport cache keys the transport on this dialer, so a rotated kubeconfig never reuses it.
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	dialer := connrotation.NewDialer(writeTimeoutDial(d.DialContext, cc.opts.ProbeTimeout))
	cfg.Dial = dialer.DialContext

	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid, Err: errors.New("the kubeconfig's TLS settings cannot be used")}
	}
	// Only the core group is read: a full clientset would build a REST client for every API group
	// (about 40 KB per connection).
	cs, err := corev1client.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid, Err: fmt.Errorf("building a client: %w", err)}
	}
	// The REST mapper discovers a kind at its first use, with a context of its own and under a lock
	// that every request of a kind not yet mapped waits for: against a child that stopped answering
	// it would wait for ever, and so would those requests, whatever their contexts. Its requests get
	// a time limit of their own (the probe's). It reads the group versions it is asked for, not the
	// whole discovery document (mapper.go).
	discoveryHTTP := &http.Client{Transport: httpClient.Transport, Timeout: cc.opts.ProbeTimeout}
	fallback, err := apiutil.NewDynamicRESTMapper(cfg, discoveryHTTP)
	if err != nil {
		return nil, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid, Err: fmt.Errorf("building a client: %w", err)}
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, discoveryHTTP)
	if err != nil {
		return nil, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid, Err: fmt.Errorf("building a client: %w", err)}
	}
	mapper := newVersionMapper(disc, fallback)
	cl, err := client.New(cfg, client.Options{Scheme: cc.opts.Scheme, HTTPClient: httpClient, Mapper: mapper})
	if err != nil {
		return nil, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid, Err: fmt.Errorf("building a client: %w", err)}
	}
	c := &Cluster{key: key, client: cl, core: cs, dialer: dialer, httpClient: httpClient, onChange: cc.onChange,
		listFailed: make(chan struct{})}

	// A list or watch call that fails is recorded (watchError); the Reflector retries it with backoff.
	observe := func(err error) error {
		if err != nil {
			c.watchError(err)
		}
		return err
	}
	c.nodes = newWatcher("childcluster nodes "+key.String(), &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := cs.Nodes().List(ctx, o)
			return l, observe(err)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := cs.Nodes().Watch(ctx, o)
			return w, observe(err)
		},
	}, &corev1.Node{}, must(trimNode), func(a, b any) bool {
		o, ok1 := a.(*corev1.Node)
		n, ok2 := b.(*corev1.Node)
		return !ok1 || !ok2 || nodeChanged(o, n)
	}, c.contact, func(string) { c.changed(deltaNodes) })
	c.pods = newWatcher("childcluster pods "+key.String(), &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = podFieldSelector
			l, err := cs.Pods(metav1.NamespaceAll).List(ctx, o)
			return l, observe(err)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = podFieldSelector
			w, err := cs.Pods(metav1.NamespaceAll).Watch(ctx, o)
			return w, observe(err)
		},
	}, &corev1.Pod{}, must(trimPod), func(a, b any) bool {
		o, ok1 := a.(*pod)
		n, ok2 := b.(*pod)
		return !ok1 || !ok2 || podChanged(o, n)
	}, c.contact, func(key string) {
		// A relisting that changed the Pods names none of them.
		if ns, _, found := strings.Cut(key, "/"); found {
			c.changed(podsIn(ns))
			return
		}
		c.changed(deltaAll)
	})
	if cc.opts.WatchWorkloadEvents {
		ev, err := eventsv1client.NewForConfigAndClient(cfg, httpClient)
		if err != nil {
			return nil, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid, Err: fmt.Errorf("building a client: %w", err)}
		}
		for _, reason := range WorkloadEventReasons {
			c.events = append(c.events, newEventWatcher("childcluster events "+reason+" "+key.String(), ev, reason, c.contact, func(key string) {
				// Not a change of the Nodes and Pods (Memo's values stay), but of what a reading
				// of the namespace's refusals shows.
				c.contact()
				if ns, _, found := strings.Cut(key, "/"); found {
					c.notifyChange(podsIn(ns))
					return
				}
				c.notifyChange(deltaAll)
			}))
		}
	}
	if cc.opts.OwnedSelector != "" {
		nw, err := networkingv1client.NewForConfigAndClient(cfg, httpClient)
		if err != nil {
			return nil, &UnreachableError{Cluster: key, Reason: ReasonKubeconfigInvalid, Err: fmt.Errorf("building a client: %w", err)}
		}
		// Not a change of the Nodes and Pods (Memo's values stay).
		c.owned = newOwnedWatchers(key.String(), cs, nw, cc.opts.OwnedSelector, c.contact, func(d delta) {
			c.contact()
			c.notifyChange(d)
		})
	}
	return c, nil
}

// LastContact returns when the child last answered: the end of the initial listing, a watch event
// or a successful probe (every HealthInterval).
func (c *Cluster) LastContact() time.Time { return time.Unix(0, c.lastContact.Load()) }

func (c *Cluster) contact() { c.lastContact.Store(time.Now().UnixNano()) }

// changed notifies a change seen on the child's watches, which is also a contact.
func (c *Cluster) changed(d delta) {
	c.changes.Add(1)
	c.contact()
	c.notifyChange(d)
}

type memoEntry struct {
	changes uint64
	value   any
}

// Memo returns the value compute derives from the child's Nodes and Pods, computing it only when they
// changed (in what is counted) since it was last computed under that name. A cluster shared by many
// ClusterDeployments (the same API server and identity) and a Colony re-collected for one child's
// change then cost one computation per change, not one per ClusterDeployment and pass. The value is
// shared: treat it as read-only.
func (c *Cluster) Memo(name string, compute func() any) any {
	gen := c.changes.Load() // before reading the Nodes and Pods: a change meanwhile recomputes next time
	c.memoMu.Lock()
	if m, ok := c.memo[name]; ok && m.changes == gen {
		c.memoMu.Unlock()
		return m.value
	}
	c.memoMu.Unlock()
	v := compute()
	c.memoMu.Lock()
	if c.memo == nil {
		c.memo = map[string]memoEntry{}
	}
	c.memo[name] = memoEntry{changes: gen, value: v}
	c.memoMu.Unlock()
	return v
}

// notify tells the cache's subscribers that anything may have changed on the child (its reachability
// did).
func (c *Cluster) notify() { c.notifyChange(deltaReach) }

// notifyChange tells the cache's subscribers what changed on the child.
func (c *Cluster) notifyChange(d delta) {
	if c.onChange != nil {
		c.onChange(d)
	}
}

// probeConfig tunes the reachability probe.
type probeConfig struct {
	interval, timeout time.Duration
	threshold         int
}

// reach makes the child's first request within timeout: one Node, as the probe reads it, which opens
// the connection the watches then share and checks the credentials. A refusal of the credentials is
// ReasonUnauthorized at once; no answer, or any other failure, ReasonConnectFailed. On failure the
// cluster is stopped.
func (c *Cluster) reach(parent context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	_, err := c.core.Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err == nil {
		c.contact()
		return nil
	}
	c.stop()
	switch {
	case parent.Err() != nil:
		return &UnreachableError{Cluster: c.key, Reason: ReasonConnectFailed, Err: parent.Err()}
	case isAuthError(err):
		return &UnreachableError{Cluster: c.key, Reason: ReasonUnauthorized, Err: err}
	case ctx.Err() != nil:
		return &UnreachableError{Cluster: c.key, Reason: ReasonConnectFailed, Err: fmt.Errorf("no answer within %s: %w", timeout, err)}
	default:
		return &UnreachableError{Cluster: c.key, Reason: ReasonConnectFailed, Err: fmt.Errorf("reaching the API server: %w", err)}
	}
}

// start runs the watches and waits until both have listed the child, or fails after timeout.
func (c *Cluster) start(parent context.Context, timeout time.Duration, probe probeConfig) error {
	ctx, cancel := context.WithCancel(parent)
	c.cancel = cancel
	for _, w := range append(append([]*watcher{c.nodes, c.pods}, c.events...), c.owned.all()...) {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			w.run(ctx)
		}()
	}
	syncCtx, syncCancel := context.WithTimeout(ctx, timeout)
	defer syncCancel()
	go func() {
		// A child that refuses the credentials, refuses the connection or does not answer within the
		// dial and TLS handshake timeouts (10s each) does not get better by waiting: stop at the first
		// failed list, free the connect slot, and let the backoff retry.
		select {
		case <-c.listFailed:
			syncCancel()
		case <-syncCtx.Done():
		}
	}()
	if !toolscache.WaitForCacheSync(syncCtx.Done(), c.nodes.HasSynced, c.pods.HasSynced) {
		if u := c.health.Load(); u != nil && u.Reason == ReasonUnauthorized && parent.Err() == nil {
			c.stop()
			return &UnreachableError{Cluster: c.key, Reason: ReasonUnauthorized, Err: u.Err}
		}
		if u := c.health.Load(); u != nil && u.Err != nil && parent.Err() == nil {
			c.stop()
			return &UnreachableError{Cluster: c.key, Reason: ReasonConnectFailed, Err: fmt.Errorf("listing nodes and pods: %w", u.Err)}
		}
		err := fmt.Errorf("nodes and pods not listed within %s", timeout)
		if u := c.health.Load(); u != nil && u.Err != nil {
			err = fmt.Errorf("%w: %w", err, u.Err)
		}
		if parent.Err() != nil {
			err = parent.Err()
		}
		c.stop()
		return &UnreachableError{Cluster: c.key, Reason: ReasonConnectFailed, Err: err}
	}
	c.health.Store(nil)
	c.contact()
	c.readIdentity(ctx, probe.timeout)
	c.startProbe(ctx, probe)
	return nil
}

// Identity returns the child cluster's identity: the UID of its kube-system namespace, which every
// Kubernetes API server creates once and keeps for the life of the cluster. Two ClusterDeployments
// whose connections show the same identity reach one cluster, whatever their kubeconfigs say (another
// address, another user). Empty when it could not be read at connect (a credential that may not read
// namespaces): the cluster is then known only by its ClusterDeployment.
func (c *Cluster) Identity() types.UID { return c.identity }

// readIdentity reads the identity once, within timeout; a failure leaves it empty and the connection
// stands.
func (c *Cluster) readIdentity(ctx context.Context, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns, err := c.core.Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return
	}
	c.identity = ns.UID
}

// stop ends the watches and the probe, closes every connection and waits for their goroutines. The
// connections are closed before the wait: a request to a child that stopped reading can sit in a
// socket write that no context cancels (the HTTP/2 stream reset after a cancel is such a write), and
// only closing its connection frees it. Connections dialled meanwhile are closed after the wait.
func (c *Cluster) stop() {
	c.once.Do(func() {
		if c.cancel != nil {
			c.cancel()
		}
		c.dialer.CloseAll()
		c.wg.Wait()
		c.dialer.CloseAll()
		utilnet.CloseIdleConnectionsFor(c.httpClient.Transport)
	})
}

// writeTimeoutDial wraps dial so that every write on its connections fails when the peer takes no
// byte of it within timeout. A child that stops reading (a frozen API server, a black-holed route
// once the socket buffers are full) would otherwise block a write for ever: HTTP/2 writes a stream
// reset under the connection's write lock when a request is cancelled, so one blocked write stalls
// every request, probe and watch on the connection, whatever their contexts say. A failed write
// breaks the connection; the next request dials again.
func writeTimeoutDial(dial connrotation.DialFunc, timeout time.Duration) connrotation.DialFunc {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if err != nil || timeout <= 0 {
			return conn, err
		}
		return &writeTimeoutConn{Conn: conn, timeout: timeout}, nil
	}
}

// writeTimeoutConn is a net.Conn whose every Write has a deadline timeout from its start.
type writeTimeoutConn struct {
	net.Conn
	timeout time.Duration
}

// Write implements net.Conn.
func (c *writeTimeoutConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// watchError records a list or watch failure; the Reflector retries on its own with backoff.
func (c *Cluster) watchError(err error) {
	if benignWatchError(err) {
		return
	}
	c.lastWatchErr.Store(time.Now().UnixNano())
	if isAuthError(err) {
		c.setUnhealthyReason(ReasonUnauthorized, err)
	} else {
		c.setUnhealthy(err)
	}
	c.failOnce.Do(func() { close(c.listFailed) })
}

// benignWatchError reports errors that are part of normal watching: expired resource versions and
// watches the server closed.
func benignWatchError(err error) bool {
	return err == nil || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.Canceled)
}

func (c *Cluster) setUnhealthy(err error) { c.setUnhealthyReason(ReasonUnhealthy, err) }

func (c *Cluster) setUnhealthyReason(reason string, err error) {
	u := &UnreachableError{Cluster: c.key, Reason: reason, Err: err}
	if prev := c.health.Swap(u); prev == nil || prev.Reason != reason {
		c.notify()
	}
}

// startProbe probes the child (probe) every interval until ctx ends. Between probes no goroutine
// waits: a timer starts each probe, which arms the timer for the next when it is done, so probes never
// overlap. The probe counts in c.wg until ctx ends, so stop waits for a probe under way.
func (c *Cluster) startProbe(ctx context.Context, p probeConfig) {
	var (
		mu       sync.Mutex
		timer    *time.Timer
		finished bool
		failures int // used by one probe at a time
	)
	// finish releases c.wg once; mu held.
	finish := func() {
		if !finished {
			finished = true
			c.wg.Done()
		}
	}
	c.wg.Add(1)
	mu.Lock()
	defer mu.Unlock()
	timer = time.AfterFunc(p.interval, func() {
		if ctx.Err() == nil {
			failures = c.probe(ctx, p, failures)
		}
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			finish()
			return
		}
		timer.Reset(p.interval)
	})
	context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if timer.Stop() {
			finish() // no probe under way; one under way finishes itself
		}
	})
}

// probe checks the child with a cheap, authorised request (one Node) and flips health both ways:
// threshold failures in a row make it unhealthy, one success makes it healthy again. A success does
// not clear a list/watch failure younger than the interval, so a child that answers probes but
// refuses the watches stays unhealthy. It returns the count of failures in a row.
func (c *Cluster) probe(ctx context.Context, p probeConfig, failures int) int {
	pctx, cancel := context.WithTimeout(ctx, p.timeout)
	// Limit 1 without a resourceVersion: the API server honours the limit and sends one Node.
	// (With resourceVersion "0" the watch cache ignores the limit and sends every Node: for 50 nodes
	// about 100 KB per probe, and with a probe per child in flight the collector's heap doubled.)
	_, err := c.core.Nodes().List(pctx, metav1.ListOptions{Limit: 1})
	cancel()
	if ctx.Err() != nil {
		return failures
	}
	if err != nil {
		if isAuthError(err) {
			c.lastWatchErr.Store(time.Now().UnixNano())
			c.setUnhealthyReason(ReasonUnauthorized, err)
			return failures
		}
		if failures++; failures >= p.threshold {
			c.setUnhealthy(err)
		}
		return failures
	}
	c.contact()
	if time.Since(time.Unix(0, c.lastWatchErr.Load())) < p.interval {
		return 0
	}
	if prev := c.health.Swap(nil); prev != nil {
		c.notify()
	}
	return 0
}
