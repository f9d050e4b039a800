package crdtests

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// TestPrinterColumnValues asks the API server for the three kinds as kubectl does (a Table) and
// checks the cells that carry status facts: a workspace's Ready reason and admitted GPUs, a Colony's
// GPU totals and a class's in-use count. kubectl get shows what kubectl-exalsius prints.
func TestPrinterColumnValues(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, "crd-columns")

	colony := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns}}
	mustCreate(t, colony)
	colony.Status.GPUs = &infrav1.ColonyGPUs{Total: 16, Allocated: 4, Free: 12}
	mustUpdateStatus(t, colony)

	class := &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: "columns-jupyter"}}
	if err := json.Unmarshal([]byte(wsc("")), &class.Spec); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, class)
	t.Cleanup(func() { _ = mgmt.Client.Delete(ctx, class) })
	class.Status.InUseBy = 3
	mustUpdateStatus(t, class)

	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Name: "nb", Namespace: ns}}
	if err := json.Unmarshal([]byte(wsd("")), &ws.Spec); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, ws)
	ws.Status.Phase = workspacesv1.PhaseRunning
	ws.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "ReleaseDeployed",
		LastTransitionTime: metav1.Now()}}
	ws.Status.Admission = &workspacesv1.Admission{Cluster: ns + "/cd", Replicas: 2, GPUsPerReplica: 2, GPUs: 4}
	mustUpdateStatus(t, ws)

	for _, c := range []struct {
		path string
		want map[string]any
	}{
		{"/apis/infra.exalsius.ai/v1/namespaces/" + ns + "/colonies/fleet", map[string]any{"GPUs Free": 12.0, "GPUs Total": 16.0}},
		{"/apis/workspaces.exalsius.ai/v1/workspaceclasses/columns-jupyter", map[string]any{"In Use": 3.0}},
		{"/apis/workspaces.exalsius.ai/v1/namespaces/" + ns + "/workspacedeployments/nb", map[string]any{"Reason": "ReleaseDeployed", "GPUs": 4.0}},
	} {
		cells := tableRow(t, c.path)
		for col, want := range c.want {
			if got := cells[col]; got != want {
				t.Errorf("%s: column %q = %v (%T), want %v", c.path, col, got, got, want)
			}
		}
	}
}

func mustUpdateStatus(t *testing.T, obj client.Object) {
	t.Helper()
	if err := mgmt.Client.Status().Update(context.Background(), obj); err != nil {
		t.Fatalf("writing the status of %s: %v", obj.GetName(), err)
	}
}

// tableRow GETs path as a meta.k8s.io Table, as kubectl get does, and returns its one row's cells by
// column name.
func tableRow(t *testing.T, path string) map[string]any {
	t.Helper()
	hc, err := rest.HTTPClientFor(mgmt.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(mgmt.Config.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;g=meta.k8s.io;v=v1")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, body, err)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatalf("decoding the Table of %s: %v", path, err)
	}
	if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(table.ColumnDefinitions) {
		t.Fatalf("%s: want one row with a cell per column, got %s", path, body)
	}
	cells := make(map[string]any, len(table.ColumnDefinitions))
	for i, col := range table.ColumnDefinitions {
		cells[col.Name] = table.Rows[0].Cells[i]
	}
	return cells
}
