package crdtests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// colonySpec returns a Colony spec with one entry per clusterName, each with a minimal
// clusterDeploymentSpec.
func colonySpec(clusterNames ...string) string {
	entries := make([]string, 0, len(clusterNames))
	for _, n := range clusterNames {
		entries = append(entries, fmt.Sprintf(`{"clusterName":%q,"clusterDeploymentSpec":{"template":"t","config":{}}}`, n))
	}
	return `{"colonyClusters":[` + strings.Join(entries, ",") + `]}`
}

func TestColonyValidation(t *testing.T) {
	ns := createNamespace(t, "crd-colony")
	manyNames := make([]string, 257)
	for i := range manyNames {
		manyNames[i] = fmt.Sprintf("c%d", i)
	}
	cases := []validationCase{
		{name: "no clusters", spec: `{}`},
		{name: "one cluster", spec: colonySpec("gpu-a")},
		{name: "256 clusters (the maximum)", spec: colonySpec(manyNames[:256]...)},
		{name: "clusterName with digits and dashes", spec: colonySpec("0-gpu-1")},
		{
			name:    "colony-clusterName exactly 63 characters",
			objName: "col",
			spec:    colonySpec(repeat("a", 59)),
		},
		{
			name:    "colony-clusterName 64 characters",
			objName: "col",
			spec:    colonySpec(repeat("a", 60)),
			want:    []string{"spec.colonyClusters: Invalid value", "must be at most 63 characters"},
		},
		{
			name: "clusterName longer than 63 characters",
			spec: colonySpec(repeat("a", 64)),
			want: []string{"spec.colonyClusters[0].clusterName", "may not be more than 63"},
		},
		{
			name: "257 clusters",
			spec: colonySpec(manyNames...),
			want: []string{"spec.colonyClusters", "Too many"},
		},
		{
			name: "duplicate clusterName",
			spec: colonySpec("a", "b", "a"),
			want: []string{"spec.colonyClusters[2]", "Duplicate value"},
		},
		{
			name: "empty clusterName",
			spec: colonySpec(""),
			want: []string{"spec.colonyClusters[0].clusterName"},
		},
		{
			name: "clusterName with upper case",
			spec: colonySpec("GPU"),
			want: []string{"spec.colonyClusters[0].clusterName", "should match"},
		},
		{
			name: "clusterName starting with a dash",
			spec: colonySpec("-a"),
			want: []string{"spec.colonyClusters[0].clusterName", "should match"},
		},
		{
			name: "clusterName ending with a dash",
			spec: colonySpec("a-"),
			want: []string{"spec.colonyClusters[0].clusterName", "should match"},
		},
		{
			name: "clusterName with a dot",
			spec: colonySpec("a.b"),
			want: []string{"spec.colonyClusters[0].clusterName", "should match"},
		},
		{
			name: "clusterName with an underscore",
			spec: colonySpec("a_b"),
			want: []string{"spec.colonyClusters[0].clusterName", "should match"},
		},
		{
			name: "clusterName missing",
			spec: `{"colonyClusters":[{"clusterDeploymentSpec":{}}]}`,
			want: []string{"spec.colonyClusters[0].clusterName", "Required value"},
		},
		{
			// Accepted, as the upstream operator accepts it: such an entry makes no ClusterDeployment.
			name: "clusterDeploymentSpec missing",
			spec: `{"colonyClusters":[{"clusterName":"a"}]}`,
		},
		{
			name: "clusterDeploymentSpec a string",
			spec: `{"colonyClusters":[{"clusterName":"a","clusterDeploymentSpec":"template: t"}]}`,
			want: []string{"spec.colonyClusters[0].clusterDeploymentSpec", "must be of type object"},
		},
		{
			name: "clusterDeploymentSpec a list",
			spec: `{"colonyClusters":[{"clusterName":"a","clusterDeploymentSpec":[{"template":"t"}]}]}`,
			want: []string{"spec.colonyClusters[0].clusterDeploymentSpec", "must be of type object"},
		},
		{
			name: "clusterDeploymentSpec a number",
			spec: `{"colonyClusters":[{"clusterName":"a","clusterDeploymentSpec":1}]}`,
			want: []string{"spec.colonyClusters[0].clusterDeploymentSpec", "must be of type object"},
		},
		{
			name: "clusterLabels with a non-string value",
			spec: `{"colonyClusters":[{"clusterName":"a","clusterDeploymentSpec":{},"clusterLabels":{"tier":1}}]}`,
			want: []string{"spec.colonyClusters[0].clusterLabels.tier", "must be of type string"},
		},
		{
			name: "clusterAnnotations with a non-string value",
			spec: `{"colonyClusters":[{"clusterName":"a","clusterDeploymentSpec":{},"clusterAnnotations":{"note":true}}]}`,
			want: []string{"spec.colonyClusters[0].clusterAnnotations.note", "must be of type string"},
		},
	}
	runCases(t, infraAPI, "Colony", ns, cases)
	requireTypedList(t, &infrav1.ColonyList{})
}

