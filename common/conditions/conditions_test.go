package conditions

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func fixedClock(t *testing.T, ts time.Time) {
	t.Helper()
	old := now
	now = func() metav1.Time { return metav1.NewTime(ts) }
	t.Cleanup(func() { now = old })
}

func TestSetAddsNewConditionWithTimestamp(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fixedClock(t, t0)
	var conds []metav1.Condition
	if !Set(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Waiting"}) {
		t.Fatal("adding a condition must report a change")
	}
	if len(conds) != 1 || !conds[0].LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("unexpected conditions %+v", conds)
	}
}

func TestSetKeepsTransitionTimeWhenStatusUnchanged(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fixedClock(t, t0)
	var conds []metav1.Condition
	Set(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Waiting", Message: "a"})

	fixedClock(t, t0.Add(time.Hour))
	// Same content: no change at all.
	if Set(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Waiting", Message: "a"}) {
		t.Error("identical condition reported as a change")
	}
	// New reason and message, same status: a change, but the transition time stays.
	if !Set(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Gated", Message: "b", ObservedGeneration: 2}) {
		t.Error("reason change not reported")
	}
	c := Get(conds, "Ready")
	if !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("lastTransitionTime moved without a status change: %v", c.LastTransitionTime)
	}
	if c.Reason != "Gated" || c.Message != "b" || c.ObservedGeneration != 2 {
		t.Errorf("fields not updated: %+v", c)
	}
	// observedGeneration alone is a change too.
	if !Set(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Gated", Message: "b", ObservedGeneration: 3}) {
		t.Error("observedGeneration change not reported")
	}
	// Status change: the transition time moves.
	if !Set(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}) {
		t.Error("status change not reported")
	}
	if c := Get(conds, "Ready"); !c.LastTransitionTime.Time.Equal(t0.Add(time.Hour)) || len(conds) != 1 {
		t.Errorf("status change: %+v", conds)
	}
}

func TestSetUsesGivenTransitionTime(t *testing.T) {
	given := metav1.NewTime(time.Date(2025, 5, 5, 0, 0, 0, 0, time.UTC))
	var conds []metav1.Condition
	Set(&conds, metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: given})
	if !Get(conds, "A").LastTransitionTime.Equal(&given) {
		t.Errorf("given lastTransitionTime not kept")
	}
	if Set(nil, metav1.Condition{Type: "A"}) {
		t.Error("Set on a nil list pointer must be a no-op")
	}
}

func TestGettersAndRemove(t *testing.T) {
	conds := []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue},
		{Type: "Stalled", Status: metav1.ConditionFalse},
		{Type: "Progressing", Status: metav1.ConditionUnknown},
	}
	if !IsTrue(conds, "Ready") || IsFalse(conds, "Ready") {
		t.Error("Ready should be True")
	}
	if !IsFalse(conds, "Stalled") || IsTrue(conds, "Stalled") {
		t.Error("Stalled should be False")
	}
	if !IsUnknown(conds, "Progressing") || !IsUnknown(conds, "Missing") || IsUnknown(conds, "Ready") {
		t.Error("IsUnknown wrong")
	}
	if IsTrue(conds, "Missing") || IsFalse(conds, "Missing") || Get(conds, "Missing") != nil {
		t.Error("missing condition reported present")
	}
	clone := Clone(conds)
	if !Remove(&conds, "Stalled") || Remove(&conds, "Stalled") || len(conds) != 2 || Get(conds, "Stalled") != nil {
		t.Errorf("Remove: %+v", conds)
	}
	if len(clone) != 3 || clone[1].Type != "Stalled" {
		t.Errorf("Clone shares storage with the original: %+v", clone)
	}
	if Clone(nil) != nil || Remove(nil, "x") {
		t.Error("nil handling")
	}
}
