package main

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/e2e/internal/stack"
)

// The quick start's objects (examples/quickstart).
const (
	qsNamespace = "demo"
	qsColony    = "demo"
	qsCluster   = "demo-gpu"
	qsClass     = "jupyter-notebook-0-3-0"
	qsWorkspace = "my-notebook"
)

// quickstartState summarises the quick start in one line, and reports whether the workspace runs.
func quickstartState(ctx context.Context, st *stack.Stack) (string, bool) {
	var parts []string
	var colony infrav1.Colony
	if err := st.Client.Get(ctx, types.NamespacedName{Namespace: qsNamespace, Name: qsColony}, &colony); err == nil {
		parts = append(parts, fmt.Sprintf("colony %s: %s %d/%d", qsColony, orDash(string(colony.Status.Phase)), colony.Status.ReadyClusters, colony.Status.TotalClusters))
	} else {
		parts = append(parts, "colony: "+shortErr(err))
	}
	var cd k0rdentv1beta1.ClusterDeployment
	if err := st.Client.Get(ctx, types.NamespacedName{Namespace: qsNamespace, Name: qsCluster}, &cd); err == nil {
		state := "-"
		if c := meta.FindStatusCondition(cd.Status.Conditions, k0rdentv1beta1.CAPIClusterSummaryCondition); c != nil {
			state = "cluster " + string(c.Status)
		}
		parts = append(parts, fmt.Sprintf("clusterdeployment %s: %s", qsCluster, state))
	} else {
		parts = append(parts, "clusterdeployment: "+shortErr(err))
	}
	var class workspacesv1.WorkspaceClass
	if err := st.Client.Get(ctx, types.NamespacedName{Name: qsClass}, &class); err == nil {
		parts = append(parts, fmt.Sprintf("class valid=%t", class.Status.Valid))
	}
	var ws workspacesv1.WorkspaceDeployment
	if err := st.Client.Get(ctx, types.NamespacedName{Namespace: qsNamespace, Name: qsWorkspace}, &ws); err == nil {
		msg := ws.Status.Message
		if len(msg) > 80 {
			msg = msg[:80] + "..."
		}
		parts = append(parts, fmt.Sprintf("workspace %s: %s %s", qsWorkspace, orDash(string(ws.Status.Phase)), msg))
		// Done when its URL serves (the routes follow the release by a few seconds).
		routed := len(ws.Status.Access) > 0 && ws.Status.Access[0].Ready
		if ws.Status.Phase == workspacesv1.PhaseRunning && !routed {
			parts = append(parts, "routes pending")
		}
		return strings.Join(parts, " | "), ws.Status.Phase == workspacesv1.PhaseRunning && routed
	}
	return strings.Join(parts, " | "), false
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}
