package workspace

import (
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
)

func rawJSON(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

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
	res := MergeResources(workspacesv1.DefaultResources{}, &workspacesv1.ResourceOverrides{
		Replicas:   &two,
		PerReplica: &workspacesv1.PerReplicaResources{CPU: qty("2"), GPUCount: &two, GPUType: "A100"},
	})
	out, overwritten, err := BuildValues(class, ws, res)
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
	res := MergeResources(workspacesv1.DefaultResources{}, nil)
	ws := &workspacesv1.WorkspaceDeployment{Spec: workspacesv1.WorkspaceDeploymentSpec{Values: rawJSON(`{"app":"flat"}`)}}
	if _, _, err := BuildValues(class, ws, res); err == nil || !strings.Contains(err.Error(), "app.replicas") {
		t.Errorf("error %v does not name the blocked path", err)
	}
	ws.Spec.Values = rawJSON(`{"_exalsius":{"mine":true}}`)
	out, overwritten, err := BuildValues(class, ws, res)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "mine") || !reflect.DeepEqual(overwritten, []string{"_exalsius"}) {
		t.Errorf("user _exalsius kept or not reported: %v\n%s", overwritten, out)
	}
	ws.Spec.Values = rawJSON(`[1]`)
	if _, _, err := BuildValues(class, ws, res); err == nil || !strings.Contains(err.Error(), "spec.values") {
		t.Errorf("non-object values: %v", err)
	}
}

func TestMergeResourcesFieldByField(t *testing.T) {
	one, four := int32(1), int32(4)
	def := workspacesv1.DefaultResources{Replicas: &four, PerReplica: &workspacesv1.PerReplicaResources{
		CPU: qty("1"), Memory: qty("4Gi"), GPUCount: &one, GPUVendor: workspacesv1.GPUVendorAMD,
	}}
	got := MergeResources(def, &workspacesv1.ResourceOverrides{PerReplica: &workspacesv1.PerReplicaResources{
		Memory: qty("16Gi"), GPUNodeSelector: map[string]string{"pool": "x"},
	}})
	if got.Replicas != 4 || got.PerReplica.CPU.String() != "1" || got.PerReplica.Memory.String() != "16Gi" ||
		*got.PerReplica.GPUCount != 1 || got.GPUResourceName != "amd.com/gpu" || !reflect.DeepEqual(got.NodeSelector, map[string]string{"pool": "x"}) {
		t.Errorf("merged %+v", got)
	}
	// The defaults are not modified.
	if def.PerReplica.Memory.String() != "4Gi" {
		t.Error("defaults changed")
	}
	none := MergeResources(workspacesv1.DefaultResources{}, nil)
	if none.Replicas != 1 || none.GPUResourceName != "" || none.NodeSelector != nil {
		t.Errorf("empty merge %+v", none)
	}
}

func TestNamesNeverCollideWithKCM(t *testing.T) {
	long := strings.Repeat("x", 60)
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: long},
		Spec: workspacesv1.WorkspaceDeploymentSpec{ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: strings.Repeat("c", 63)}}}
	ss := ServiceSetName(ws)
	if len(ss) > 63 || ss == ws.Spec.ClusterDeploymentRef.Name {
		t.Errorf("ServiceSet name %q", ss)
	}
	if r := ReleaseName(ws); len(r) > 53 {
		t.Errorf("release name %q longer than 53", r)
	}
	other := ws.DeepCopy()
	other.Spec.ClusterDeploymentRef.Namespace = "clusters"
	if ServiceSetName(other) == ss {
		t.Error("a workspace from another namespace gets the same ServiceSet name")
	}
}

// FuzzBuildValues: any values and injection paths give values or an error, never a panic, and the
// _exalsius block is always the operator's.
func FuzzBuildValues(f *testing.F) {
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
		res := MergeResources(workspacesv1.DefaultResources{}, &workspacesv1.ResourceOverrides{
			PerReplica: &workspacesv1.PerReplicaResources{GPUCount: &two},
		})
		out, _, err := BuildValues(class, ws, res)
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
