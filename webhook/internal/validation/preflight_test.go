package validation

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestWorkspaceDeploymentPreflightNamesEveryField(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"name": strings.Repeat("a", 61)},
		"spec": map[string]any{"resources": map[string]any{"perReplica": map[string]any{
			"cpu": "-1", "memory": "lots", "storage": true,
		}}},
	}
	raw, _ := json.Marshal(obj)
	errs := WorkspaceDeploymentPreflight(raw)
	expectPaths(t, errs, "metadata.name", "spec.resources.perReplica.cpu", "spec.resources.perReplica.memory", "spec.resources.perReplica.storage")
	for _, e := range errs {
		if e.Field == "<nil>" || e.Field == "" {
			t.Errorf("error without a field: %v", e)
		}
	}

	ok, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": "fine"},
		"spec": map[string]any{"resources": map[string]any{"perReplica": map[string]any{"cpu": "500m", "memory": 1024}}}})
	expectPaths(t, WorkspaceDeploymentPreflight(ok))
	if errs := WorkspaceDeploymentPreflight([]byte("{not json")); len(errs) != 1 {
		t.Errorf("not JSON: %v, want one error", errs)
	}
}
