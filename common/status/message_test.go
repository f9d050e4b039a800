package status

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/common/text"
)

// TestApplyCutsLongConditionMessages: a status with a condition message of 100 KiB (three times what
// the CRD accepts) is applied, its message cut to conditions.MaxMessageBytes, instead of failing.
func TestApplyCutsLongConditionMessages(t *testing.T) {
	colony := newColony(t, "long-message")
	long := strings.Repeat("entry gpu-17: template not found; ", 100<<10/34)
	colony.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "EntriesFailing",
		Message: long, LastTransitionTime: metav1.Now(), ObservedGeneration: colony.Generation}}
	if err := Apply(ctxT(t), mgmt.Client, colony, "status-test"); err != nil {
		t.Fatalf("apply: %v", err)
	}
	got := &infrav1.Colony{}
	if err := mgmt.Client.Get(ctxT(t), client.ObjectKeyFromObject(colony), got); err != nil {
		t.Fatal(err)
	}
	msg := got.Status.Conditions[0].Message
	if len(msg) > conditions.MaxMessageBytes || !strings.HasSuffix(msg, text.Ellipsis) || !strings.HasPrefix(long, strings.TrimSuffix(msg, text.Ellipsis)) {
		t.Fatalf("stored message of %d bytes, want the start of the message cut to %d", len(msg), conditions.MaxMessageBytes)
	}
}
