package childns

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/common/text"
)

// MaxChildMessageBytes bounds the child's own message a refusal repeats: an admission webhook's
// denial or a scheduler's summary can be long, and the workspace's condition holds the rest too.
const MaxChildMessageBytes = 512

// workloadKinds are the controllers that create the release's pods and report a pod they could not
// create as a FailedCreate event on themselves.
var workloadKinds = map[string]bool{"ReplicaSet": true, "StatefulSet": true, "Job": true, "DaemonSet": true}

// Refusal is the child's answer to "why are the release's pods not running": a pod the child refused
// to create, or one it cannot schedule. The zero Refusal means the child reports nothing.
type Refusal struct {
	// Reason is the HelmReleaseReady reason that names it: GpuQuotaExceeded for the GPU quota,
	// PodsRefused for everything else.
	Reason string
	// Message names the pod or workload and repeats the child's own message (cut to
	// MaxChildMessageBytes).
	Message string
	// RecheckAfter is, when no refusal is reported, how long until a pod now Unschedulable for less
	// than the bound passes it (0: none). The reconciler looks again then.
	RecheckAfter time.Duration
}

// Found reports whether the child refused or cannot schedule a pod of the release.
func (r Refusal) Found() bool { return r.Reason != "" }

// PodRefusal reads, in namespace on the child, why the release's pods are not running, in this order:
//
//  1. the latest refusal of the GPU quota (QuotaRefusal), reason GpuQuotaExceeded;
//  2. the latest FailedCreate event of a workload controller (ReplicaSet, StatefulSet, Job,
//     DaemonSet) that no SuccessfulCreate of the same workload followed: a missing RuntimeClass, an
//     admission webhook's denial, Pod Security, another quota; reason PodsRefused;
//  3. the pod Unschedulable (PodScheduled False) for the longest time, once that is longer than
//     unschedulableAfter; reason PodsRefused.
//
// now is the pass's clock. A child that cannot be read reports nothing.
func (n Namespaces) PodRefusal(ctx context.Context, namespace string, now time.Time, unschedulableAfter time.Duration) Refusal {
	var events eventsv1.EventList
	if err := n.Child.List(ctx, &events, client.InNamespace(namespace), client.Limit(500)); err == nil {
		if r, ok := eventRefusal(events.Items); ok {
			return r
		}
	}
	var pods corev1.PodList
	if err := n.Child.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return Refusal{}
	}
	return podsRefusal(pods.Items, now, unschedulableAfter)
}

// Cached is what the child-cluster cache holds of a namespace for PodRefusalFrom: its non-terminal
// Pods (with their PodScheduled condition while Unschedulable) and, when EventsKnown, its workload
// controllers' FailedCreate and SuccessfulCreate Events.
type Cached struct {
	Pods        []corev1.Pod
	Events      []eventsv1.Event
	EventsKnown bool
}

// PodRefusalFrom is PodRefusal read from what the child-cluster cache holds: the Events are listed on
// the child only when the cache does not hold them (credentials that may not list Events cluster-wide).
func (n Namespaces) PodRefusalFrom(ctx context.Context, namespace string, cached Cached, now time.Time, unschedulableAfter time.Duration) Refusal {
	events := cached.Events
	if !cached.EventsKnown {
		var list eventsv1.EventList
		if err := n.Child.List(ctx, &list, client.InNamespace(namespace), client.Limit(500)); err == nil {
			events = list.Items
		}
	}
	if r, ok := eventRefusal(events); ok {
		return r
	}
	return podsRefusal(cached.Pods, now, unschedulableAfter)
}

// eventRefusal is the part of PodRefusal read from the namespace's events: the GPU quota's refusal,
// then a workload controller's FailedCreate that no SuccessfulCreate followed.
func eventRefusal(events []eventsv1.Event) (Refusal, bool) {
	if q := latestQuotaRefusal(events); q != nil {
		return Refusal{Reason: workspacesv1.ReasonGpuQuotaExceeded, Message: quotaMessage(q)}, true
	}
	if e := latestFailedCreate(events); e != nil {
		return Refusal{Reason: workspacesv1.ReasonPodsRefused, Message: fmt.Sprintf("the child refused pods of the release: %s %s: %s",
			e.Regarding.Kind, e.Regarding.Name, text.Truncate(strings.TrimSpace(e.Note), MaxChildMessageBytes))}, true
	}
	return Refusal{}, false
}

// podsRefusal names the pod Unschedulable the longest once past unschedulableAfter, or says when to
// look again.
func podsRefusal(pods []corev1.Pod, now time.Time, unschedulableAfter time.Duration) Refusal {
	pod, recheck := longestUnschedulable(pods, now, unschedulableAfter)
	if pod == nil {
		return Refusal{RecheckAfter: recheck}
	}
	// The time it became Unschedulable, not how long ago: the message stays the same pass after pass.
	c := unschedulable(pod)
	return Refusal{Reason: workspacesv1.ReasonPodsRefused, Message: fmt.Sprintf("the child cannot schedule pod %s of the release (Unschedulable since %s): %s",
		pod.Name, c.LastTransitionTime.UTC().Format(time.RFC3339), text.Truncate(strings.TrimSpace(c.Message), MaxChildMessageBytes))}
}

// latestFailedCreate is the latest FailedCreate event of a workload controller whose workload has not
// created a pod since (a SuccessfulCreate of the same workload, later or at the same time), or nil.
// The GPU quota's refusals are latestQuotaRefusal's.
func latestFailedCreate(events []eventsv1.Event) *eventsv1.Event {
	created := map[string]time.Time{}
	for i := range events {
		e := &events[i]
		if e.Reason == "SuccessfulCreate" && workloadKinds[e.Regarding.Kind] {
			k := e.Regarding.Kind + "/" + e.Regarding.Name
			if t := conditions.EventTime(e).Time; t.After(created[k]) {
				created[k] = t
			}
		}
	}
	var latest *eventsv1.Event
	for i := range events {
		e := &events[i]
		if e.Reason != "FailedCreate" || !workloadKinds[e.Regarding.Kind] {
			continue
		}
		t := conditions.EventTime(e).Time
		if c, ok := created[e.Regarding.Kind+"/"+e.Regarding.Name]; ok && !c.Before(t) {
			continue // the workload created a pod since: what refused it is gone
		}
		if latest == nil || conditions.EventTime(latest).Time.Before(t) {
			latest = e
		}
	}
	return latest
}

// longestUnschedulable returns the pod of pods that has been Unschedulable the longest, when that is
// longer than after; otherwise nil, and how long until the first Unschedulable pod passes the bound
// (0: none is Unschedulable).
func longestUnschedulable(pods []corev1.Pod, now time.Time, after time.Duration) (pod *corev1.Pod, recheck time.Duration) {
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	var oldest time.Time
	for i := range pods {
		p := &pods[i]
		c := unschedulable(p)
		if c == nil || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if pod == nil || c.LastTransitionTime.Time.Before(oldest) {
			pod, oldest = p, c.LastTransitionTime.Time
		}
	}
	if pod == nil {
		return nil, 0
	}
	if since := now.Sub(oldest); since <= after {
		return nil, after - since + time.Second
	}
	return pod, 0
}

// unschedulable is the pod's PodScheduled condition when the scheduler reports it Unschedulable, or nil.
func unschedulable(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c
		}
	}
	return nil
}
