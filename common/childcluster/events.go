package childcluster

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/common/text"
)

// WorkloadEventReasons are the reasons of the child's Events the cache watches when
// Options.WatchWorkloadEvents is set: a workload controller (ReplicaSet, StatefulSet, Job, DaemonSet)
// that could not create a pod says FailedCreate on itself (a missing RuntimeClass, an admission
// webhook's denial, a quota), and SuccessfulCreate once it created one. A field selector takes one
// value per term and no set, so each reason is a watch of its own; together they are a small share of
// a child's Events, and the watches never see the rest.
var WorkloadEventReasons = []string{"FailedCreate", "SuccessfulCreate"}

// workloadEvent is what the cache keeps of one of those Events: its name and namespace, its reason,
// the kind and name of the object it is about, its note cut to MaxConditionMessageBytes, and its time
// (the series' last observation, else its event time, else its deprecated last timestamp, else its
// creation).
type workloadEvent struct {
	metav1.ObjectMeta // Name and Namespace only
	Reason            string
	Kind, Regarding   string
	Note              string
	Time              metav1.Time
}

// GetObjectKind implements runtime.Object.
func (e *workloadEvent) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (e *workloadEvent) DeepCopyObject() runtime.Object {
	out := *e
	out.ObjectMeta = metav1.ObjectMeta{Name: e.Name, Namespace: e.Namespace}
	return &out
}

// trimWorkloadEvent turns an Event into a workloadEvent.
func trimWorkloadEvent(obj any) (any, error) {
	e, ok := obj.(*eventsv1.Event)
	if !ok {
		return obj, nil // tombstones and the like pass through
	}
	out := &workloadEvent{Reason: e.Reason, Kind: e.Regarding.Kind, Regarding: e.Regarding.Name,
		Note: text.Truncate(strings.TrimSpace(e.Note), MaxConditionMessageBytes), Time: conditions.EventTime(e)}
	out.Name, out.Namespace = e.Name, e.Namespace
	return out, nil
}

// asEvent rebuilds an eventsv1.Event from a workloadEvent, its time as the event time.
func (e *workloadEvent) asEvent() eventsv1.Event {
	return eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: e.Name, Namespace: e.Namespace},
		Reason:     e.Reason,
		Regarding:  corev1.ObjectReference{Kind: e.Kind, Name: e.Regarding, Namespace: e.Namespace},
		Note:       e.Note,
		EventTime:  metav1.NewMicroTime(e.Time.Time),
	}
}

// workloadEventChanged reports whether two kept Events differ in what a reading of them shows: a
// repeated Event (its series observed again) is a change, a new resourceVersion alone is not.
func workloadEventChanged(a, b *workloadEvent) bool {
	return a.Reason != b.Reason || a.Kind != b.Kind || a.Regarding != b.Regarding || a.Note != b.Note || !a.Time.Equal(&b.Time)
}

// unlessForbidden returns a list's answer, except a refusal of the credentials: credentials that may
// not list a kind stay so for this connection (a rotated Secret is a new one), so the list waits for
// the connection's end instead of retrying and logging forever.
func unlessForbidden(ctx context.Context) func(runtime.Object, error) (runtime.Object, error) {
	return func(l runtime.Object, err error) (runtime.Object, error) {
		if apierrors.IsForbidden(err) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return l, err
	}
}

// newEventWatcher returns the watcher of the child's Events of one reason. Its failures are not the
// child's: credentials that may not read Events cluster-wide leave the refusals to be read on the
// child, and never make the child unreachable.
func newEventWatcher(name string, events eventsv1client.EventsV1Interface, reason string, onEvent func(), onChange func(key string)) *watcher {
	selector := fields.OneTermEqualSelector("reason", reason).String()
	return newWatcher(name, &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return unlessForbidden(ctx)(events.Events(metav1.NamespaceAll).List(ctx, o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return events.Events(metav1.NamespaceAll).Watch(ctx, o)
		},
	}, &eventsv1.Event{}, must(trimWorkloadEvent), func(a, b any) bool {
		o, ok1 := a.(*workloadEvent)
		n, ok2 := b.(*workloadEvent)
		return !ok1 || !ok2 || workloadEventChanged(o, n)
	}, onEvent, onChange)
}

// WorkloadEvents returns the child's FailedCreate and SuccessfulCreate Events of one namespace as
// last seen (reason, the object they are about, the note cut to MaxConditionMessageBytes, the time as
// event time), and whether the cache holds them: false when the cache does not watch them
// (Options.WatchWorkloadEvents) or has not listed them yet, for instance because the credentials may
// not; read them on the child then.
func (c *Cluster) WorkloadEvents(namespace string) ([]eventsv1.Event, bool) {
	if len(c.events) == 0 {
		return nil, false
	}
	var out []eventsv1.Event
	for _, w := range c.events {
		if !w.HasSynced() {
			return nil, false
		}
		for _, o := range w.List() {
			if e, ok := o.(*workloadEvent); ok && e.Namespace == namespace {
				out = append(out, e.asEvent())
			}
		}
	}
	return out, true
}
