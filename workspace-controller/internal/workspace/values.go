package workspace

import (
	"context"
	"strings"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/helmvalues"
)

// values builds the Helm values of the workspace (docs/RECONCILIATION.md, step 5).
func (r *Reconciler) values(_ context.Context, s *scope) (stepResult, error) {
	out, overwritten, err := helmvalues.Build(s.class, s.ws, s.resources)
	if err != nil {
		s.failed(workspacesv1.ResourcesInjectedCondition, workspacesv1.ReasonInvalidValues, err.Error())
		return stop, nil
	}
	s.values = out
	if len(overwritten) > 0 {
		s.setCondition(workspacesv1.ResourcesInjectedCondition, "False", workspacesv1.ReasonUserValuesOverwritten,
			"the operator overwrote these spec.values paths with the resolved resources: "+strings.Join(overwritten, ", "))
	} else {
		s.setTrue(workspacesv1.ResourcesInjectedCondition, workspacesv1.ReasonResourcesInjected,
			"resources are injected in _exalsius and the class's resourceInjection paths")
	}
	return next, nil
}
