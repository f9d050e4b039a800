package conditions

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

type recordedEvent struct {
	eventType, reason, action, note string
	related                         runtime.Object
}

// captureRecorder implements events.EventRecorder by keeping what it is given.
type captureRecorder struct{ events []recordedEvent }

func (r *captureRecorder) Eventf(_ runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	r.events = append(r.events, recordedEvent{eventtype, reason, action, fmt.Sprintf(note, args...), related})
}

func TestRecordTransitionsOnlyOnStatusOrReasonChange(t *testing.T) {
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}}
	rec := &captureRecorder{}

	var conds []metav1.Condition
	before := slices.Clone(conds)
	meta.SetStatusCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Provisioning", Message: "waiting for 2 clusters"})
	RecordTransitions(rec, obj, before, conds)
	if len(rec.events) != 1 || rec.events[0] != (recordedEvent{corev1.EventTypeWarning, "Provisioning", "Ready", "waiting for 2 clusters", nil}) {
		t.Fatalf("new False condition: %+v", rec.events)
	}

	// Message-only change: no event.
	before = slices.Clone(conds)
	meta.SetStatusCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Provisioning", Message: "waiting for 1 cluster"})
	if ts := RecordTransitions(rec, obj, before, conds); len(ts) != 0 || len(rec.events) != 1 {
		t.Fatalf("message-only change emitted an event: %+v", rec.events)
	}

	// Reason change with the same status: an event.
	before = slices.Clone(conds)
	meta.SetStatusCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "ClusterFailed", Message: "cluster a failed"})
	RecordTransitions(rec, obj, before, conds)
	if len(rec.events) != 2 || rec.events[1].reason != "ClusterFailed" || rec.events[1].eventType != corev1.EventTypeWarning {
		t.Fatalf("reason change: %+v", rec.events)
	}

	// Status change to True: a Normal event, with the related object.
	before = slices.Clone(conds)
	meta.SetStatusCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "all clusters ready"})
	related := &corev1.Secret{}
	ts := RecordTransitions(rec, obj, before, conds, WithRelated(related))
	if len(rec.events) != 3 || rec.events[2].eventType != corev1.EventTypeNormal || rec.events[2].related != related {
		t.Fatalf("True transition: %+v", rec.events)
	}
	if len(ts) != 1 || ts[0].Before == nil || ts[0].Before.Status != metav1.ConditionFalse {
		t.Fatalf("transition before snapshot: %+v", ts)
	}

	// Nothing changed: no event.
	before = slices.Clone(conds)
	meta.SetStatusCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "all clusters ready"})
	RecordTransitions(rec, obj, before, conds)
	if len(rec.events) != 3 {
		t.Fatalf("steady state emitted events: %+v", rec.events)
	}
}

func TestRecordTransitionsPolarityAndDefaults(t *testing.T) {
	obj := &corev1.ConfigMap{}
	rec := &captureRecorder{}
	after := []metav1.Condition{
		{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "BadInput"},
		{Type: "Degraded", Status: metav1.ConditionFalse},
		{Type: "Progressing", Status: metav1.ConditionUnknown, Reason: "Starting"},
	}
	RecordTransitions(rec, obj, nil, after, WithNegativePolarity("Stalled", "Degraded"))
	want := []recordedEvent{
		{corev1.EventTypeWarning, "BadInput", "Stalled", "Stalled is True", nil},
		{corev1.EventTypeNormal, "DegradedFalse", "Degraded", "Degraded is False", nil},
		{corev1.EventTypeNormal, "Starting", "Progressing", "Progressing is Unknown", nil},
	}
	if len(rec.events) != len(want) {
		t.Fatalf("got %+v", rec.events)
	}
	for i := range want {
		if rec.events[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, rec.events[i], want[i])
		}
	}
	// A nil recorder still reports the transitions and does not panic.
	if ts := RecordTransitions(nil, obj, nil, after); len(ts) != 3 {
		t.Errorf("nil recorder: %d transitions", len(ts))
	}
}

func TestRecordTransitionsCutsLongNotesAndKeepsPercentSigns(t *testing.T) {
	rec := &captureRecorder{}
	long := strings.Repeat("é", 800) // 1600 bytes
	RecordTransitions(rec, &corev1.ConfigMap{}, nil, []metav1.Condition{
		{Type: "A", Status: metav1.ConditionTrue, Reason: "R", Message: long},
		{Type: "B", Status: metav1.ConditionTrue, Reason: "R", Message: "100% done %s %d"},
	})
	if n := len(rec.events[0].note); n > maxNoteBytes || !utf8.ValidString(rec.events[0].note) || !strings.HasSuffix(rec.events[0].note, "...") {
		t.Errorf("long note: %d bytes, valid UTF-8 %v", n, utf8.ValidString(rec.events[0].note))
	}
	if rec.events[1].note != "100% done %s %d" {
		t.Errorf("message was treated as a format string: %q", rec.events[1].note)
	}
}

// TestRecordTransitionsWithoutEvents: the named types' transitions are neither recorded nor returned.
func TestRecordTransitionsWithoutEvents(t *testing.T) {
	obj := &corev1.ConfigMap{}
	rec := &captureRecorder{}
	after := []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Deploying", Message: "d"},
		{Type: "Reconciling", Status: metav1.ConditionTrue, Reason: "Deploying", Message: "d"},
		{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "Failed", Message: "f"},
	}
	ts := RecordTransitions(rec, obj, nil, after, WithoutEvents("Reconciling", "Stalled"))
	if len(ts) != 1 || ts[0].After.Type != "Ready" || len(rec.events) != 1 || rec.events[0].action != "Ready" {
		t.Fatalf("transitions %+v, events %+v", ts, rec.events)
	}
}
