package stack

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Restart backoff of a crashed component: doubling from restartBase to restartMax, back to the base
// once a run lasted restartReset.
const (
	restartBase  = time.Second
	restartMax   = time.Minute
	restartReset = time.Minute
)

// supervision is the crash bookkeeping of one component.
type supervision struct {
	mu sync.Mutex
	// held is set while a test or a hand restart stops and starts the component itself.
	held bool
	// crashes counts exits the world did not ask for; lastCrash describes the latest.
	crashes   int
	lastCrash string
}

// Crashes returns how often the component exited on its own, and how the last exit went.
func (c *Component) Crashes() (int, string) {
	c.sup.mu.Lock()
	defer c.sup.mu.Unlock()
	return c.sup.crashes, c.sup.lastCrash
}

func (c *Component) hold(on bool) {
	c.sup.mu.Lock()
	defer c.sup.mu.Unlock()
	c.sup.held = on
}

// IsHeld reports whether a test or a hand restart currently owns the process (Kill, Restart).
func (c *Component) IsHeld() bool { return c.isHeld() }

func (c *Component) isHeld() bool {
	c.sup.mu.Lock()
	defer c.sup.mu.Unlock()
	return c.sup.held
}

// Kill stops the component at once (SIGKILL), as a crash would, and keeps the world from restarting
// it until Start.
func (c *Component) Kill() error {
	c.hold(true)
	return c.Process.Kill()
}

// Start starts a component stopped with Kill and waits for it to be ready.
func (c *Component) Start(ctx context.Context) error {
	defer c.hold(false)
	if err := c.Process.Start(); err != nil {
		return err
	}
	return c.WaitReady(ctx, 90*time.Second)
}

// PidFile is where the component's current process id is (components/<name>.pid in the run folder,
// written by world.Process): `kill $(cat <file>)` makes the world restart the component.
func (c *Component) PidFile() string {
	return c.Process.PidPath()
}

// supervise restarts a component that exits without being asked to, with backoff; each crash and
// restart is a log line and an Event in the system namespace (`kubectl -n exalsius-system get events`).
func (s *Stack) supervise(c *Component) {
	backoff := restartBase
	started := time.Now()
	for {
		exited := c.Process.Exited()
		select {
		case <-exited:
		case <-s.quit:
			return
		}
		if s.isStopping() {
			return
		}
		if c.isHeld() {
			// A test or a hand restart owns the process: wait until it has started it again.
			for c.isHeld() {
				select {
				case <-s.quit:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
			started = time.Now()
			continue
		}
		if time.Since(started) >= restartReset {
			backoff = restartBase
		}
		c.sup.mu.Lock()
		c.sup.crashes++
		c.sup.lastCrash = fmt.Sprintf("%s exited at %s: %v", c.Name, time.Now().Format(time.RFC3339), c.Process.ExitError())
		msg := c.sup.lastCrash
		c.sup.mu.Unlock()
		s.progress("%s; restarting in %s (log %s)", msg, backoff, c.Process.LogPath)
		s.event(c, "ComponentCrashed", fmt.Sprintf("%s; restarting in %s", msg, backoff))
		select {
		case <-s.quit:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, restartMax)
		if s.isStopping() {
			return
		}
		if c.isHeld() || c.Process.Running() {
			continue
		}
		started = time.Now()
		if err := c.Process.Start(); err != nil {
			s.progress("%s: restart failed: %v", c.Name, err)
			s.event(c, "ComponentRestartFailed", err.Error())
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		err := c.WaitReady(ctx, 90*time.Second)
		cancel()
		if err != nil {
			s.progress("%s restarted but not ready: %v", c.Name, err)
			continue
		}
		s.progress("%s restarted (pid %d)", c.Name, c.Process.Pid())
		s.event(c, "ComponentRestarted", fmt.Sprintf("%s restarted (pid %d)", c.Name, c.Process.Pid()))
	}
}

// event records a Warning or Normal Event about a component, on its ServiceAccount in the system
// namespace.
func (s *Stack) event(c *Component, reason, msg string) {
	typ := corev1.EventTypeWarning
	if reason == "ComponentRestarted" {
		typ = corev1.EventTypeNormal
	}
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: SystemNamespace, Name: c.Name + "." + rand.String(10)},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "ServiceAccount", Namespace: SystemNamespace, Name: c.ServiceAccount.Name},
		Reason:         reason,
		Message:        msg,
		Type:           typ,
		Source:         corev1.EventSource{Component: "local-world"},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s.Client != nil {
		if err := s.Client.Create(ctx, ev); err != nil {
			s.progress("recording the event %s for %s: %v", reason, c.Name, err)
		}
	}
}

func (s *Stack) isStopping() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}
