package conditions

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzTransitions drives meta.SetStatusCondition with arbitrary sequences and checks what
// RecordTransitions relies on: a second identical set is never a change and never a transition,
// lastTransitionTime moves only with the status, and a transition is reported exactly when the
// status or the reason of a type changed (or the type is new).
func FuzzTransitions(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 1, 1}, "Reason", "message")
	f.Add([]byte{3, 3, 3, 12, 7}, "", "")
	f.Fuzz(func(t *testing.T, ops []byte, reason, message string) {
		statuses := []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}
		types := []string{"Ready", "Progressing", "Stalled"}
		var conds []metav1.Condition
		for i, op := range ops {
			c := metav1.Condition{
				Type:               types[int(op)%len(types)],
				Status:             statuses[int(op/3)%len(statuses)],
				Reason:             reason + string(rune('a'+int(op/9)%2)),
				Message:            message,
				ObservedGeneration: int64(i % 2),
			}
			before := slices.Clone(conds)
			prev := meta.FindStatusCondition(before, c.Type)
			meta.SetStatusCondition(&conds, c)
			ts := Transitions(before, conds)
			want := prev == nil || prev.Status != c.Status || prev.Reason != c.Reason
			if want != (len(ts) == 1) || len(ts) > 1 {
				t.Fatalf("set %+v after %+v: transitions %+v", c, prev, ts)
			}
			if len(ts) == 1 && ts[0].After.Type != c.Type {
				t.Fatalf("transition of the wrong type: %+v", ts)
			}
			got := meta.FindStatusCondition(conds, c.Type)
			if prev != nil && prev.Status == c.Status && !got.LastTransitionTime.Equal(&prev.LastTransitionTime) {
				t.Fatalf("lastTransitionTime moved without a status change")
			}
			again := slices.Clone(conds)
			if meta.SetStatusCondition(&conds, c) || len(Transitions(again, conds)) != 0 {
				t.Fatalf("second identical set reported a change or a transition")
			}
			seen := map[string]bool{}
			for _, x := range conds {
				if seen[x.Type] {
					t.Fatalf("duplicate type %q", x.Type)
				}
				seen[x.Type] = true
			}
		}
	})
}
