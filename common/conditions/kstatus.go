package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kstatus condition types: what Flux's and Argo CD's health checks read besides Ready.
const (
	// Reconciling is True while an object progresses towards what its spec asks.
	Reconciling = "Reconciling"
	// Stalled is True while an object cannot progress until something outside changes.
	Stalled = "Stalled"
)

// Progress says which kstatus condition an object's state calls for.
type Progress int

const (
	// Current means neither Reconciling nor Stalled; both are removed.
	Current Progress = iota
	// InProgress means Reconciling True.
	InProgress
	// Failed means Stalled True.
	Failed
)

// SetKstatus sets Reconciling and Stalled from the object's progress, the one way every component
// does: the condition that applies is True and repeats the reason and message of the Ready condition
// (readyType), the other is removed; with no Ready condition both are removed. generation is the
// observedGeneration the conditions carry.
func SetKstatus(conds *[]metav1.Condition, readyType string, generation int64, p Progress) {
	ready := meta.FindStatusCondition(*conds, readyType)
	for _, k := range []struct {
		typ string
		on  bool
	}{{Reconciling, p == InProgress}, {Stalled, p == Failed}} {
		if k.on && ready != nil {
			Set(conds, metav1.Condition{Type: k.typ, Status: metav1.ConditionTrue, Reason: ready.Reason, Message: ready.Message,
				ObservedGeneration: generation})
		} else {
			meta.RemoveStatusCondition(conds, k.typ)
		}
	}
}
