package crdtests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// wsc returns a minimal valid WorkspaceClass spec with the top-level fields of extra (a JSON object's
// members, starting with a comma) set or replaced.
func wsc(extra string) string {
	return withFields(`{"displayName":"Jupyter","serviceTemplate":{"name":"jupyter-0-3-0"}}`, extra)
}

// jsonList returns n copies of item, formatted with the index, as a JSON list.
func jsonList(n int, item string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(item, i)
	}
	return "[" + strings.Join(items, ",") + "]"
}

// jsonMap returns a JSON object with n string entries.
func jsonMap(n int) string {
	entries := make([]string, n)
	for i := range entries {
		entries[i] = fmt.Sprintf(`"example.com/k%d":"v"`, i)
	}
	return "{" + strings.Join(entries, ",") + "}"
}

func TestWorkspaceClassValidation(t *testing.T) {
	full := wsc(`,"description":"A notebook.",` +
		`"serviceTemplate":{"name":"jupyter-0-3-0","namespace":"kcm-system","versionConstraint":">=0.3.0, <0.4.0"},` +
		`"defaultResources":{"replicas":2,"perReplica":{"cpu":"2","memory":"8Gi","storage":"50Gi","gpuCount":1,"gpuVendor":"NVIDIA"}},` +
		`"prerequisites":[{"serviceTemplate":{"name":"gpu-operator-v24","namespace":"kcm-system","versionConstraint":">=24.0.0"},"namespace":"gpu-operator","values":{"driver":{"enabled":false}}},{"serviceTemplate":{"name":"longhorn"}}],` +
		`"accessEndpoints":[{"name":"http","protocol":"HTTP","port":8888,"serviceName":"jupyter","description":"Notebook UI"},{"name":"ssh","protocol":"SSH","port":22},{"name":"tcp","protocol":"TCP","port":65535}],` +
		`"userFacingConfig":[` +
		`{"helmValuePath":"a.b[\"nvidia.com/gpu\"]","displayName":"A","type":"string","required":true,"default":"x","options":["x","y"]},` +
		`{"helmValuePath":"n","displayName":"N","type":"int","default":3},` +
		`{"helmValuePath":"b","displayName":"B","type":"bool","default":false},` +
		`{"helmValuePath":"token","displayName":"Token","type":"secret"},` +
		`{"helmValuePath":"sshKey","displayName":"SSH key","type":"publicKey","description":"Your key."}],` +
		`"deployTimeout":"30m","prerequisiteDeployTimeout":"1h30m",` +
		`"defaultValues":{"image":{"tag":"v1"}},` +
		`"resourceInjection":{"replicas":["replicaCount"],"cpu":["resources.requests.cpu"],"memory":["resources.requests.memory"],` +
		`"storage":["persistence.size"],"gpuCount":["resources.limits[\"nvidia.com/gpu\"]"],"gpuVendor":["gpu.vendor"],"gpuType":["gpu.type"]}`)

	cases := []validationCase{
		// Valid classes.
		{name: "minimal", spec: wsc("")},
		{name: "every field", spec: full},
		{name: "AMD with 0 GPUs", spec: wsc(`,"defaultResources":{"perReplica":{"gpuCount":0,"gpuVendor":"AMD"}}`)},
		{name: "bounds at their maximum", spec: wsc(`,"displayName":"` + repeat("d", 128) + `","description":"` + repeat("d", 4096) +
			`","defaultResources":{"replicas":64,"perReplica":{"gpuCount":64}},"accessEndpoints":[{"name":"a","protocol":"TCP","port":1}]`)},
		{name: "16 prerequisites", spec: wsc(`,"prerequisites":` + jsonList(16, `{"serviceTemplate":{"name":"p%d"},"namespace":"ns"}`))},
		{name: "prerequisite without a namespace", spec: wsc(`,"prerequisites":[{"serviceTemplate":{"name":"llm-d-infra-0-3-0"}}]`)},
		{name: "16 endpoints", spec: wsc(`,"accessEndpoints":` + jsonList(16, `{"name":"e%d","protocol":"HTTP","port":80}`))},
		{name: "64 user-facing values", spec: wsc(`,"userFacingConfig":` + jsonList(64, `{"helmValuePath":"v%d","displayName":"V","type":"string"}`))},
		{name: "durations in several units", spec: wsc(`,"deployTimeout":"1h2m3.5s","prerequisiteDeployTimeout":"90s"`)},

		// spec, displayName, description.
		{name: "no spec", spec: "", want: []string{"spec", "Required value"}},
		{name: "displayName missing", spec: `{"serviceTemplate":{"name":"t"}}`, want: []string{"spec.displayName", "Required value"}},
		{name: "displayName empty", spec: wsc(`,"displayName":""`), want: []string{"spec.displayName", "at least 1"}},
		{name: "displayName too long", spec: wsc(`,"displayName":"` + repeat("d", 129) + `"`), want: []string{"spec.displayName", "Too long"}},
		{name: "description too long", spec: wsc(`,"description":"` + repeat("d", 4097) + `"`), want: []string{"spec.description", "Too long"}},

		// serviceTemplate.
		{name: "serviceTemplate missing", spec: `{"displayName":"J"}`, want: []string{"spec.serviceTemplate", "Required value"}},
		{name: "serviceTemplate.name missing", spec: wsc(`,"serviceTemplate":{"namespace":"kcm-system"}`), want: []string{"spec.serviceTemplate.name", "Required value"}},
		{name: "serviceTemplate.name empty", spec: wsc(`,"serviceTemplate":{"name":""}`), want: []string{"spec.serviceTemplate.name", "at least 1"}},
		{name: "serviceTemplate.name too long", spec: wsc(`,"serviceTemplate":{"name":"` + repeat("t", 254) + `"}`), want: []string{"spec.serviceTemplate.name", "Too long"}},
		{name: "serviceTemplate.namespace too long", spec: wsc(`,"serviceTemplate":{"name":"t","namespace":"` + repeat("n", 64) + `"}`), want: []string{"spec.serviceTemplate.namespace", "Too long"}},
		{name: "serviceTemplate.versionConstraint too long", spec: wsc(`,"serviceTemplate":{"name":"t","versionConstraint":"` + repeat("1", 129) + `"}`), want: []string{"spec.serviceTemplate.versionConstraint", "Too long"}},

		// defaultResources.
		{name: "replicas 0", spec: wsc(`,"defaultResources":{"replicas":0}`), want: []string{"spec.defaultResources.replicas", "greater than or equal to 1"}},
		{name: "replicas 65", spec: wsc(`,"defaultResources":{"replicas":65}`), want: []string{"spec.defaultResources.replicas", "less than or equal to 64"}},
		{name: "gpuCount -1", spec: wsc(`,"defaultResources":{"perReplica":{"gpuCount":-1}}`), want: []string{"spec.defaultResources.perReplica.gpuCount", "greater than or equal to 0"}},
		{name: "gpuCount 65", spec: wsc(`,"defaultResources":{"perReplica":{"gpuCount":65}}`), want: []string{"spec.defaultResources.perReplica.gpuCount", "less than or equal to 64"}},
		{name: "unknown gpuVendor", spec: wsc(`,"defaultResources":{"perReplica":{"gpuVendor":"Intel"}}`), want: []string{"spec.defaultResources.perReplica.gpuVendor", "Unsupported value"}},
		{name: "class sets gpuType", spec: wsc(`,"defaultResources":{"perReplica":{"gpuCount":1,"gpuType":"A100"}}`), want: []string{"spec.defaultResources.perReplica.gpuType: Invalid value", "a WorkspaceClass may not set gpuType"}},
		{name: "class sets gpuNodeSelector", spec: wsc(`,"defaultResources":{"perReplica":{"gpuCount":1,"gpuNodeSelector":{"a":"b"}}}`), want: []string{"spec.defaultResources.perReplica.gpuNodeSelector: Invalid value", "a WorkspaceClass may not set gpuNodeSelector"}},
		{name: "cpu not a quantity", spec: wsc(`,"defaultResources":{"perReplica":{"cpu":"lots"}}`), want: []string{"spec.defaultResources.perReplica.cpu"}},
		{name: "memory not a quantity", spec: wsc(`,"defaultResources":{"perReplica":{"memory":"8 GB"}}`), want: []string{"spec.defaultResources.perReplica.memory"}},
		{name: "storage not a quantity", spec: wsc(`,"defaultResources":{"perReplica":{"storage":"big"}}`), want: []string{"spec.defaultResources.perReplica.storage"}},

		// prerequisites.
		{name: "duplicate prerequisite", spec: wsc(`,"prerequisites":[{"serviceTemplate":{"name":"p"},"namespace":"a"},{"serviceTemplate":{"name":"p","namespace":"other"},"namespace":"b"}]`), want: []string{"spec.prerequisites", "each prerequisite ServiceTemplate name appears once"}},
		{name: "17 prerequisites", spec: wsc(`,"prerequisites":` + jsonList(17, `{"serviceTemplate":{"name":"p%d"},"namespace":"ns"}`)), want: []string{"spec.prerequisites", "Too many"}},
		{name: "prerequisite serviceTemplate missing", spec: wsc(`,"prerequisites":[{"namespace":"a"}]`), want: []string{"spec.prerequisites[0].serviceTemplate", "Required value"}},
		{name: "prerequisite serviceTemplate a string", spec: wsc(`,"prerequisites":[{"serviceTemplate":"p"}]`), want: []string{"spec.prerequisites[0].serviceTemplate", "must be of type object"}},
		{name: "prerequisite serviceTemplate name missing", spec: wsc(`,"prerequisites":[{"serviceTemplate":{"namespace":"kcm-system"}}]`), want: []string{"spec.prerequisites[0].serviceTemplate.name", "Required value"}},
		{name: "prerequisite serviceTemplate name empty", spec: wsc(`,"prerequisites":[{"serviceTemplate":{"name":""},"namespace":"a"}]`), want: []string{"spec.prerequisites[0].serviceTemplate.name", "at least 1"}},
		{name: "prerequisite serviceTemplate name too long", spec: wsc(`,"prerequisites":[{"serviceTemplate":{"name":"` + repeat("p", 254) + `"},"namespace":"a"}]`), want: []string{"spec.prerequisites[0].serviceTemplate.name", "Too long"}},
		{name: "prerequisite versionConstraint too long", spec: wsc(`,"prerequisites":[{"serviceTemplate":{"name":"p","versionConstraint":"` + repeat("1", 129) + `"}}]`), want: []string{"spec.prerequisites[0].serviceTemplate.versionConstraint", "Too long"}},
		{name: "prerequisite namespace not a DNS label", spec: wsc(`,"prerequisites":[{"serviceTemplate":{"name":"p"},"namespace":"GPU_Operator"}]`), want: []string{"spec.prerequisites[0].namespace", "should match"}},
		{name: "prerequisite namespace too long", spec: wsc(`,"prerequisites":[{"serviceTemplate":{"name":"p"},"namespace":"` + repeat("n", 64) + `"}]`), want: []string{"spec.prerequisites[0].namespace", "Too long"}},
		{name: "prerequisite values not an object", spec: wsc(`,"prerequisites":[{"serviceTemplate":{"name":"p"},"namespace":"a","values":"a: b"}]`), want: []string{"spec.prerequisites[0].values", "must be of type object"}},

		// accessEndpoints.
		{name: "duplicate endpoint", spec: wsc(`,"accessEndpoints":[{"name":"http","protocol":"HTTP","port":80},{"name":"http","protocol":"TCP","port":81}]`), want: []string{"spec.accessEndpoints[1]", "Duplicate value"}},
		{name: "17 endpoints", spec: wsc(`,"accessEndpoints":` + jsonList(17, `{"name":"e%d","protocol":"HTTP","port":80}`)), want: []string{"spec.accessEndpoints", "Too many"}},
		{name: "endpoint name missing", spec: wsc(`,"accessEndpoints":[{"protocol":"HTTP","port":80}]`), want: []string{"spec.accessEndpoints[0].name", "Required value"}},
		{name: "endpoint name not a DNS label", spec: wsc(`,"accessEndpoints":[{"name":"Web UI","protocol":"HTTP","port":80}]`), want: []string{"spec.accessEndpoints[0].name", "should match"}},
		{name: "endpoint name too long", spec: wsc(`,"accessEndpoints":[{"name":"` + repeat("e", 64) + `","protocol":"HTTP","port":80}]`), want: []string{"spec.accessEndpoints[0].name", "Too long"}},
		{name: "endpoint protocol missing", spec: wsc(`,"accessEndpoints":[{"name":"e","port":80}]`), want: []string{"spec.accessEndpoints[0].protocol", "Required value"}},
		{name: "endpoint protocol UDP", spec: wsc(`,"accessEndpoints":[{"name":"e","protocol":"UDP","port":80}]`), want: []string{"spec.accessEndpoints[0].protocol", "Unsupported value"}},
		{name: "endpoint port missing", spec: wsc(`,"accessEndpoints":[{"name":"e","protocol":"HTTP"}]`), want: []string{"spec.accessEndpoints[0].port", "Required value"}},
		{name: "endpoint port 0", spec: wsc(`,"accessEndpoints":[{"name":"e","protocol":"HTTP","port":0}]`), want: []string{"spec.accessEndpoints[0].port", "greater than or equal to 1"}},
		{name: "endpoint port 65536", spec: wsc(`,"accessEndpoints":[{"name":"e","protocol":"HTTP","port":65536}]`), want: []string{"spec.accessEndpoints[0].port", "less than or equal to 65535"}},
		{name: "endpoint serviceName too long", spec: wsc(`,"accessEndpoints":[{"name":"e","protocol":"HTTP","port":80,"serviceName":"` + repeat("s", 64) + `"}]`), want: []string{"spec.accessEndpoints[0].serviceName", "Too long"}},
		{name: "endpoint description too long", spec: wsc(`,"accessEndpoints":[{"name":"e","protocol":"HTTP","port":80,"description":"` + repeat("d", 1025) + `"}]`), want: []string{"spec.accessEndpoints[0].description", "Too long"}},

		// userFacingConfig.
		{name: "duplicate helmValuePath", spec: wsc(`,"userFacingConfig":[{"helmValuePath":"a","displayName":"A","type":"string"},{"helmValuePath":"a","displayName":"B","type":"int"}]`), want: []string{"spec.userFacingConfig[1]", "Duplicate value"}},
		{name: "65 user-facing values", spec: wsc(`,"userFacingConfig":` + jsonList(65, `{"helmValuePath":"v%d","displayName":"V","type":"string"}`)), want: []string{"spec.userFacingConfig", "Too many"}},
		{name: "helmValuePath missing", spec: wsc(`,"userFacingConfig":[{"displayName":"A","type":"string"}]`), want: []string{"spec.userFacingConfig[0].helmValuePath", "Required value"}},
		{name: "helmValuePath empty", spec: wsc(`,"userFacingConfig":[{"helmValuePath":"","displayName":"A","type":"string"}]`), want: []string{"spec.userFacingConfig[0].helmValuePath", "at least 1"}},
		{name: "helmValuePath too long", spec: wsc(`,"userFacingConfig":[{"helmValuePath":"` + repeat("p", 513) + `","displayName":"A","type":"string"}]`), want: []string{"spec.userFacingConfig[0].helmValuePath", "Too long"}},
		{name: "user-facing displayName missing", spec: wsc(`,"userFacingConfig":[{"helmValuePath":"a","type":"string"}]`), want: []string{"spec.userFacingConfig[0].displayName", "Required value"}},
		{name: "user-facing displayName empty", spec: wsc(`,"userFacingConfig":[{"helmValuePath":"a","displayName":"","type":"string"}]`), want: []string{"spec.userFacingConfig[0].displayName", "at least 1"}},
		{name: "user-facing displayName too long", spec: wsc(`,"userFacingConfig":[{"helmValuePath":"a","displayName":"` + repeat("d", 129) + `","type":"string"}]`), want: []string{"spec.userFacingConfig[0].displayName", "Too long"}},
		{name: "user-facing description too long", spec: wsc(`,"userFacingConfig":[{"helmValuePath":"a","displayName":"A","type":"string","description":"` + repeat("d", 1025) + `"}]`), want: []string{"spec.userFacingConfig[0].description", "Too long"}},
		// Accepted, as the upstream operator accepts it: the type defaults to string (TestWorkspaceClassDefaults).
		{name: "user-facing type missing", spec: wsc(`,"userFacingConfig":[{"helmValuePath":"a","displayName":"A"}]`)},
		{name: "user-facing type float", spec: wsc(`,"userFacingConfig":[{"helmValuePath":"a","displayName":"A","type":"float"}]`), want: []string{"spec.userFacingConfig[0].type", "Unsupported value"}},

		// Timeouts, values, injection.
		{name: "deployTimeout not a duration", spec: wsc(`,"deployTimeout":"banana"`), want: []string{"spec.deployTimeout", "should match"}},
		{name: "deployTimeout without a unit", spec: wsc(`,"deployTimeout":"15"`), want: []string{"spec.deployTimeout", "should match"}},
		{name: "deployTimeout negative", spec: wsc(`,"deployTimeout":"-5m"`), want: []string{"spec.deployTimeout", "should match"}},
		{name: "prerequisiteDeployTimeout not a duration", spec: wsc(`,"prerequisiteDeployTimeout":"ten minutes"`), want: []string{"spec.prerequisiteDeployTimeout", "should match"}},
		{name: "defaultValues not an object", spec: wsc(`,"defaultValues":["a"]`), want: []string{"spec.defaultValues", "must be of type object"}},
		{name: "resourceInjection path not a list", spec: wsc(`,"resourceInjection":{"cpu":"resources.cpu"}`), want: []string{"spec.resourceInjection.cpu", "must be of type array"}},
	}
	runCases(t, workspacesAPI, "WorkspaceClass", "", cases)
	requireTypedList(t, &workspacesv1.WorkspaceClassList{})
}

