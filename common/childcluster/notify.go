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
// meanwhile.
type notifier struct {
	debounce time.Duration
	leading  bool

	mu     sync.Mutex
	timers map[types.NamespacedName]*time.Timer
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
		last:     map[types.NamespacedName]time.Time{},
		sweepAt:  1024,
		subs:     map[*subscriber]struct{}{},
	}
}

// trigger records a change of the cluster. It never blocks.
func (n *notifier) trigger(key types.NamespacedName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || len(n.subs) == 0 {
		return
	}
	if _, pending := n.timers[key]; pending {
		return
	}
	wait := n.debounce
	if n.leading {
		last, ok := n.last[key]
		since := time.Since(last)
		if !ok || since >= n.debounce {
			n.tellLocked(key)
			return
		}
		wait = n.debounce - since
	}
	n.timers[key] = time.AfterFunc(wait, func() { n.fire(key) })
}

func (n *notifier) fire(key types.NamespacedName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.timers, key)
	if !n.closed {
		n.tellLocked(key)
	}
}

// tellLocked hands the cluster to every subscriber.
func (n *notifier) tellLocked(key types.NamespacedName) {
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
		s.add(key)
	}
}

// subscribe adds a subscriber whose channel receives cluster keys until cancel is called.
func (n *notifier) subscribe() (<-chan types.NamespacedName, func()) {
	s := &subscriber{
		pending: map[types.NamespacedName]struct{}{},
		wake:    make(chan struct{}, 1),
		out:     make(chan types.NamespacedName),
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
	}
	for s := range n.subs {
		close(s.done)
		delete(n.subs, s)
	}
}

// subscriber delivers pending keys, in arrival order, to its channel.
type subscriber struct {
	mu      sync.Mutex
	order   []types.NamespacedName
	pending map[types.NamespacedName]struct{}
	wake    chan struct{}
	out     chan types.NamespacedName
	done    chan struct{}
}

func (s *subscriber) add(key types.NamespacedName) {
	s.mu.Lock()
	if _, ok := s.pending[key]; !ok {
		s.pending[key] = struct{}{}
		s.order = append(s.order, key)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) next() (types.NamespacedName, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.order) == 0 {
		return types.NamespacedName{}, false
	}
	key := s.order[0]
	s.order = s.order[1:]
	delete(s.pending, key)
	return key, true
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
			key, ok := s.next()
			if !ok {
				break
			}
			select {
			case s.out <- key:
			case <-s.done:
				return
			}
		}
	}
}
