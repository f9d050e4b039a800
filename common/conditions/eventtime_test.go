package conditions

import (
	"testing"

	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEventTime(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}}
	if !EventTime(e).Time.Equal(t0) {
		t.Errorf("creation only: %v", EventTime(e))
	}
	e.DeprecatedLastTimestamp = metav1.NewTime(t0.Add(time.Second))
	if !EventTime(e).Time.Equal(t0.Add(time.Second)) {
		t.Errorf("deprecated last timestamp: %v", EventTime(e))
	}
	e.EventTime = metav1.NewMicroTime(t0.Add(2 * time.Second))
	if !EventTime(e).Time.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("event time: %v", EventTime(e))
	}
	e.Series = &eventsv1.EventSeries{LastObservedTime: metav1.NewMicroTime(t0.Add(3 * time.Second))}
	if !EventTime(e).Time.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("series: %v", EventTime(e))
	}
}
