package conditions

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzSet checks Set's invariants on arbitrary sequences: one entry per type, a second identical Set
// is never a change, and lastTransitionTime moves only with the status.
func FuzzSet(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 1, 1}, "Reason", "message")
	f.Add([]byte{3, 3, 3}, "", "")
	f.Fuzz(func(t *testing.T, ops []byte, reason, message string) {
		statuses := []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}
		types := []string{"Ready", "Progressing", "Stalled"}
		var conds []metav1.Condition
		for i, op := range ops {
			c := metav1.Condition{
				Type:               types[int(op)%len(types)],
				Status:             statuses[int(op/3)%len(statuses)],
				Reason:             reason,
				Message:            message,
				ObservedGeneration: int64(i % 2),
			}
			prev := Get(conds, c.Type)
			var prevCopy *metav1.Condition
			if prev != nil {
				cp := *prev
				prevCopy = &cp
			}
			Set(&conds, c)
			if Set(&conds, c) {
				t.Fatalf("second identical Set reported a change")
			}
			got := Get(conds, c.Type)
			if prevCopy != nil && prevCopy.Status == c.Status && !got.LastTransitionTime.Equal(&prevCopy.LastTransitionTime) {
				t.Fatalf("lastTransitionTime moved without a status change")
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
