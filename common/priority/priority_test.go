package priority

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

func quota(ns string, max *int32) workspacesv1.WorkspaceQuota {
	return workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns},
		Spec: workspacesv1.WorkspaceQuotaSpec{MaxPriority: max}}
}

func ptr(v int32) *int32 { return &v }

func TestCapsOfTakesTheLowest(t *testing.T) {
	caps := CapsOf([]workspacesv1.WorkspaceQuota{quota("a", ptr(5)), quota("a", ptr(3)), quota("a", nil), quota("b", nil)})
	if !reflect.DeepEqual(caps, Caps{"a": 3}) {
		t.Fatalf("caps %v, want a:3 only", caps)
	}
	if CapsOf(nil) == nil {
		t.Errorf("CapsOf(nil) is nil, which would read as unknown quotas")
	}
}

func TestEffective(t *testing.T) {
	ws := func(ns string, p int32) *workspacesv1.WorkspaceDeployment {
		return &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns},
			Spec: workspacesv1.WorkspaceDeploymentSpec{Priority: p}}
	}
	caps := Caps{"a": 3}
	for _, c := range []struct {
		caps Caps
		ws   *workspacesv1.WorkspaceDeployment
		want int32
	}{
		{caps, ws("a", 7), 3},   // capped
		{caps, ws("a", 2), 2},   // under the cap
		{caps, ws("b", 7), 0},   // no quota: capped at 0
		{caps, ws("b", -4), -4}, // negative priorities are kept
		{nil, ws("b", 7), 7},    // quotas unknown: as written
	} {
		if got := c.caps.Effective(c.ws); got != c.want {
			t.Errorf("caps %v, %s priority %d: effective %d, want %d", c.caps, c.ws.Namespace, c.ws.Spec.Priority, got, c.want)
		}
	}
}
