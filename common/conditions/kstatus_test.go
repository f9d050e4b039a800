package conditions

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSetKstatus(t *testing.T) {
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Waiting", Message: "for GPUs"}
	conds := []metav1.Condition{ready}
	SetKstatus(&conds, "Ready", 3, InProgress)
	r := meta.FindStatusCondition(conds, Reconciling)
	if r == nil || r.Status != metav1.ConditionTrue || r.Reason != "Waiting" || r.Message != "for GPUs" || r.ObservedGeneration != 3 {
		t.Fatalf("Reconciling = %+v", r)
	}
	if meta.FindStatusCondition(conds, Stalled) != nil {
		t.Fatal("Stalled set while in progress")
	}
	SetKstatus(&conds, "Ready", 3, Failed)
	if meta.FindStatusCondition(conds, Reconciling) != nil || !meta.IsStatusConditionTrue(conds, Stalled) {
		t.Fatalf("failed: %+v", conds)
	}
	SetKstatus(&conds, "Ready", 3, Current)
	if len(conds) != 1 {
		t.Fatalf("current: %+v", conds)
	}
	conds = nil
	SetKstatus(&conds, "Ready", 3, InProgress)
	if len(conds) != 0 {
		t.Fatalf("without Ready: %+v", conds)
	}
}