// TestWorkspaceClassDefaults: the API server fills in replicas 1, deployTimeout 15m and
// prerequisiteDeployTimeout 10m, and keeps values that are set.
func TestWorkspaceClassDefaults(t *testing.T) {
	ctx := context.Background()
	mustCreate(t, newObject(t, workspacesAPI, "WorkspaceClass", "", "defaults-minimal", wsc("")))
	mustCreate(t, newObject(t, workspacesAPI, "WorkspaceClass", "", "defaults-perreplica", wsc(`,"defaultResources":{"perReplica":{"cpu":"1"}}`)))
	mustCreate(t, newObject(t, workspacesAPI, "WorkspaceClass", "", "defaults-set", wsc(`,"defaultResources":{"replicas":3},"deployTimeout":"1h","prerequisiteDeployTimeout":"5m"`)))
	mustCreate(t, newObject(t, workspacesAPI, "WorkspaceClass", "", "defaults-untyped", wsc(`,"userFacingConfig":[{"helmValuePath":"a","displayName":"A"}]`)))
	untyped := &workspacesv1.WorkspaceClass{}
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Name: "defaults-untyped"}, untyped); err != nil {
		t.Fatal(err)
	}
	if got := untyped.Spec.UserFacingConfig[0].Type; got != workspacesv1.UserFacingConfigString {
		t.Errorf("userFacingConfig[0].type = %q, want the default string", got)
	}

	cases := []struct {
		name                      string
		replicas                  int32
		deployTimeout, prereqWait time.Duration
	}{
		{"defaults-minimal", 1, 15 * time.Minute, 10 * time.Minute},
		{"defaults-perreplica", 1, 15 * time.Minute, 10 * time.Minute},
		{"defaults-set", 3, time.Hour, 5 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &workspacesv1.WorkspaceClass{}
			if err := mgmt.Client.Get(ctx, client.ObjectKey{Name: tc.name}, c); err != nil {
				t.Fatalf("reading the class: %v", err)
			}
			if c.Spec.DefaultResources.Replicas == nil || *c.Spec.DefaultResources.Replicas != tc.replicas {
				t.Errorf("defaultResources.replicas = %v, want %d", c.Spec.DefaultResources.Replicas, tc.replicas)
			}
			if c.Spec.DeployTimeout == nil || c.Spec.DeployTimeout.Duration != tc.deployTimeout {
				t.Errorf("deployTimeout = %v, want %v", c.Spec.DeployTimeout, tc.deployTimeout)
			}
			if c.Spec.PrerequisiteDeployTimeout == nil || c.Spec.PrerequisiteDeployTimeout.Duration != tc.prereqWait {
				t.Errorf("prerequisiteDeployTimeout = %v, want %v", c.Spec.PrerequisiteDeployTimeout, tc.prereqWait)
			}
		})
	}
}

