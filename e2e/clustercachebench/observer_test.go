package clustercachebench

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// observer receives what the handlers registered on a cache see: a cluster whose Nodes became
// listable, and the value of changeLabel on changedNode as a cluster's cache holds it. Both caches
// report to the same observer, so that their figures are taken the same way.
type observer struct {
	mu sync.Mutex

	// syncing holds the clusters whose Nodes are not listable yet; allSynced is closed, and
	// syncedAt set, when the last of them is. syncTimes holds when each one became listable.
	syncing   map[types.NamespacedName]struct{}
	syncTimes []time.Time
	syncedAt  time.Time
	allSynced chan struct{}

	// The change under way: the clusters that have not seen want yet, when the first and the last
	// did, and done, closed with the last.
	want        string
	waiting     map[types.NamespacedName]struct{}
	first, last time.Time
	done        chan struct{}
}

// newObserver waits for the Nodes of the clusters keys.
func newObserver(keys []types.NamespacedName) *observer {
	o := &observer{syncing: map[types.NamespacedName]struct{}{}, allSynced: make(chan struct{})}
	for _, k := range keys {
		o.syncing[k] = struct{}{}
	}
	return o
}

// synced records that the Nodes of key are listable from the cache.
func (o *observer) synced(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.syncing[key]; !ok {
		return
	}
	delete(o.syncing, key)
	now := time.Now()
	o.syncTimes = append(o.syncTimes, now)
	if len(o.syncing) == 0 {
		o.syncedAt = now
		close(o.allSynced)
	}
}

// unsynced returns how many clusters' Nodes are not listable yet.
func (o *observer) unsynced() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.syncing)
}

// syncDurations returns, for each cluster whose Nodes became listable, the time from start until they
// did.
func (o *observer) syncDurations(start time.Time) []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]time.Duration, len(o.syncTimes))
	for i, t := range o.syncTimes {
		out[i] = t.Sub(start)
	}
	return out
}

// expect starts a change: the returned channel is closed once every cluster of keys has seen value.
func (o *observer) expect(value string, keys []types.NamespacedName) <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.want, o.first, o.last = value, time.Time{}, time.Time{}
	o.waiting = make(map[types.NamespacedName]struct{}, len(keys))
	for _, k := range keys {
		o.waiting[k] = struct{}{}
	}
	o.done = make(chan struct{})
	return o.done
}

// seen records that the cache of key holds value in changeLabel.
func (o *observer) seen(key types.NamespacedName, value string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if value != o.want || o.waiting == nil {
		return
	}
	if _, ok := o.waiting[key]; !ok {
		return
	}
	delete(o.waiting, key)
	now := time.Now()
	if o.first.IsZero() {
		o.first = now
	}
	if len(o.waiting) == 0 {
		o.last = now
		close(o.done)
	}
}

// times returns when the first and the last cluster saw the change under way.
func (o *observer) times() (first, last time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.first, o.last
}

// connectFailures counts failed connects by cluster name (the benchmark's clusters share a namespace).
type connectFailures struct {
	mu     sync.Mutex
	counts map[string]int
}

func newConnectFailures() *connectFailures { return &connectFailures{counts: map[string]int{}} }

func (f *connectFailures) add(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[name]++
}

// of returns the failed connects of the clusters keys.
func (f *connectFailures) of(keys []types.NamespacedName) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, k := range keys {
		n += f.counts[k.Name]
	}
	return n
}