// TestColonyKeepsUnknownKeys: keys of clusterDeploymentSpec the operator does not know (and Helm
// values of any shape) survive the round trip through the API server, read untyped and typed.
func TestColonyKeepsUnknownKeys(t *testing.T) {
	ns := createNamespace(t, "crd-colony-keep")
	cdSpec := `{"template":"aws-standalone-cp-1-0-0","credential":"aws","config":{"region":"eu-central-1",` +
		`"worker":{"instanceType":"p4d.24xlarge","labels":{"a.b/c":"d"}},"list":[1,"two",{"three":3.5}],"null":null},` +
		`"serviceSpec":{"services":[{"name":"gpu-operator","template":"gpu-operator-v24"}]},` +
		`"futureKCMField":{"nested":{"deep":[true,false]}},"anotherUnknown":"x"}`
	obj := newObject(t, infraAPI, "Colony", ns, "keep", fmt.Sprintf(
		`{"colonyClusters":[{"clusterName":"a","clusterDeploymentSpec":%s,"clusterLabels":{"l":"v"},"clusterAnnotations":{"x.io/y":"z"}}]}`, cdSpec))
	mustCreate(t, obj)

	got := get(t, infraAPI, "Colony", ns, "keep")
	clusters := nested(t, got, "spec", "colonyClusters").([]any)
	if len(clusters) != 1 {
		t.Fatalf("want 1 cluster, read back %d", len(clusters))
	}
	readBack := clusters[0].(map[string]any)["clusterDeploymentSpec"]
	if !sameJSON(t, readBack, mustJSON(t, cdSpec)) {
		t.Errorf("clusterDeploymentSpec changed on the round trip:\nsent %s\nread %s", cdSpec, normalise(t, readBack))
	}

	typed := &infrav1.Colony{}
	if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "keep"}, typed); err != nil {
		t.Fatalf("reading the Colony typed: %v", err)
	}
	var decoded any
	if err := json.Unmarshal(typed.Spec.ColonyClusters[0].ClusterDeploymentSpec.Raw, &decoded); err != nil {
		t.Fatalf("typed clusterDeploymentSpec is not JSON: %v", err)
	}
	if !sameJSON(t, decoded, mustJSON(t, cdSpec)) {
		t.Errorf("typed clusterDeploymentSpec lost data:\nsent %s\nread %s", cdSpec, typed.Spec.ColonyClusters[0].ClusterDeploymentSpec.Raw)
	}
	if typed.Spec.ColonyClusters[0].ClusterAnnotations["x.io/y"] != "z" || typed.Spec.ColonyClusters[0].ClusterLabels["l"] != "v" {
		t.Errorf("labels/annotations lost: %+v", typed.Spec.ColonyClusters[0])
	}
}

const condition = `{"type":"Ready","status":"True","reason":"AllClustersReady","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}`

func TestColonyStatusValidation(t *testing.T) {
	ns := createNamespace(t, "crd-colony-status")
	mustCreate(t, newObject(t, infraAPI, "Colony", ns, "st", colonySpec("a")))
	offering := `{"model":"A100","selector":{"exalsius.ai/gpu-model":"A100"},"vendor":"NVIDIA","resourceName":"nvidia.com/gpu","total":8,"allocated":2,"nodes":1}`
	cases := []struct {
		name   string
		status string
		want   []string
	}{
		{
			name: "full valid status",
			status: `{"phase":"Ready","conditions":[` + condition + `],"observedGeneration":1,` +
				`"clusterDeploymentRefs":[{"name":"st-a","namespace":"` + ns + `"}],"totalClusters":1,"readyClusters":1,` +
				`"kubeconfigSecretName":"st-kubeconfig","gpuInventory":{"st-a":{"lastUpdated":"2026-01-01T00:00:00Z","reachable":true,"offerings":[` + offering + `]}}}`,
		},
		{name: "phase Provisioning", status: `{"phase":"Provisioning"}`},
		{name: "phase Degraded", status: `{"phase":"Degraded"}`},
		{name: "phase Deleting", status: `{"phase":"Deleting"}`},
		{name: "unknown phase", status: `{"phase":"Broken"}`, want: []string{"status.phase", "Unsupported value"}},
		{
			name:   "duplicate condition type",
			status: `{"conditions":[` + condition + `,` + condition + `]}`,
			want:   []string{"status.conditions[1]", "Duplicate value"},
		},
		{
			name:   "inventory entry without reachable",
			status: `{"gpuInventory":{"st-a":{"offerings":[]}}}`,
			want:   []string{"status.gpuInventory.st-a.reachable", "Required value"},
		},
		{
			name:   "offering without vendor",
			status: `{"gpuInventory":{"st-a":{"reachable":true,"offerings":[{"resourceName":"nvidia.com/gpu","total":1,"allocated":0,"nodes":1}]}}}`,
			want:   []string{"status.gpuInventory.st-a.offerings[0].vendor", "Required value"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkVerdict(t, updateStatus(t, infraAPI, "Colony", ns, "st", tc.status), tc.want)
		})
	}
}
