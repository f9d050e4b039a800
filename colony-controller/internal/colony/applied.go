package colony

import (
	"sync"
	"time"
)

// appliedTTL bounds how long an apply is remembered; after it the object is applied again even if
// nothing changed, which costs one no-op request.
const appliedTTL = 10 * time.Minute

// appliedCache remembers which apply configurations were sent for which resourceVersion of an
// object, so that an unchanged object is not applied again on every reconcile (Cluster API keeps the
// same kind of cache for its server-side applies). Any change to the object, by anyone, gives it a
// new resourceVersion and so a fresh apply, which is what corrects drift.
type appliedCache struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[string]appliedEntry
}

type appliedEntry struct {
	resourceVersion string
	digest          string
	expires         time.Time
}

func newAppliedCache() *appliedCache {
	return &appliedCache{now: time.Now, entries: map[string]appliedEntry{}}
}

func appliedKey(namespace, name string) string { return namespace + "/" + name }

// has reports whether digest was applied to namespace/name and the object then had resourceVersion.
func (c *appliedCache) has(namespace, name, resourceVersion, digest string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[appliedKey(namespace, name)]
	if !ok || c.now().After(e.expires) {
		return false
	}
	return resourceVersion != "" && e.resourceVersion == resourceVersion && e.digest == digest
}

// add records that digest was applied and the object's resourceVersion after it.
func (c *appliedCache) add(namespace, name, resourceVersion, digest string) {
	if resourceVersion == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	// Drop expired entries now and then so the map does not grow with deleted objects.
	if len(c.entries) > 0 && len(c.entries)%256 == 0 {
		for k, e := range c.entries {
			if now.After(e.expires) {
				delete(c.entries, k)
			}
		}
	}
	c.entries[appliedKey(namespace, name)] = appliedEntry{resourceVersion: resourceVersion, digest: digest, expires: now.Add(appliedTTL)}
}

// forget drops what is known about namespace/name.
func (c *appliedCache) forget(namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, appliedKey(namespace, name))
}
