package node

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestLockWithin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.lock")
	open := func() *os.File {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		return f
	}
	holder := open()
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}

	// Held by another: without a wait it fails at once, naming the lock.
	if err := lockWithin(open(), 0, nil); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("lockWithin with the lock held and no wait = %v, want an error naming %s", err, path)
	}

	// With a wait it says once that it waits, and gets the lock once the holder lets go.
	said := make(chan string, 1)
	done := make(chan error, 1)
	waiter := open()
	go func() { done <- lockWithin(waiter, 10*time.Minute, sayWriter(said)) }()
	select {
	case err := <-done:
		t.Fatalf("lockWithin returned %v while the lock was held", err)
	case msg := <-said:
		if !strings.Contains(msg, "waiting up to 10m0s") {
			t.Errorf("lockWithin said %q, want it to say it waits", msg)
		}
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("lockWithin after the holder let go: %v", err)
	}
	// It holds the lock now.
	if err := syscall.Flock(int(open().Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Error("the lock is free after lockWithin took it")
	}
}

// sayWriter sends each write to a channel.
type sayWriter chan<- string

func (w sayWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}
