package colony

import (
	"testing"
	"time"
)

func TestAppliedCache(t *testing.T) {
	c := newAppliedCache()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }

	if c.has("ns", "a", "1", "d1") {
		t.Fatal("empty cache reports a hit")
	}
	c.add("ns", "a", "1", "d1")
	if !c.has("ns", "a", "1", "d1") {
		t.Error("recorded apply not found")
	}
	if c.has("ns", "a", "2", "d1") {
		t.Error("hit although the object changed since (new resourceVersion)")
	}
	if c.has("ns", "a", "1", "d2") {
		t.Error("hit although the desired object changed (new digest)")
	}
	if c.has("ns", "a", "", "d1") {
		t.Error("hit without a resourceVersion")
	}
	now = now.Add(appliedTTL + time.Second)
	if c.has("ns", "a", "1", "d1") {
		t.Error("hit after the entry expired")
	}
	c.add("ns", "a", "3", "d1")
	c.forget("ns", "a")
	if c.has("ns", "a", "3", "d1") {
		t.Error("hit after forget")
	}
	c.add("ns", "b", "", "d1")
	if len(c.entries) != 0 {
		t.Error("an apply without resourceVersion was recorded")
	}
}
