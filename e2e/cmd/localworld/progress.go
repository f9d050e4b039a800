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
		part, done := workspacePart(&ws)
		return strings.Join(append(parts, part), " | "), done
	}
	return strings.Join(parts, " | "), false
}

// workspacePart is the workspace's share of a progress line: its phase and its whole message (a
// terminal wraps a long line; a message cut short hides the reason a newcomer needs), and whether it
// runs and its URL serves (the routes follow the release by a few seconds).
func workspacePart(ws *workspacesv1.WorkspaceDeployment) (string, bool) {
	part := fmt.Sprintf("workspace %s: %s %s", ws.Name, orDash(string(ws.Status.Phase)), ws.Status.Message)
	routed := len(ws.Status.Access) > 0 && ws.Status.Access[0].Ready
	running := ws.Status.Phase == workspacesv1.PhaseRunning
	if running && !routed {
		part += " | routes pending"
	}
	return strings.TrimSpace(part), running && routed
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortErr is an error as a progress line shows it: on one line, whole.
func shortErr(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
