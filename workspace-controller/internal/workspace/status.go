package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
)

// maxRecentEvents bounds failureContext.recentEvents.
const maxRecentEvents = 10

// setCondition writes one condition of the workspace for the current generation, its message cut to
// conditions.MaxMessageBytes as every status write cuts it (so the pass compares what is stored).
func (s *scope) setCondition(condType string, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(&s.ws.Status.Conditions, metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: s.ws.Generation,
	})
}

func (s *scope) setTrue(condType, reason, message string) {
	s.setCondition(condType, metav1.ConditionTrue, reason, message)
}

// The facts a step that stops the pass reports, each with condType False saying why. No step names a
// phase: deriveStatus (phase.go) decides the phase, Ready and the message from the fact.

// waitFor records that the pass waits for something outside the workspace: a class, a cluster, a
// template, a values source, the child, a namespace.
func (s *scope) waitFor(condType, reason, message string) {
	s.report(verdictPending, condType, reason, message)
}

// waitForGPUs records that the pass waits for GPUs: capacity on the cluster, a fitting cluster, or
// room in the namespace's quota.
func (s *scope) waitForGPUs(condType, reason, message string) {
	s.report(verdictWaiting, condType, reason, message)
}

// waitForChild records that the child cannot be reached (condType False, ClusterUnreachable). A
// workspace waiting in its cluster's GPU queue stays Waiting and keeps its place there: an API blip
// of the child must not let a workspace behind it take the GPUs it waits for when the child is back.
// Any other waits Pending.
func (s *scope) waitForChild(condType, message string) {
	if gate.Queued(&s.prev) {
		s.waitForGPUs(condType, workspacesv1.ReasonClusterUnreachable, message+"; the workspace keeps its place in the GPU queue")
		return
	}
	s.waitFor(condType, workspacesv1.ReasonClusterUnreachable, message)
}

// installingPrerequisites records that the pass waits for the cluster's prerequisites.
func (s *scope) installingPrerequisites(condType, reason, message string) {
	s.report(verdictPrerequisites, condType, reason, message)
}

// deploying records that the admitted release is being installed or rolled out.
func (s *scope) deploying(condType, reason, message string) {
	s.report(verdictDeploying, condType, reason, message)
}

func (s *scope) report(kind verdictKind, condType, reason, message string) {
	s.setCondition(condType, metav1.ConditionFalse, reason, message)
	s.obs.verdict = verdict{kind: kind, reason: reason, message: message}
}

// holding records, on an installed workspace, an input the pass cannot go on without and that is
// likely to come back (a class briefly missing, a valuesFrom source briefly gone): condType is False
// saying why, the release is left as it is, and the phase and Ready stay what they were.
func (s *scope) holding(condType, reason, message string) {
	s.setCondition(condType, metav1.ConditionFalse, reason, message)
	s.obs.verdict = verdict{}
}

// failed records that a human must act, with condType False saying why.
func (s *scope) failed(condType, reason, message string) {
	s.setCondition(condType, metav1.ConditionFalse, reason, message)
	s.obs.verdict = verdict{kind: verdictFailed, reason: reason, message: message}
}

// running records that the release is deployed, with HelmReleaseReady True saying how.
func (s *scope) running(reason, message string) {
	s.setTrue(workspacesv1.HelmReleaseReadyCondition, reason, message)
	s.obs.verdict = verdict{kind: verdictRunning}
}

// suspended records that reconciliation is paused; the phase stays what it was.
func (s *scope) suspended() {
	s.obs.suspended = true
	s.obs.note = "reconciliation is suspended (spec.suspend); the workspace is left as it is"
}

// apply writes the phase, Ready, Reconciling, Stalled, the message and the failure context derived
// from what the pass observed so far; every condition carries the workspace's generation.
func (s *scope) apply() {
	d := deriveStatus(&s.prev, s.obs)
	s.ws.Status.Phase = d.phase
	s.ws.Status.Message = d.message
	s.ws.Status.FailureContext = d.failure.DeepCopy()
	if d.ready == nil {
		return
	}
	s.setCondition(d.ready.Type, d.ready.Status, d.ready.Reason, d.ready.Message)
	conditions.SetKstatus(&s.ws.Status.Conditions, workspacesv1.ReadyCondition, s.ws.Generation, d.progress)
}

// finish derives the status at the end of a pass.
func (s *scope) finish() { s.apply() }

// snapshotFailure adds the ServiceSet's status and the recent events to a fresh failure context.
func (r *Reconciler) snapshotFailure(ctx context.Context, s *scope) {
	fc := s.ws.Status.FailureContext
	if fc == nil || fc.ServiceSetStatus != nil || len(fc.RecentEvents) > 0 {
		return
	}
	if s.svcSet != nil {
		if raw, err := json.Marshal(s.svcSet.Status); err == nil {
			fc.ServiceSetStatus = &apiextensionsv1.JSON{Raw: raw}
		}
	}
	fc.RecentEvents = r.recentEvents(ctx, s)
}

// recentEvents lists the last events about the workspace and its ServiceSet, oldest first. It reads
// the API server directly (events are not cached) and only when a workspace fails.
func (r *Reconciler) recentEvents(ctx context.Context, s *scope) []string {
	if r.APIReader == nil {
		return nil
	}
	type subject struct{ namespace, kind, name string }
	subjects := []subject{{s.ws.Namespace, "WorkspaceDeployment", s.ws.Name}}
	if s.svcSet != nil {
		subjects = append(subjects, subject{s.svcSet.Namespace, "ServiceSet", s.svcSet.Name})
	}
	var picked []eventsv1.Event
	seenNS := map[string]*eventsv1.EventList{}
	for _, sub := range subjects {
		list := seenNS[sub.namespace]
		if list == nil {
			list = &eventsv1.EventList{}
			if err := r.APIReader.List(ctx, list, client.InNamespace(sub.namespace), client.Limit(500)); err != nil {
				continue
			}
			seenNS[sub.namespace] = list
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == sub.kind && e.Regarding.Name == sub.name {
				picked = append(picked, e)
			}
		}
	}
	sort.SliceStable(picked, func(i, j int) bool {
		return conditions.EventTime(&picked[i]).Time.Before(conditions.EventTime(&picked[j]).Time)
	})
	if len(picked) > maxRecentEvents {
		picked = picked[len(picked)-maxRecentEvents:]
	}
	out := make([]string, 0, len(picked))
	for _, e := range picked {
		out = append(out, fmt.Sprintf("%s %s %s/%s: %s: %s", conditions.EventTime(&e).UTC().Format("2006-01-02T15:04:05Z"),
			e.Type, e.Regarding.Kind, e.Regarding.Name, e.Reason, strings.TrimSpace(e.Note)))
	}
	return out
}
