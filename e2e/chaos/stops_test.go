package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
)

// stopPickBound bounds the wait of the stop-start fault for a Running workspace to stop.
const stopPickBound = 2 * time.Minute

// stoppedAndFree reports whether a workspace says its stop is complete: phase Stopped with Ready
// reason Stopped, which claims that no pod of its release holds a GPU (reason Stopping says the stop
// is under way and the GPUs still held).
func stoppedAndFree(ws *workspacesv1.WorkspaceDeployment) bool {
	if ws.Status.Phase != workspacesv1.PhaseStopped || !ws.Spec.Stopped {
		return false
	}
	c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReadyCondition)
	return c != nil && c.Reason == workspacesv1.ReasonStopped
}

// stopStart stops up to three Running workspaces of the round whose chart fixes its replicas (the
// published catalog's shape: the stop is made on the child, not by the chart; when none runs, those
// that wait), waits until they say
// Stopped, and samples their children every second for the hold: no pod of a workspace that says
// Stopped may hold a GPU. Then it starts them again; the round's convergence needs them Running, or
// Waiting while their GPUs are taken.
func (s *suite) stopStart(ctx context.Context, r int) error {
	fixed := className(planned{gpus: 1, fixed: true})
	var picked, others []string
	running, last := poll(ctx, stopPickBound, func(ctx context.Context) (bool, string) {
		list, err := s.roundWorkspaces(ctx, r)
		if err != nil {
			return false, err.Error()
		}
		picked, others = picked[:0], others[:0]
		for i := range list {
			ws := &list[i]
			switch {
			case ws.Spec.WorkspaceClassRef != fixed || !ws.DeletionTimestamp.IsZero():
			case ws.Status.Phase == workspacesv1.PhaseRunning:
				picked = append(picked, ws.Name)
			default:
				others = append(others, ws.Name)
			}
		}
		return len(picked) > 0, fmt.Sprintf("%d Running workspaces of class %s, %d in other phases", len(picked), fixed, len(others))
	})
	if !running {
		// None runs (their GPUs are taken): a stop while Waiting takes a workspace out of the queue,
		// and the start puts it back; that is stopped and started instead.
		s.progress("round %d: no workspace of class %s Running within %s (%s); stopping those that wait", r, fixed, stopPickBound, last)
		picked = others
	}
	if len(picked) == 0 {
		return fmt.Errorf("no workspace of class %s in the round to stop: %s", fixed, last)
	}
	sort.Strings(picked)
	picked = picked[:min(3, len(picked))]
	s.progress("round %d: stopping %s", r, strings.Join(picked, ", "))
	if err := s.setStopped(ctx, picked, true); err != nil {
		return err
	}
	ok, last := poll(ctx, s.set.converge, func(ctx context.Context) (bool, string) {
		var pending []string
		for _, name := range picked {
			ws, err := s.workspace(ctx, name)
			switch {
			case err != nil:
				return false, err.Error()
			case ws == nil || !ws.DeletionTimestamp.IsZero():
				continue // deleted during the fault
			case !stoppedAndFree(ws):
				pending = append(pending, fmt.Sprintf("%s %s %q", name, ws.Status.Phase, ws.Status.Message))
			}
		}
		return len(pending) == 0, strings.Join(pending, "; ")
	})
	if !ok {
		s.finding(r, "stopped workspaces not Stopped within %s: %s", s.set.converge, last)
	}
	s.sampleStopped(ctx, r, picked, stoppedAndFree, "Stopped")
	s.progress("round %d: starting %s", r, strings.Join(picked, ", "))
	return s.setStopped(ctx, picked, false)
}

// sampleStopped samples, every second for the hold, the children of the named workspaces while
// they say they are stopped (stopped; said: the word for the finding): no pod of theirs may hold a GPU.
func (s *suite) sampleStopped(ctx context.Context, r int, names []string, stopped func(*workspacesv1.WorkspaceDeployment) bool, said string) {
	reported := map[string]bool{}
	for until := time.Now().Add(s.set.hold); time.Now().Before(until) && ctx.Err() == nil; {
		for _, name := range names {
			if held := s.stoppedHolding(ctx, name, stopped); held != "" {
				s.mu.Lock()
				s.fig.StoppedHoldingGPUs++
				s.mu.Unlock()
				if !reported[name] {
					reported[name] = true
					s.finding(r, "workspace %s says %s while %s", name, said, held)
				}
			}
		}
		hold(ctx, time.Second)
	}
}

// stoppedHolding returns what holds a GPU in the release namespace of a workspace that says it is
// Stopped (stopped: stoppedAndFree, or reclaimStopped): a pod that requests one and has not ended,
// terminating ones included (they hold it until the kubelet has stopped them); "" when nothing does
// or the workspace does not say Stopped. The
// workspace is read again after its pods, so a start in between is not taken for a finding.
func (s *suite) stoppedHolding(ctx context.Context, name string, stopped func(*workspacesv1.WorkspaceDeployment) bool) string {
	ws, err := s.workspace(ctx, name)
	if err != nil || ws == nil || !stopped(ws) {
		return ""
	}
	child := s.st.World.Child(k0rdentsim.ChildName(s.ns, ws.Spec.ClusterDeploymentRef.Name))
	if child == nil {
		return ""
	}
	var pods corev1.PodList
	if err := child.Client().List(ctx, &pods, client.InNamespace("ws-"+name)); err != nil {
		return "" // the child may be down during another fault; nothing is known
	}
	var holding []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if gpu.IsTerminal(p) {
			continue
		}
		if n := gpu.PodRequest(p, gpu.ResourceNVIDIA); n > 0 {
			holding = append(holding, fmt.Sprintf("pod %s (%s, node %q) requests %d GPUs", p.Name, p.Status.Phase, p.Spec.NodeName, n))
		}
	}
	if len(holding) == 0 {
		return ""
	}
	again, err := s.workspace(ctx, name)
	if err != nil || again == nil || !stopped(again) {
		return ""
	}
	return strings.Join(holding, ", ")
}

// workspace reads a workspace of the suite; nil when it is gone.
func (s *suite) workspace(ctx context.Context, name string) (*workspacesv1.WorkspaceDeployment, error) {
	ws := &workspacesv1.WorkspaceDeployment{}
	err := s.c.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: name}, ws)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return ws, err
}

// setStopped sets spec.stopped of the workspaces (those gone meanwhile are skipped).
func (s *suite) setStopped(ctx context.Context, names []string, stopped bool) error {
	for _, name := range names {
		if err := retry(ctx, time.Minute, func(ctx context.Context) error {
			ws, err := s.workspace(ctx, name)
			if err != nil || ws == nil {
				return err
			}
			patch := client.MergeFrom(ws.DeepCopy())
			ws.Spec.Stopped = stopped
			return s.c.Patch(ctx, ws, patch)
		}); err != nil {
			return fmt.Errorf("setting spec.stopped of %s to %t: %w", name, stopped, err)
		}
	}
	return nil
}
