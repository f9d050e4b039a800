package childcluster

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// notifier coalesces change signals per child cluster and fans them out to subscribers without ever
// blocking the watches that raise them. The first signal for a cluster starts a timer of
// the debounce interval; further signals in that window are folded into it; when it fires, every
// subscriber gets the cluster once. With leading set, a signal after a quiet window (no notification
// of the cluster for the debounce interval) is told at once, and the signals that follow it are
// folded into one notification at the end of its window: either way a cluster is told at most once
// per window. A slow subscriber gets each pending cluster once, however many signals arrived
// meanwhile. What each signal says changed (a delta) is folded the same way: a notification tells
// everything that changed since the subscriber was last told about the cluster.
type notifier struct {
	debounce time.Duration
	leading  bool

	mu     sync.Mutex
	timers map[types.NamespacedName]*time.Timer
	// folded holds what changed while a cluster's timer runs.
	folded map[types.NamespacedName]*delta
	// last is when each cluster was last told, with leading set; an entry older than the window is
	// the same as none, and is dropped when it is read.
	last    map[types.NamespacedName]time.Time
	sweepAt int // the size of last above which its old entries are dropped
	subs    map[*subscriber]struct{}
	closed  bool
}

func newNotifier(debounce time.Duration, leading bool) *notifier {
	return &notifier{
		debounce: debounce,
		leading:  leading,
		timers:   map[types.NamespacedName]*time.Timer{},
		folded:   map[types.NamespacedName]*delta{},
		last:     map[types.NamespacedName]time.Time{},
		sweepAt:  1024,
		subs:     map[*subscriber]struct{}{},
	}
}

// trigger records a change of the cluster, d saying what changed. It never blocks.
func (n *notifier) trigger(key types.NamespacedName, d delta) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || len(n.subs) == 0 {
		return
	}
	if _, pending := n.timers[key]; pending {
		n.folded[key].merge(d)
		return
	}
	wait := n.debounce
	if n.leading {
		last, ok := n.last[key]
		since := time.Since(last)
		if !ok || since >= n.debounce {
			n.tellLocked(key, d)
			return
		}
		wait = n.debounce - since
	}
	f := &delta{}
	f.merge(d)
	n.folded[key] = f
	n.timers[key] = time.AfterFunc(wait, func() { n.fire(key) })
}

func (n *notifier) fire(key types.NamespacedName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.timers, key)
	d := n.folded[key]
	delete(n.folded, key)
	if !n.closed && d != nil {
		n.tellLocked(key, *d)
	}
}

// tellLocked hands the cluster's change to every subscriber.
func (n *notifier) tellLocked(key types.NamespacedName, d delta) {
	if n.leading {
		n.last[key] = time.Now()
		if len(n.last) > n.sweepAt {
			for k, t := range n.last {
				if time.Since(t) >= n.debounce {
					delete(n.last, k)
				}
			}
			n.sweepAt = max(1024, 2*len(n.last))
		}
	}
	for s := range n.subs {
		s.add(key, d)
	}
}

// subscribe adds a subscriber whose channel receives the clusters' changes until cancel is called.
func (n *notifier) subscribe() (<-chan Change, func()) {
	s := &subscriber{
		pending: map[types.NamespacedName]*delta{},
		wake:    make(chan struct{}, 1),
		out:     make(chan Change),
		done:    make(chan struct{}),
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		close(s.out)
		return s.out, func() {}
	}
	n.subs[s] = struct{}{}
	n.mu.Unlock()
	go s.run()
	return s.out, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		// Whoever removes the subscriber closes its done channel: cancel or close, once.
		if _, ok := n.subs[s]; ok {
			delete(n.subs, s)
			close(s.done)
		}
	}
}

// close stops every timer and subscriber.
func (n *notifier) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.closed = true
	for k, t := range n.timers {
		t.Stop()
		delete(n.timers, k)
		delete(n.folded, k)
	}
	for s := range n.subs {
		close(s.done)
		delete(n.subs, s)
	}
}

// subscriber delivers pending changes, a cluster at a time in the order they first arrived, to its
// channel; what changes again while a cluster waits is folded into its pending change.
type subscriber struct {
	mu      sync.Mutex
	order   []types.NamespacedName
	pending map[types.NamespacedName]*delta
	wake    chan struct{}
	out     chan Change
	done    chan struct{}
}

func (s *subscriber) add(key types.NamespacedName, d delta) {
	s.mu.Lock()
	if p, ok := s.pending[key]; ok {
		p.merge(d)
	} else {
		p = &delta{}
		p.merge(d)
		s.pending[key] = p
		s.order = append(s.order, key)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) next() (Change, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.order) == 0 {
		return Change{}, false
	}
	key := s.order[0]
	s.order = s.order[1:]
	d := s.pending[key]
	delete(s.pending, key)
	return d.change(key), true
}

func (s *subscriber) run() {
	defer close(s.out)
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		for {
			ch, ok := s.next()
			if !ok {
				break
			}
			select {
			case s.out <- ch:
			case <-s.done:
				return
			}
		}
	}
}
