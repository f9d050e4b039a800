package world

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kwokProbeInterval is how often superviseKwok asks the child's API server whether it answers.
const kwokProbeInterval = 500 * time.Millisecond

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
	down := false
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
			down = true
			continue
		}
		for _, p := range procs {
			if !down && p.Running() {
				continue
			}
			if err := p.Restart(StopGrace); err != nil {
				continue // tried again on the next probe: it is not running
			}
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
