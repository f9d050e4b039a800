// Package conditions reads and writes metav1.Condition lists the way Kubernetes API conventions ask:
// one entry per type, and a lastTransitionTime that moves only when the status changes, so that a
// reconcile that finds nothing new writes nothing new.
package conditions

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// now is the clock used for lastTransitionTime; tests replace it.
var now = func() metav1.Time { return metav1.NewTime(time.Now().Truncate(time.Second)) }

// Set writes c into conds, replacing the entry of the same type, and reports whether anything
// changed. The lastTransitionTime moves only when the status changes (or the condition is new): it
// is then c.LastTransitionTime, or the current time when that is zero. When the status stays the
// same, the stored lastTransitionTime is kept and only reason, message and observedGeneration are
// updated, so repeated calls with the same content report no change.
func Set(conds *[]metav1.Condition, c metav1.Condition) (changed bool) {
	if conds == nil {
		return false
	}
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = now()
	}
	for i := range *conds {
		existing := &(*conds)[i]
		if existing.Type != c.Type {
			continue
		}
		if existing.Status != c.Status {
			*existing = c
			return true
		}
		if existing.Reason != c.Reason {
			existing.Reason = c.Reason
			changed = true
		}
		if existing.Message != c.Message {
			existing.Message = c.Message
			changed = true
		}
		if existing.ObservedGeneration != c.ObservedGeneration {
			existing.ObservedGeneration = c.ObservedGeneration
			changed = true
		}
		return changed
	}
	*conds = append(*conds, c)
	return true
}

// Remove deletes the condition of the given type and reports whether it was there.
func Remove(conds *[]metav1.Condition, conditionType string) bool {
	if conds == nil {
		return false
	}
	for i := range *conds {
		if (*conds)[i].Type == conditionType {
			*conds = append((*conds)[:i], (*conds)[i+1:]...)
			return true
		}
	}
	return false
}

// Get returns the condition of the given type, or nil when there is none. The pointer refers into
// conds.
func Get(conds []metav1.Condition, conditionType string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == conditionType {
			return &conds[i]
		}
	}
	return nil
}

// IsTrue reports whether the condition of the given type exists and is True.
func IsTrue(conds []metav1.Condition, conditionType string) bool {
	return hasStatus(conds, conditionType, metav1.ConditionTrue)
}

// IsFalse reports whether the condition of the given type exists and is False.
func IsFalse(conds []metav1.Condition, conditionType string) bool {
	return hasStatus(conds, conditionType, metav1.ConditionFalse)
}

// IsUnknown reports whether the condition of the given type is Unknown or missing.
func IsUnknown(conds []metav1.Condition, conditionType string) bool {
	c := Get(conds, conditionType)
	return c == nil || c.Status == metav1.ConditionUnknown
}

func hasStatus(conds []metav1.Condition, conditionType string, status metav1.ConditionStatus) bool {
	c := Get(conds, conditionType)
	return c != nil && c.Status == status
}

// Clone returns a copy of conds that later Set calls on the original do not change. Take one before
// a reconcile to compare against with RecordTransitions afterwards.
func Clone(conds []metav1.Condition) []metav1.Condition {
	if conds == nil {
		return nil
	}
	out := make([]metav1.Condition, len(conds))
	copy(out, conds)
	return out
}
