package childcluster

import (
	"context"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// watcher keeps one kind of a child's objects (Nodes or Pods): a Reflector lists and watches them
// into a store of trimmed objects, which tells the Cluster about every answer and about the changes
// that matter. It takes the place of a SharedInformer, whose processor, queue and listener goroutines
// exist to fan events out to handlers; here there is one consumer, called inline. A watcher costs the
// Reflector's goroutines (its loop, its resync timer, the watch's decoder and the HTTP/2 stream), half
// of what an informer costs, and each object is trimmed as it arrives, so the decoded object is garbage
// at once.
type watcher struct {
	reflector *toolscache.Reflector
	store     *store
	stopped   atomic.Bool
}

// newWatcher returns a watcher of the objects lw lists (of type expected), kept as trim makes them.
// differ reports whether two trimmed objects differ in what is counted; onEvent is called on every
// event and listing (an answer from the child), onChange after a change that matters (not for the
// first listing) with the key (namespace/name, or name) of the object that changed, or "" after a
// relisting that changed any.
func newWatcher(name string, lw *toolscache.ListWatch, expected runtime.Object, trim func(any) any,
	differ func(a, b any) bool, onEvent func(), onChange func(key string)) *watcher {
	s := &store{trim: trim, differ: differ, onEvent: onEvent, onChange: onChange, items: map[string]any{}}
	return &watcher{
		store:     s,
		reflector: toolscache.NewReflectorWithOptions(listThenWatch{lw}, expected, s, toolscache.ReflectorOptions{Name: name}),
	}
}

// listThenWatch makes the Reflector list and then watch instead of streaming the initial list in a
// watch (client-go's WatchListClient). Every wait of the list-then-watch path ends with the context;
// the streaming path sleeps its backoff (up to 30s) after a failed attempt whatever the context says,
// so stopping the watches of an unreachable child, and with them a manager's shutdown, waited for it.
// For a child's Nodes and Pods, served from the API server's watch cache, the list is as cheap.
// It embeds the concrete ListWatch so that the Reflector still finds the context-aware List and Watch.
type listThenWatch struct{ *toolscache.ListWatch }

// IsWatchListSemanticsUnSupported tells the Reflector not to stream the initial list.
func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// run lists and watches until ctx ends; the Reflector retries failures with backoff.
func (w *watcher) run(ctx context.Context) {
	defer w.stopped.Store(true)
	w.reflector.RunWithContext(ctx)
}

// HasSynced reports whether the first listing arrived.
func (w *watcher) HasSynced() bool { return w.store.synced.Load() }

// IsStopped reports whether run returned.
func (w *watcher) IsStopped() bool { return w.stopped.Load() }

// List returns the trimmed objects.
func (w *watcher) List() []any { return w.store.List() }

// store is the Reflector's store: trimmed objects by namespace/name.
type store struct {
	trim     func(any) any
	differ   func(a, b any) bool
	onEvent  func()
	onChange func(key string)

	// quietAdds: an object that came is not a change, and a relisting tells each object it found
	// changed or gone (onChange with its key) rather than one change of all (the owned objects).
	quietAdds bool

	mu     sync.RWMutex
	items  map[string]any
	synced atomic.Bool
}

var _ toolscache.ReflectorStore = &store{}

// Add implements toolscache.ReflectorStore.
func (s *store) Add(obj any) error { return s.put(obj) }

// Update implements toolscache.ReflectorStore.
func (s *store) Update(obj any) error { return s.put(obj) }

func (s *store) put(obj any) error {
	t := s.trim(obj)
	key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(t)
	if err != nil {
		return err
	}
	s.mu.Lock()
	old, had := s.items[key]
	s.items[key] = t
	s.mu.Unlock()
	s.onEvent()
	if had && s.differ(old, t) || !had && !s.quietAdds {
		s.onChange(key)
	}
	return nil
}

// Delete implements toolscache.ReflectorStore.
func (s *store) Delete(obj any) error {
	key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	_, had := s.items[key]
	delete(s.items, key)
	s.mu.Unlock()
	s.onEvent()
	if had {
		s.onChange(key)
	}
	return nil
}

// Replace implements toolscache.ReflectorStore: a (re)listing. After the first one, it is a change
// when an object came, went or differs.
func (s *store) Replace(list []any, _ string) error {
	items := make(map[string]any, len(list))
	for _, obj := range list {
		t := s.trim(obj)
		key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(t)
		if err != nil {
			return err
		}
		items[key] = t
	}
	s.mu.Lock()
	old := s.items
	s.items = items
	s.mu.Unlock()
	s.onEvent()
	if !s.synced.Swap(true) {
		return nil
	}
	if s.quietAdds {
		for k, o := range old {
			if n, ok := items[k]; !ok || s.differ(o, n) {
				s.onChange(k)
			}
		}
		return nil
	}
	if s.replaced(old, items) {
		s.onChange("")
	}
	return nil
}

// replaced reports whether a listing differs from the objects kept before it.
func (s *store) replaced(old, items map[string]any) bool {
	if len(old) != len(items) {
		return true
	}
	for k, n := range items {
		if o, ok := old[k]; !ok || s.differ(o, n) {
			return true
		}
	}
	return false
}

// Resync implements toolscache.ReflectorStore; there is nothing to resync.
func (s *store) Resync() error { return nil }

// get returns the object kept under key (namespace/name, or name).
func (s *store) get(key string) (any, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.items[key]
	return o, ok
}

// List returns the kept objects.
func (s *store) List() []any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]any, 0, len(s.items))
	for _, o := range s.items {
		out = append(out, o)
	}
	return out
}
