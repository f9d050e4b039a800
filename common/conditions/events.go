// Package conditions turns condition changes into Events. Conditions themselves are set, found and
// removed with apimachinery's helpers (k8s.io/apimachinery/pkg/api/meta: SetStatusCondition,
// FindStatusCondition, RemoveStatusCondition, IsStatusConditionTrue), which keep one entry per type
// and move lastTransitionTime only when the status changes; this package adds what they do not
// offer: the transitions between two snapshots (take one with slices.Clone before a reconcile) and
// one events.k8s.io/v1 Event per transition.
package conditions

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/exalsius/exalsius-operator/common/text"
)

// maxNoteBytes is the longest note events.k8s.io/v1 accepts.
const maxNoteBytes = text.MaxEventNoteBytes

// Transition is a condition whose status or reason differs between two snapshots.
type Transition struct {
	// Before is the condition in the earlier snapshot, nil when it was absent.
	Before *metav1.Condition
	// After is the condition in the later snapshot.
	After metav1.Condition
}

// Transitions lists, in the order of after, every condition that is new in after or whose status or
// reason differs from before. Message-only and observedGeneration-only changes are not transitions.
func Transitions(before, after []metav1.Condition) []Transition {
	var out []Transition
	for _, c := range after {
		prev := meta.FindStatusCondition(before, c.Type)
		if prev != nil && prev.Status == c.Status && prev.Reason == c.Reason {
			continue
		}
		var b *metav1.Condition
		if prev != nil {
			cp := *prev
			b = &cp
		}
		out = append(out, Transition{Before: b, After: c})
	}
	return out
}

// EventOption tunes RecordTransitions.
type EventOption func(*eventConfig)

type eventConfig struct {
	negative map[string]bool
	silent   map[string]bool
	related  runtime.Object
}

// WithNegativePolarity names condition types for which True is bad news (Stalled, Degraded): their
// True transitions are Warning events and their False transitions Normal ones.
func WithNegativePolarity(conditionTypes ...string) EventOption {
	return func(c *eventConfig) {
		for _, t := range conditionTypes {
			c.negative[t] = true
		}
	}
}

// WithoutEvents names condition types whose transitions are not recorded, for example Reconciling
// and Stalled when they only repeat Ready's reason and message for GitOps tools.
func WithoutEvents(conditionTypes ...string) EventOption {
	return func(c *eventConfig) {
		for _, t := range conditionTypes {
			c.silent[t] = true
		}
	}
}

// WithRelated sets the secondary object of the events (for example the ServiceSet a workspace made).
func WithRelated(obj runtime.Object) EventOption {
	return func(c *eventConfig) { c.related = obj }
}

// RecordTransitions emits one events.k8s.io/v1 Event on obj for every transition between before and
// after (see Transitions), and nothing when no condition's status or reason changed, so a controller
// can call it at the end of every reconcile without flooding. The event type is Normal for True and
// Warning for False (reversed for WithNegativePolarity types; Unknown is Normal), the reason is the
// condition's reason, the action is the condition type and the note is the condition's message, cut
// to the 1 KiB the API accepts. Messages must never carry secret content. It returns the transitions
// it recorded; a nil recorder records nothing.
func RecordTransitions(recorder events.EventRecorder, obj runtime.Object, before, after []metav1.Condition, opts ...EventOption) []Transition {
	cfg := eventConfig{negative: map[string]bool{}, silent: map[string]bool{}}
	for _, o := range opts {
		o(&cfg)
	}
	var ts []Transition
	for _, t := range Transitions(before, after) {
		if !cfg.silent[t.After.Type] {
			ts = append(ts, t)
		}
	}
	if recorder == nil || obj == nil {
		return ts
	}
	for _, t := range ts {
		reason := t.After.Reason
		if reason == "" {
			reason = fmt.Sprintf("%s%s", t.After.Type, t.After.Status)
		}
		note := t.After.Message
		if note == "" {
			note = fmt.Sprintf("%s is %s", t.After.Type, t.After.Status)
		}
		recorder.Eventf(obj, cfg.related, eventType(t.After, cfg.negative[t.After.Type]), reason, t.After.Type, "%s", text.Truncate(note, maxNoteBytes))
	}
	return ts
}

func eventType(c metav1.Condition, negative bool) string {
	bad := c.Status == metav1.ConditionFalse
	if negative {
		bad = c.Status == metav1.ConditionTrue
	}
	if bad {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

// EventTime is when an event last happened: its series' last observation, its event time, or the
// older fields' last timestamp or creation.
func EventTime(e *eventsv1.Event) metav1.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return metav1.Time{Time: e.Series.LastObservedTime.Time}
	case !e.EventTime.IsZero():
		return metav1.Time{Time: e.EventTime.Time}
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp
	}
	return e.CreationTimestamp
}
