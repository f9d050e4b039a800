package helmvalues

import (
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
	out, overwritten, err := Build(class, ws, res)
	if err != nil {
		t.Fatal(err)
	}
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
			"replicas": float64(2), "gpuResourceName": "nvidia.com/gpu",
			"resources":  map[string]any{"cpu": "2", "nvidia.com/gpu": float64(2)},
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
}

func TestBuildValuesReportsBlockedPathAndReservedBlock(t *testing.T) {
	class := &workspacesv1.WorkspaceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec:       workspacesv1.WorkspaceClassSpec{ResourceInjection: &workspacesv1.ResourceInjection{Replicas: []string{"app.replicas"}}},
	}
	res := &workspacesv1.ResolvedResources{Replicas: 1}
	ws := &workspacesv1.WorkspaceDeployment{Spec: workspacesv1.WorkspaceDeploymentSpec{Values: rawJSON(`{"app":"flat"}`)}}
	if _, _, err := Build(class, ws, res); err == nil || !strings.Contains(err.Error(), "app.replicas") {
		t.Errorf("error %v does not name the blocked path", err)
	}
	ws.Spec.Values = rawJSON(`{"_exalsius":{"mine":true}}`)
	out, overwritten, err := Build(class, ws, res)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "mine") || !reflect.DeepEqual(overwritten, []string{"_exalsius"}) {
		t.Errorf("user _exalsius kept or not reported: %v\n%s", overwritten, out)
	}
	ws.Spec.Values = rawJSON(`[1]`)
	if _, _, err := Build(class, ws, res); err == nil || !strings.Contains(err.Error(), "spec.values") {
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
		out, _, err := Build(class, ws, res)
		if err != nil {
			return
		}
		got := map[string]any{}
		if err := yaml.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("output is not YAML: %v\n%s", err, out)
		}
		ex, ok := got["_exalsius"].(map[string]any)
		if !ok || ex["gpuResourceName"] != "nvidia.com/gpu" {
			t.Fatalf("_exalsius block missing or changed: %v", got["_exalsius"])
		}
	})
}
