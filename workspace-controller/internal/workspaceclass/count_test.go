package workspaceclass

import (
	"testing"
	"time"
)

// TestCountDelay: a status write that only changes inUseBy waits out the interval since the last
// write of the class; other classes, a first write and a negative interval do not wait.
func TestCountDelay(t *testing.T) {
	r := &Reconciler{CountInterval: 5 * time.Second}
	now := time.Unix(1000, 0)
	if d := r.countDelay("a", now); d != 0 {
		t.Fatalf("first write delayed by %s", d)
	}
	r.countWrote("a", now)
	if d := r.countDelay("a", now.Add(2*time.Second)); d != 3*time.Second {
		t.Errorf("delay %s, want 3s", d)
	}
	if d := r.countDelay("b", now.Add(time.Second)); d != 0 {
		t.Errorf("another class delayed by %s", d)
	}
	if d := r.countDelay("a", now.Add(5*time.Second)); d != 0 {
		t.Errorf("delayed by %s after the interval", d)
	}
	r.CountInterval = -1
	if d := r.countDelay("a", now); d != 0 {
		t.Errorf("negative interval delayed by %s", d)
	}
}
