package conditions

import (
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/text"
)

func TestMessagesAreCut(t *testing.T) {
	long := strings.Repeat("é", 100<<10)
	check := func(what, msg string) {
		t.Helper()
		if len(msg) > MaxMessageBytes || !strings.HasSuffix(msg, text.Ellipsis) || !utf8.ValidString(msg) {
			t.Errorf("%s: message of %d bytes not cut to %d", what, len(msg), MaxMessageBytes)
		}
	}
	var conds []metav1.Condition
	Set(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "R", Message: long})
	check("Set", conds[0].Message)

	ws := &workspacesv1.WorkspaceDeployment{Status: workspacesv1.WorkspaceDeploymentStatus{Conditions: []metav1.Condition{{Message: long}, {Message: "short"}}}}
	CutObject(ws)
	check("WorkspaceDeployment", ws.Status.Conditions[0].Message)
	if ws.Status.Conditions[1].Message != "short" {
		t.Errorf("a short message changed: %q", ws.Status.Conditions[1].Message)
	}
	colony := &infrav1.Colony{Status: infrav1.ColonyStatus{Conditions: []metav1.Condition{{Message: long}}}}
	CutObject(colony)
	check("Colony", colony.Status.Conditions[0].Message)

	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"message": long}}}}}
	CutObject(u)
	check("unstructured", u.Object["status"].(map[string]any)["conditions"].([]any)[0].(map[string]any)["message"].(string))
	CutObject(&metav1.ObjectMeta{}) // no status: left alone
	CutObject(nil)
}
