package helmvalues

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
)

func rawJSON(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

func qty(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// gpuResources are resolved resources with GPUs, as the workspace reconciler resolves them.
func gpuResources(replicas, count int32, model string) *workspacesv1.ResolvedResources {
	r := &workspacesv1.ResolvedResources{Replicas: replicas, PerReplica: workspacesv1.PerReplicaResources{
		CPU: qty("2"), GPUCount: &count, GPUType: model, GPUVendor: workspacesv1.GPUVendorNVIDIA,
	}, GPUResourceName: "nvidia.com/gpu"}
	if model != "" {
		r.NodeSelector = map[string]string{gpu.LabelGPUModel: model}
	}
	return r
}

func TestBuildValuesMergesAndInjects(t *testing.T) {
	two := int32(2)
	class := &workspacesv1.WorkspaceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec: workspacesv1.WorkspaceClassSpec{
			DefaultValues: rawJSON(`{"a":{"x":1,"y":{"deep":"default"}},"list":[1,2],"big":12345678901234567890}`),
			ResourceInjection: &workspacesv1.ResourceInjection{
				Replicas: []string{"replicaCount"},
				CPU:      []string{"resources.requests.cpu", "resources.limits.cpu"},
				GPUCount: []string{`resources.limits["nvidia.com/gpu"]`},
				GPUType:  []string{"gpu.model"},
				Memory:   []string{"resources.requests.memory"},
			},
		},
	}
	ws := &workspacesv1.WorkspaceDeployment{Spec: workspacesv1.WorkspaceDeploymentSpec{
		Values: rawJSON(`{"a":{"y":{"deep":"user"},"z":true},"list":[3],"replicaCount":5,"resources":{"requests":{"cpu":"2"}}}`),
	}}
	res := gpuResources(two, two, "A100")
	built, err := Build(Input{Class: class, Workspace: ws, Resources: res})
	if err != nil {
		t.Fatal(err)
	}
	out, overwritten := built.Inline, built.Overwritten
	got := map[string]any{}
	if err := yaml.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"a":            map[string]any{"x": float64(1), "y": map[string]any{"deep": "user"}, "z": true},
		"list":         []any{float64(3)},
		"big":          float64(12345678901234567890),
		"replicaCount": float64(2),
		"resources": map[string]any{
			"requests": map[string]any{"cpu": "2"},
			"limits":   map[string]any{"cpu": "2", "nvidia.com/gpu": float64(2)},
		},
		"gpu": map[string]any{"model": "A100"},
		"_exalsius": map[string]any{
			"resources": map[string]any{
				"replicas": float64(2),
				"perReplica": map[string]any{"cpu": "2", "gpuCount": float64(2), "gpuVendor": "NVIDIA", "gpuType": "A100",
					"gpuResourceName": "nvidia.com/gpu"},
			},
			"scheduling": map[string]any{"nodeSelector": map[string]any{gpu.LabelGPUModel: "A100"}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("values\n%s\nwant %v", out, want)
	}
	if !strings.Contains(out, "12345678901234567890") {
		t.Errorf("a large integer lost precision:\n%s", out)
	}
	// replicaCount was 5 and is now 2; the user's cpu "2" equals the injected one; memory is unset.
	if !reflect.DeepEqual(overwritten, []string{"replicaCount"}) {
		t.Errorf("overwritten %v, want [replicaCount]", overwritten)
	}
	if built.Secret != "" || len(built.Missing) != 0 {
		t.Errorf("secret %q missing %v, want none", built.Secret, built.Missing)
	}
}

// TestExalsiusBlockLeavesUnsetFieldsOut: a CPU-only workspace gets no GPU fields and no scheduling.
func TestExalsiusBlockLeavesUnsetFieldsOut(t *testing.T) {
	zero := int32(0)
	res := &workspacesv1.ResolvedResources{Replicas: 1, PerReplica: workspacesv1.PerReplicaResources{Memory: qty("8Gi"), GPUCount: &zero}}
	got := exalsiusBlock(res, nil)
	want := map[string]any{"resources": map[string]any{"replicas": int64(1), "perReplica": map[string]any{"memory": "8Gi", "gpuCount": int64(0)}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("_exalsius %v, want %v", got, want)
	}
	got = exalsiusBlock(&workspacesv1.ResolvedResources{Replicas: 3}, nil)
	if want := map[string]any{"resources": map[string]any{"replicas": int64(3)}}; !reflect.DeepEqual(got, want) {
		t.Errorf("_exalsius %v, want %v", got, want)
	}
}

func TestBuildValuesReportsBlockedPathAndReservedBlock(t *testing.T) {
	class := &workspacesv1.WorkspaceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec:       workspacesv1.WorkspaceClassSpec{ResourceInjection: &workspacesv1.ResourceInjection{Replicas: []string{"app.replicas"}}},
	}
	res := &workspacesv1.ResolvedResources{Replicas: 1}
	ws := &workspacesv1.WorkspaceDeployment{Spec: workspacesv1.WorkspaceDeploymentSpec{Values: rawJSON(`{"app":"flat"}`)}}
	if _, err := Build(Input{Class: class, Workspace: ws, Resources: res}); err == nil || !strings.Contains(err.Error(), "app.replicas") {
		t.Errorf("error %v does not name the blocked path", err)
	}
	ws.Spec.Values = rawJSON(`{"_exalsius":{"mine":true}}`)
	built, err := Build(Input{Class: class, Workspace: ws, Resources: res})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(built.Inline, "mine") || !reflect.DeepEqual(built.Overwritten, []string{"_exalsius"}) {
		t.Errorf("user _exalsius kept or not reported: %v\n%s", built.Overwritten, built.Inline)
	}
	ws.Spec.Values = rawJSON(`[1]`)
	if _, err := Build(Input{Class: class, Workspace: ws, Resources: res}); err == nil || !strings.Contains(err.Error(), "spec.values") {
		t.Errorf("non-object values: %v", err)
	}
}

// FuzzBuildValues: any values and injection paths give values or an error, never a panic, and the
// _exalsius block is always the operator's.
func FuzzBuild(f *testing.F) {
	f.Add(`{"a":{"b":1}}`, `{"a":"x"}`, "a.b.c")
	f.Add(`{}`, `{"_exalsius":1}`, `x["y.z"]`)
	f.Add(`null`, `[1]`, "a..b")
	f.Fuzz(func(t *testing.T, defaults, values, path string) {
		two := int32(2)
		class := &workspacesv1.WorkspaceClass{Spec: workspacesv1.WorkspaceClassSpec{
			DefaultValues:     rawJSON(defaults),
			ResourceInjection: &workspacesv1.ResourceInjection{Replicas: []string{path}, GPUCount: []string{path + ".n"}},
		}}
		ws := &workspacesv1.WorkspaceDeployment{Spec: workspacesv1.WorkspaceDeploymentSpec{Values: rawJSON(values)}}
		res := gpuResources(1, two, "")
		built, err := Build(Input{Class: class, Workspace: ws, Resources: res})
		if err != nil {
			return
		}
		got := map[string]any{}
		if err := yaml.Unmarshal([]byte(render(t, built.Inline)), &got); err != nil {
			t.Fatalf("output is not YAML: %v\n%s", err, built.Inline)
		}
		ex, ok := got["_exalsius"].(map[string]any)
		if !ok || !reflect.DeepEqual(ex, exalsiusJSON(t, res)) {
			t.Fatalf("_exalsius block missing or changed: %v", got["_exalsius"])
		}
	})
}

// userFacingClass has a required secret, an optional secret, a defaulted int and a required string.
func userFacingClass() *workspacesv1.WorkspaceClass {
	return &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: workspacesv1.WorkspaceClassSpec{
		DefaultValues: rawJSON(`{"profile":"large"}`),
		UserFacingConfig: []workspacesv1.UserFacingConfig{
			{HelmValuePath: "notebookPassword", Type: workspacesv1.UserFacingConfigSecret, Required: true},
			{HelmValuePath: "inferenceApiKey", Type: workspacesv1.UserFacingConfigSecret},
			{HelmValuePath: "server.port", Type: workspacesv1.UserFacingConfigInt, Default: rawJSON(`8888`)},
			{HelmValuePath: "profile", Type: workspacesv1.UserFacingConfigString, Default: rawJSON(`"small"`)},
			{HelmValuePath: `ms.modelArtifacts["uri"]`, Type: workspacesv1.UserFacingConfigString, Required: true},
		},
	}}
}

func decode(t *testing.T, text string) map[string]any {
	t.Helper()
	out := map[string]any{}
	if err := yaml.Unmarshal([]byte(render(t, text)), &out); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return out
}

func TestBuildAppliesDefaultsAndReportsMissing(t *testing.T) {
	ws := &workspacesv1.WorkspaceDeployment{Spec: workspacesv1.WorkspaceDeploymentSpec{Values: rawJSON(`{"server":{"host":"x"}}`)}}
	built, err := Build(Input{Class: userFacingClass(), Workspace: ws, Resources: &workspacesv1.ResolvedResources{Replicas: 1}})
	if err != nil {
		t.Fatal(err)
	}
	got := decode(t, built.Inline)
	// The default fills the unset port; the class's defaultValues profile is a value, so it stays.
	if !reflect.DeepEqual(got["server"], map[string]any{"host": "x", "port": float64(8888)}) || got["profile"] != "large" {
		t.Errorf("defaults not applied as expected: %v", got)
	}
	if want := []string{"notebookPassword", `ms.modelArtifacts["uri"]`}; !reflect.DeepEqual(built.Missing, want) {
		t.Errorf("missing %v, want %v", built.Missing, want)
	}
	// A value the user sets wins over the default; set values are not missing.
	ws.Spec.Values = rawJSON(`{"server":{"port":9000},"notebookPassword":"pw","ms":{"modelArtifacts":{"uri":"hf://q"}}}`)
	built, err = Build(Input{Class: userFacingClass(), Workspace: ws, Resources: &workspacesv1.ResolvedResources{Replicas: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got := decode(t, built.Inline); got["server"].(map[string]any)["port"] != float64(9000) || len(built.Missing) != 0 {
		t.Errorf("user value lost or still missing: %v %v", got, built.Missing)
	}
}

// TestBuildKeepsSecretsOutOfInlineValues: values of secret entries and every value read from a Secret
// travel only in the Secret part; valuesFrom documents override spec.values in order.
func TestBuildKeepsSecretsOutOfInlineValues(t *testing.T) {
	ws := &workspacesv1.WorkspaceDeployment{Spec: workspacesv1.WorkspaceDeploymentSpec{
		Values: rawJSON(`{"notebookPassword":"from-values-s3cr3t","greeting":"hi","ms":{"modelArtifacts":{"uri":"hf://a"}}}`),
	}}
	from := []Source{
		{Values: map[string]any{"greeting": "from-configmap", "tuning": map[string]any{"threads": json.Number("4")}}},
		{Values: map[string]any{"inferenceApiKey": "api-k3y", "db": map[string]any{"password": "db-pw-9", "user": "admin"}}, Secret: true},
		{Values: map[string]any{"notebookPassword": "rotated-s3cr3t"}, Secret: true},
	}
	built, err := Build(Input{Class: userFacingClass(), Workspace: ws, Resources: &workspacesv1.ResolvedResources{Replicas: 1}, From: from})
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"s3cr3t", "api-k3y", "db-pw-9", "admin"} {
		if strings.Contains(built.Inline, secret) {
			t.Errorf("inline values hold %q:\n%s", secret, built.Inline)
		}
	}
	inline, sec := decode(t, built.Inline), decode(t, built.Secret)
	if inline["greeting"] != "from-configmap" || inline["tuning"].(map[string]any)["threads"] != float64(4) {
		t.Errorf("ConfigMap values do not override spec.values: %v", inline)
	}
	wantSecret := map[string]any{
		"notebookPassword": "rotated-s3cr3t", "inferenceApiKey": "api-k3y",
		"db": map[string]any{"password": "db-pw-9", "user": "admin"},
	}
	if !reflect.DeepEqual(sec, wantSecret) {
		t.Errorf("secret values %v, want %v", sec, wantSecret)
	}
	if _, ok := inline["_exalsius"]; !ok {
		t.Errorf("inline values lost the _exalsius block: %v", inline)
	}
}

func TestBuildEscapesTemplates(t *testing.T) {
	ws := &workspacesv1.WorkspaceDeployment{Spec: workspacesv1.WorkspaceDeploymentSpec{
		Values: rawJSON(`{"name":"{{ .Release.Name }}","notebookPassword":"{{-x-}}","ms":{"modelArtifacts":{"uri":"u"}}}`),
	}}
	built, err := Build(Input{Class: userFacingClass(), Workspace: ws, Resources: &workspacesv1.ResolvedResources{Replicas: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got := decode(t, built.Inline)["name"]; got != "{{ .Release.Name }}" {
		t.Errorf("inline value after rendering %q", got)
	}
	if got := decode(t, built.Secret)["notebookPassword"]; got != "{{-x-}}" {
		t.Errorf("secret value after rendering %q", got)
	}
}

// TestBuildDeclaredValuesPolicy: under valuesPolicy Declared, user values (spec.values and valuesFrom
// documents) may set only the class's userFacingConfig paths; anything else is refused, naming the
// paths and never the values. The class's own defaultValues are not user values.
func TestBuildDeclaredValuesPolicy(t *testing.T) {
	class := userFacingClass()
	class.Spec.ValuesPolicy = workspacesv1.ValuesPolicyDeclared
	class.Spec.DefaultValues = rawJSON(`{"profile":"large","nodeSelector":{"pool":"gpu"}}`)
	res := &workspacesv1.ResolvedResources{Replicas: 1}
	ws := &workspacesv1.WorkspaceDeployment{Spec: workspacesv1.WorkspaceDeploymentSpec{
		Values: rawJSON(`{"server":{"port":9000},"notebookPassword":"pw","ms":{"modelArtifacts":{"uri":"hf://q"}}}`)}}
	if _, err := Build(Input{Class: class, Workspace: ws, Resources: res}); err != nil {
		t.Fatalf("declared values refused: %v", err)
	}
	ws.Spec.Values = rawJSON(`{"notebookPassword":"pw","ms":{"modelArtifacts":{"uri":"hf://q"}},"extraObjects":[{"kind":"ClusterRoleBinding"}],"tolerations":[{"operator":"Exists"}],"server":{"port":1,"hostNetwork":true}}`)
	_, err := Build(Input{Class: class, Workspace: ws, Resources: res})
	if err == nil || !strings.Contains(err.Error(), "spec.values sets extraObjects, server.hostNetwork, tolerations") || strings.Contains(err.Error(), "ClusterRoleBinding") {
		t.Fatalf("undeclared spec.values: %v", err)
	}
	ws.Spec.Values = rawJSON(`{"notebookPassword":"pw","ms":{"modelArtifacts":{"uri":"hf://q"}}}`)
	from := []Source{{Values: map[string]any{"namespaceOverride": "kube-system"}}}
	_, err = Build(Input{Class: class, Workspace: ws, Resources: res, From: from})
	if err == nil || !strings.Contains(err.Error(), "a spec.valuesFrom document sets namespaceOverride") || strings.Contains(err.Error(), "kube-system") {
		t.Fatalf("undeclared valuesFrom: %v", err)
	}
	// The same values under the default policy pass.
	class.Spec.ValuesPolicy = ""
	if _, err := Build(Input{Class: class, Workspace: ws, Resources: res, From: from}); err != nil {
		t.Fatalf("valuesPolicy Any refused: %v", err)
	}
}

// TestBuildEnforcedValues: the class's enforcedValues win over spec.values and valuesFrom, and the
// user paths they replace are named; values beside them are kept.
func TestBuildEnforcedValues(t *testing.T) {
	class := userFacingClass()
	class.Spec.EnforcedValues = rawJSON(`{"securityContext":{"runAsNonRoot":true},"serviceAccount":{"create":false}}`)
	res := &workspacesv1.ResolvedResources{Replicas: 1}
	ws := &workspacesv1.WorkspaceDeployment{Spec: workspacesv1.WorkspaceDeploymentSpec{
		Values: rawJSON(`{"notebookPassword":"pw","ms":{"modelArtifacts":{"uri":"hf://q"}},"securityContext":{"runAsNonRoot":false,"runAsUser":1000}}`)}}
	from := []Source{{Values: map[string]any{"serviceAccount": map[string]any{"create": true, "name": "admin"}}}}
	built, err := Build(Input{Class: class, Workspace: ws, Resources: res, From: from})
	if err != nil {
		t.Fatal(err)
	}
	got := decode(t, built.Inline)
	if sc := got["securityContext"].(map[string]any); sc["runAsNonRoot"] != true || sc["runAsUser"] != float64(1000) {
		t.Errorf("securityContext %v: want runAsNonRoot enforced and runAsUser kept", sc)
	}
	if sa := got["serviceAccount"].(map[string]any); sa["create"] != false || sa["name"] != "admin" {
		t.Errorf("serviceAccount %v: want create enforced and name kept", sa)
	}
	if want := []string{"securityContext.runAsNonRoot", "serviceAccount.create"}; !reflect.DeepEqual(built.Overwritten, want) {
		t.Errorf("overwritten %v, want %v", built.Overwritten, want)
	}
	// A user value equal to the enforced one is not reported.
	ws.Spec.Values = rawJSON(`{"notebookPassword":"pw","ms":{"modelArtifacts":{"uri":"hf://q"}},"securityContext":{"runAsNonRoot":true}}`)
	if built, err = Build(Input{Class: class, Workspace: ws, Resources: res}); err != nil || len(built.Overwritten) != 0 {
		t.Errorf("an equal value reported overwritten: %v %v", built.Overwritten, err)
	}
}

// TestSchedulingInjection: once the GPU gate admitted a workspace, `_exalsius.scheduling` carries
// the node selector with the admitted node pinned, a required node affinity to the admitted nodes and
// the GPU taint's toleration; a class that injects them into the chart's own paths overwrites what
// the tenant put there, so the tenant's values cannot steer the pods onto other GPUs.
func TestSchedulingInjection(t *testing.T) {
	two := int32(2)
	res := &workspacesv1.ResolvedResources{Replicas: 2, GPUResourceName: "nvidia.com/gpu",
		PerReplica:   workspacesv1.PerReplicaResources{GPUCount: &two, GPUVendor: workspacesv1.GPUVendorNVIDIA},
		NodeSelector: map[string]string{"exalsius.ai/gpu-model": "H100"}}
	ws := &workspacesv1.WorkspaceDeployment{Spec: workspacesv1.WorkspaceDeploymentSpec{Values: rawJSON(
		`{"nodeSelector":{"kubernetes.io/hostname":"someone-elses-node"},"affinity":{"podAffinity":{}},"tolerations":[{"operator":"Exists"}],"keep":"me"}`)}}
	ws.Status.Admission = &workspacesv1.Admission{GPUsPerReplica: 2, Replicas: 2,
		Nodes: []workspacesv1.AdmittedNode{{Name: "n2", Hostname: "h2", Replicas: 1}, {Name: "n1", Hostname: "h1", Replicas: 1}}}
	class := &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: workspacesv1.WorkspaceClassSpec{
		ResourceInjection: &workspacesv1.ResourceInjection{NodeSelector: []string{"nodeSelector"}, Affinity: []string{"affinity"}, Tolerations: []string{"tolerations"}}}}
	built, err := Build(Input{Class: class, Workspace: ws, Resources: res})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal([]byte(built.Inline), &got); err != nil {
		t.Fatal(err)
	}
	affinity := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{
			map[string]any{"key": "kubernetes.io/hostname", "operator": "In", "values": []any{"h1", "h2"}}}}}}}}
	tolerations := []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}}
	selector := map[string]any{"exalsius.ai/gpu-model": "H100"}
	want := map[string]any{"nodeSelector": selector, "affinity": affinity, "tolerations": tolerations}
	for k, v := range want {
		if !reflect.DeepEqual(got[k], v) {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
		if s := got["_exalsius"].(map[string]any)["scheduling"].(map[string]any); !reflect.DeepEqual(s[k], v) {
			t.Errorf("_exalsius.scheduling.%s = %v, want %v", k, s[k], v)
		}
	}
	if got["keep"] != "me" {
		t.Errorf("an unrelated user value was lost: %v", got["keep"])
	}
	if !reflect.DeepEqual(built.Overwritten, []string{"affinity", "nodeSelector", "tolerations"}) {
		t.Errorf("overwritten %v, want the three scheduling paths", built.Overwritten)
	}

	// Before the admission (the values check ahead of the gate) there is no affinity nor toleration to
	// inject, and a CPU-only admission gets none either.
	ws.Status.Admission = nil
	built, err = Build(Input{Class: class, Workspace: ws, Resources: res})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(built.Inline, "nodeAffinity") || strings.Contains(built.Inline, "NoSchedule") {
		t.Errorf("affinity or toleration without an admission:\n%s", built.Inline)
	}
}