// TestWorkspaceClassImmutable: every spec change is rejected; metadata and status stay writable, so
// controllers can add finalizers and report validity.
func TestWorkspaceClassImmutable(t *testing.T) {
	const name = "immutable"
	mustCreate(t, newObject(t, workspacesAPI, "WorkspaceClass", "", name,
		wsc(`,"defaultValues":{"a":{"b":1},"unknown":[1,2]},"prerequisites":[{"serviceTemplate":{"name":"p"},"namespace":"n","values":{"x":{"y":"z"}}}]`)))

	rejected := []struct {
		name  string
		value any
		path  []string
	}{
		{"displayName", "Other", []string{"spec", "displayName"}},
		{"description added", "now described", []string{"spec", "description"}},
		{"serviceTemplate.name", "jupyter-0-4-0", []string{"spec", "serviceTemplate", "name"}},
		{"replicas", int64(2), []string{"spec", "defaultResources", "replicas"}},
		{"deployTimeout", "20m", []string{"spec", "deployTimeout"}},
		{"defaultValues", mustJSON(t, `{"a":{"b":2}}`), []string{"spec", "defaultValues"}},
	}
	for _, tc := range rejected {
		t.Run("update of "+tc.name+" rejected", func(t *testing.T) {
			err := updateField(t, workspacesAPI, "WorkspaceClass", "", name, tc.value, tc.path...)
			requireInvalid(t, err, "spec: Invalid value", "spec is immutable")
		})
	}

	t.Run("unchanged spec with new labels and a finalizer accepted", func(t *testing.T) {
		u := get(t, workspacesAPI, "WorkspaceClass", "", name)
		u.SetLabels(map[string]string{"team": "ml"})
		u.SetFinalizers([]string{"workspaces.exalsius.ai/in-use"})
		if err := mgmt.Client.Update(context.Background(), u); err != nil {
			t.Fatalf("metadata update rejected: %v", err)
		}
		u.SetFinalizers(nil)
		if err := mgmt.Client.Update(context.Background(), u); err != nil {
			t.Fatalf("removing the finalizer rejected: %v", err)
		}
	})

	t.Run("unknown keys of defaultValues and prerequisite values kept", func(t *testing.T) {
		u := get(t, workspacesAPI, "WorkspaceClass", "", name)
		if got := nested(t, u, "spec", "defaultValues"); !sameJSON(t, got, mustJSON(t, `{"a":{"b":1},"unknown":[1,2]}`)) {
			t.Errorf("defaultValues changed: %s", normalise(t, got))
		}
		prereq := nested(t, u, "spec", "prerequisites").([]any)[0].(map[string]any)
		if !sameJSON(t, prereq["values"], mustJSON(t, `{"x":{"y":"z"}}`)) {
			t.Errorf("prerequisite values changed: %s", normalise(t, prereq["values"]))
		}
	})

	statusCases := []struct {
		name, status string
		want         []string
	}{
		{name: "valid status", status: `{"valid":true,"conditions":[` + condition + `],"observedGeneration":1,"inUseBy":2}`},
		{name: "invalid with an error", status: `{"valid":false,"validationError":"ServiceTemplate kcm-system/x not found","inUseBy":0}`},
		{name: "duplicate condition type", status: `{"valid":true,"conditions":[` + condition + `,` + condition + `]}`, want: []string{"status.conditions[1]", "Duplicate value"}},
	}
	for _, tc := range statusCases {
		t.Run("status: "+tc.name, func(t *testing.T) {
			checkVerdict(t, updateStatus(t, workspacesAPI, "WorkspaceClass", "", name, tc.status), tc.want)
		})
	}
}
