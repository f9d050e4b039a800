package docscheck

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestReasons(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "common/api/workspaces/v1/conditions.go"), "package v1\n\nconst (\n\tReasonRunning = \"Running\"\n\tReasonHidden = \"Hidden\"\n\tPlacementNamed = \"Named\"\n)\n")
	write(t, filepath.Join(root, "common/api/infra/v1/colony_types.go"), "package v1\n\nconst ColonyReasonNoClusters = \"NoClusters\"\n")
	write(t, filepath.Join(root, "common/gpu/gate.go"), "package gpu\n\nconst (\n\tReasonRunning = v1.ReasonRunning\n\tReasonBadRequest = \"BadRequest\"\n)\n")
	write(t, filepath.Join(root, "workspace-controller/internal/x/delete.go"), "package x\n\nconst EventReasonCleanupIncomplete = \"CleanupIncomplete\"\n")
	write(t, filepath.Join(root, "workspace-controller/internal/x/delete_test.go"), "package x\n\nconst ReasonTestOnly = \"TestOnly\"\n")
	write(t, filepath.Join(root, "docs/STATUS_AND_EVENTS.md"), "| `Ready` | `Running` | `BadRequest`, Hidden |\n\nreason `CleanupIncomplete`\n")
	write(t, filepath.Join(root, "docs/COLONY.md"), "| `NoClusters` | True |\n")

	n, errs := Reasons(root)
	if n != 5 {
		t.Errorf("checked %d reasons, want 5 (Running, Hidden, NoClusters, BadRequest, CleanupIncomplete)", n)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `reason "Hidden"`) || !strings.Contains(errs[0].Error(), "ReasonHidden") {
		t.Fatalf("want one error for the undocumented reason Hidden (named without backquotes), got %v", errs)
	}
}

// TestReasonsOfTheRepository: every reason of the code is in the repository's reason tables.
func TestReasonsOfTheRepository(t *testing.T) {
	n, errs := Reasons(filepath.Join("..", "..", ".."))
	for _, err := range errs {
		t.Error(err)
	}
	if n < 70 {
		t.Errorf("checked %d reasons; the code defines more than 70", n)
	}
}
