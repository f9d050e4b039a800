package crdtests

import (
	"context"
	"encoding/json"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// wsd returns a minimal valid WorkspaceDeployment spec with the top-level fields of extra set or
// replaced.
func wsd(extra string) string {
	return withFields(`{"workspaceClassRef":"jupyter-0-3-0","clusterDeploymentRef":{"name":"cd"}}`, extra)
}

// gpu returns a resources override asking for gpuCount GPUs per replica plus the given perReplica
// members.
func gpu(perReplica string) string {
	return `,"resources":{"perReplica":{` + perReplica + `}}`
}

func TestWorkspaceDeploymentValidation(t *testing.T) {
	ns := createNamespace(t, "crd-wsd")
	cases := []validationCase{
		// Valid workspaces.
		{name: "minimal", spec: wsd("")},
		{name: "every field", spec: wsd(`,"clusterDeploymentRef":{"name":"cd","namespace":"tenant-a"},` +
			`"resources":{"replicas":2,"perReplica":{"cpu":"500m","memory":"16Gi","storage":"100Gi","gpuCount":2,"gpuVendor":"AMD","gpuType":"MI300X","gpuNodeSelector":{"amd.com/gpu.product-name":"MI300X"}}},` +
			`"values":{"a":{"b":[1,2]}},"valuesFrom":[{"kind":"Secret","name":"pw","optional":true},{"kind":"ConfigMap","name":"tuning"}],"suspend":true`)},
		{name: "name of 60 characters", objName: repeat("w", 60), spec: wsd("")},
		{name: "gpuType with gpuCount 1", spec: wsd(gpu(`"gpuCount":1,"gpuType":"A100"`))},
		{name: "gpuNodeSelector with gpuCount 1", spec: wsd(gpu(`"gpuCount":1,"gpuNodeSelector":{"a":"b"}`))},
		{name: "gpuCount 0 without a type", spec: wsd(gpu(`"gpuCount":0`))},
		{name: "bounds at their maximum", spec: wsd(`,"workspaceClassRef":"` + repeat("c", 253) + `","clusterDeploymentRef":{"name":"` + repeat("c", 63) + `","namespace":"` + repeat("n", 63) + `"},` +
			`"resources":{"replicas":64,"perReplica":{"gpuCount":64,"gpuType":"` + repeat("g", 63) + `","gpuNodeSelector":` + jsonMap(16) + `}}`)},

		// Name.
		{name: "name of 61 characters", objName: repeat("w", 61), spec: wsd(""), want: []string{"metadata.name must be at most 60 characters"}},
		{name: "name not a DNS label", objName: "my.workspace", spec: wsd(""), want: []string{"metadata.name must be a DNS label"}},

		// References.
		{name: "no spec", spec: "", want: []string{"spec", "Required value"}},
		{name: "workspaceClassRef missing", spec: `{"clusterDeploymentRef":{"name":"cd"}}`, want: []string{"spec.workspaceClassRef", "Required value"}},
		{name: "workspaceClassRef empty", spec: wsd(`,"workspaceClassRef":""`), want: []string{"spec.workspaceClassRef", "at least 1"}},
		{name: "workspaceClassRef too long", spec: wsd(`,"workspaceClassRef":"` + repeat("c", 254) + `"`), want: []string{"spec.workspaceClassRef", "Too long"}},
		{name: "no cluster, Colony or selector", spec: `{"workspaceClassRef":"c"}`, want: []string{"exactly one of spec.clusterDeploymentRef, spec.colonyRef and spec.clusterSelector"}},
		{name: "clusterDeploymentRef.name missing", spec: wsd(`,"clusterDeploymentRef":{"namespace":"x"}`), want: []string{"spec.clusterDeploymentRef.name", "Required value"}},
		{name: "clusterDeploymentRef.name empty", spec: wsd(`,"clusterDeploymentRef":{"name":""}`), want: []string{"spec.clusterDeploymentRef.name", "at least 1"}},
		{name: "clusterDeploymentRef.name too long", spec: wsd(`,"clusterDeploymentRef":{"name":"` + repeat("c", 64) + `"}`), want: []string{"spec.clusterDeploymentRef.name", "Too long"}},
		{name: "clusterDeploymentRef.namespace too long", spec: wsd(`,"clusterDeploymentRef":{"name":"c","namespace":"` + repeat("n", 64) + `"}`), want: []string{"spec.clusterDeploymentRef.namespace", "Too long"}},

		// Resources.
		{name: "replicas 0", spec: wsd(`,"resources":{"replicas":0}`), want: []string{"spec.resources.replicas", "greater than or equal to 1"}},
		{name: "replicas 65", spec: wsd(`,"resources":{"replicas":65}`), want: []string{"spec.resources.replicas", "less than or equal to 64"}},
		{name: "gpuCount -1", spec: wsd(gpu(`"gpuCount":-1`)), want: []string{"spec.resources.perReplica.gpuCount", "greater than or equal to 0"}},
		{name: "gpuCount 65", spec: wsd(gpu(`"gpuCount":65`)), want: []string{"spec.resources.perReplica.gpuCount", "less than or equal to 64"}},
		{name: "unknown gpuVendor", spec: wsd(gpu(`"gpuCount":1,"gpuVendor":"nvidia"`)), want: []string{"spec.resources.perReplica.gpuVendor", "Unsupported value"}},
		{name: "gpuType too long", spec: wsd(gpu(`"gpuCount":1,"gpuType":"` + repeat("g", 64) + `"`)), want: []string{"spec.resources.perReplica.gpuType", "Too long"}},
		{name: "gpuNodeSelector with 17 keys", spec: wsd(gpu(`"gpuCount":1,"gpuNodeSelector":` + jsonMap(17))), want: []string{"spec.resources.perReplica.gpuNodeSelector", "Too many"}},
		{name: "gpuType without gpuCount", spec: wsd(gpu(`"gpuType":"A100"`)), want: []string{"spec.resources.perReplica: Invalid value", "need perReplica.gpuCount > 0"}},
		{name: "gpuType with gpuCount 0", spec: wsd(gpu(`"gpuCount":0,"gpuType":"A100"`)), want: []string{"spec.resources.perReplica: Invalid value", "need perReplica.gpuCount > 0"}},
		{name: "gpuNodeSelector without gpuCount", spec: wsd(gpu(`"gpuNodeSelector":{"a":"b"}`)), want: []string{"spec.resources.perReplica: Invalid value", "need perReplica.gpuCount > 0"}},
		{name: "cpu not a quantity", spec: wsd(gpu(`"cpu":"two"`)), want: []string{"spec.resources.perReplica.cpu"}},
		{name: "memory not a quantity", spec: wsd(gpu(`"memory":"16 gigs"`)), want: []string{"spec.resources.perReplica.memory"}},
		{name: "storage not a quantity", spec: wsd(gpu(`"storage":"1 TB"`)), want: []string{"spec.resources.perReplica.storage"}},

		// Values and suspend.
		{name: "values a string", spec: wsd(`,"values":"a: b"`), want: []string{"spec.values", "must be of type object"}},
		{name: "values a list", spec: wsd(`,"values":[1]`), want: []string{"spec.values", "must be of type object"}},
		{name: "valuesFrom unknown kind", spec: wsd(`,"valuesFrom":[{"kind":"Vault","name":"pw"}]`), want: []string{"spec.valuesFrom[0].kind", "Unsupported value"}},
		{name: "valuesFrom name missing", spec: wsd(`,"valuesFrom":[{"kind":"Secret"}]`), want: []string{"spec.valuesFrom[0].name", "Required value"}},
		{name: "valuesFrom 17 sources", spec: wsd(`,"valuesFrom":` + jsonList(17, `{"kind":"Secret","name":"s%d"}`)), want: []string{"spec.valuesFrom", "Too many"}},
		{name: "suspend not a bool", spec: wsd(`,"suspend":"yes"`), want: []string{"spec.suspend", "must be of type boolean"}},
		{name: "stopped and stopAfter", spec: wsd(`,"stopped":true,"stopAfter":"8h30m"`)},
		{name: "stopped not a bool", spec: wsd(`,"stopped":"yes"`), want: []string{"spec.stopped", "must be of type boolean"}},
		{name: "stopAfter not a duration", spec: wsd(`,"stopAfter":"soon"`), want: []string{"spec.stopAfter", "should match"}},
		{name: "stopAfter negative", spec: wsd(`,"stopAfter":"-5m"`), want: []string{"spec.stopAfter", "should match"}},
		{name: "preemptionPolicy Never", spec: wsd(`,"preemptionPolicy":"Never"`)},
		{name: "preemptionPolicy Reclaimable", spec: wsd(`,"preemptionPolicy":"Reclaimable"`)},
		{name: "preemptionPolicy unknown", spec: wsd(`,"preemptionPolicy":"PreemptLowerPriority"`), want: []string{"spec.preemptionPolicy", "Unsupported value"}},
	}
	runCases(t, workspacesAPI, "WorkspaceDeployment", ns, cases)
	requireTypedList(t, &workspacesv1.WorkspaceDeploymentList{})
}

// TestWorkspaceDeploymentImmutableRefs: the class and cluster references cannot change; values,
// resources and suspend can.
func TestWorkspaceDeploymentImmutableRefs(t *testing.T) {
	ns := createNamespace(t, "crd-wsd-immutable")
	const name = "ws"
	mustCreate(t, newObject(t, workspacesAPI, "WorkspaceDeployment", ns, name, wsd(`,"values":{"keep":{"unknown":[true]}}`)))

	cases := []struct {
		name  string
		value any
		path  []string
		want  []string
	}{
		{"workspaceClassRef changed", "other-class", []string{"spec", "workspaceClassRef"}, []string{"spec.workspaceClassRef", "workspaceClassRef is immutable: delete the WorkspaceDeployment and create it again with the new class (its volumes go with it), or create another WorkspaceDeployment beside it; stop and start keep the class"}},
		{"clusterDeploymentRef.name changed", "other-cd", []string{"spec", "clusterDeploymentRef", "name"}, []string{"spec.clusterDeploymentRef", "clusterDeploymentRef is immutable: delete the WorkspaceDeployment and create it again on the other cluster"}},
		{"clusterDeploymentRef.namespace added", "elsewhere", []string{"spec", "clusterDeploymentRef", "namespace"}, []string{"spec.clusterDeploymentRef", "clusterDeploymentRef is immutable: delete the WorkspaceDeployment and create it again on the other cluster"}},
		{"values changed", mustJSON(t, `{"keep":{"unknown":[false]},"more":1}`), []string{"spec", "values"}, nil},
		{"resources changed", mustJSON(t, `{"replicas":3}`), []string{"spec", "resources"}, nil},
		{"suspend set", true, []string{"spec", "suspend"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkVerdict(t, updateField(t, workspacesAPI, "WorkspaceDeployment", ns, name, tc.value, tc.path...), tc.want)
		})
	}

	t.Run("values with unknown keys read back unchanged", func(t *testing.T) {
		w := &workspacesv1.WorkspaceDeployment{}
		if err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, w); err != nil {
			t.Fatalf("reading the workspace typed: %v", err)
		}
		var got any
		if err := json.Unmarshal(w.Spec.Values.Raw, &got); err != nil {
			t.Fatalf("values are not JSON: %v", err)
		}
		if !sameJSON(t, got, mustJSON(t, `{"keep":{"unknown":[false]},"more":1}`)) {
			t.Errorf("values changed on the round trip: %s", w.Spec.Values.Raw)
		}
		if w.Spec.Resources == nil || w.Spec.Resources.Replicas == nil || *w.Spec.Resources.Replicas != 3 || !w.Spec.Suspend {
			t.Errorf("resources/suspend not updated: %+v suspend=%v", w.Spec.Resources, w.Spec.Suspend)
		}
	})
}

