package world

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kwokProbeInterval is how often superviseKwok asks the child's API server whether it answers, and
// kwokOutageProbes how many probes in a row must go unanswered before it counts as an outage: on a
// loaded machine one read can take longer than the probe's second, and restarting kube-scheduler and
// kwok for that only sets them back (each restart lists every node and pod again).
const (
	kwokProbeInterval = 500 * time.Millisecond
	kwokOutageProbes  = 3
)

// superviseKwok keeps the child's pods scheduled and staged across outages of the child's API server
// (ChildCluster.Restart, or Pause and Resume of its Env, as the chaos suite does). kube-scheduler and
// kwok survive an outage but recover slowly from one: their watches reconnect only after a backoff of
// up to 30 s, and every kwok stage that failed meanwhile (a pod's readiness, a node's heartbeat) is
// retried with a backoff that doubles up to 32 minutes; pods then stay in the state they had, or wait
// minutes to be bound or become Ready. So once the server answers again after it did not, both are
// restarted, as a control plane and its kubelets come back after a restart: they list every node and
// pod and act on them at once. One that exited is started again.
func (c *ChildCluster) superviseKwok(ctx context.Context, procs ...*Process) {
	t := time.NewTicker(kwokProbeInterval)
	defer t.Stop()
	down, missed := false, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		up := c.answers(ctx)
		if ctx.Err() != nil {
			return
		}
		if !up {
			if missed++; missed >= kwokOutageProbes {
				down = true
			}
			continue
		}
		missed = 0
		for _, p := range procs {
			if !down && p.Running() {
				continue
			}
			if err := p.Restart(StopGrace); err != nil {
				continue // tried again on the next probe: it is not running
			}
			c.restarts.Add(1)
		}
		down = false
	}
}

// answers reports whether the child's API server serves a read within a second.
func (c *ChildCluster) answers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return c.Env.Client.Get(ctx, client.ObjectKey{Name: "default"}, &corev1.Namespace{}) == nil
}