func TestWorkspaceDeploymentStatusValidation(t *testing.T) {
	ns := createNamespace(t, "crd-wsd-status")
	const name = "st"
	mustCreate(t, newObject(t, workspacesAPI, "WorkspaceDeployment", ns, name, wsd("")))

	full := `{"phase":"Running","conditions":[` + condition + `],"observedGeneration":2,"serviceSetName":"cd-ws-st","releaseName":"st",` +
		`"resolvedResources":{"replicas":1,"perReplica":{"cpu":"1","gpuCount":1,"gpuVendor":"NVIDIA"},"gpuResourceName":"nvidia.com/gpu","nodeSelector":{"exalsius.ai/gpu-model":"A100"}},` +
		`"prerequisites":[{"serviceTemplate":"gpu-operator","namespace":"gpu-operator","serviceSetName":"cd-prereq-gpu-operator","state":"Deployed"}],` +
		`"feasibility":{"feasible":true,"reason":"Feasible","message":"1/1 replicas fit","selector":{"exalsius.ai/gpu-model":"A100"},"matchingNodes":1,"freeGPUs":7,"fittingReplicas":1},` +
		`"access":[{"name":"http","protocol":"HTTP","url":"https://st.tenant.example","ready":true}],` +
		`"failureContext":{"phaseWhenFailed":"Deploying","reason":"HelmReleaseFailed","serviceSetStatus":{"deployed":false,"anything":{"x":1}},"recentEvents":["e1"]},` +
		`"message":"running"}`
	cases := []struct {
		name, status string
		want         []string
	}{
		{name: "every field", status: full},
		{name: "unknown phase", status: `{"phase":"Done"}`, want: []string{"status.phase", "Unsupported value"}},
		{name: "unknown access protocol", status: `{"access":[{"name":"a","protocol":"UDP","ready":false}]}`, want: []string{"status.access[0].protocol", "Unsupported value"}},
		{name: "unknown phaseWhenFailed", status: `{"failureContext":{"phaseWhenFailed":"Exploded"}}`, want: []string{"status.failureContext.phaseWhenFailed", "Unsupported value"}},
		{name: "serviceSetStatus not an object", status: `{"failureContext":{"serviceSetStatus":"broken"}}`, want: []string{"status.failureContext.serviceSetStatus", "must be of type object"}},
		{name: "duplicate condition type", status: `{"conditions":[` + condition + `,` + condition + `]}`, want: []string{"status.conditions[1]", "Duplicate value"}},
	}
	for _, phase := range []string{"Pending", "InstallingPrerequisites", "Waiting", "Deploying", "Running", "Failed", "Deleting"} {
		cases = append(cases, struct {
			name, status string
			want         []string
		}{name: "phase " + phase, status: `{"phase":"` + phase + `"}`})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkVerdict(t, updateStatus(t, workspacesAPI, "WorkspaceDeployment", ns, name, tc.status), tc.want)
		})
	}
}
