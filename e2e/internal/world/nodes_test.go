package world

import (
	"strings"
	"testing"
)

func TestClusterConfigNodes(t *testing.T) {
	cfg, err := ParseClusterConfig([]byte(`{"nodes":[
		{"name":"cpu","cpu":"8","memory":"32Gi"},
		{"name":"a100","count":2,"gpu":{"vendor":"NVIDIA","model":"A100","count":8}},
		{"name":"mi","gpu":{"vendor":"amd","model":"MI300X","count":4,"vendorLabelsOnly":true}}
	],"ignored":{"other":"keys"}}`))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cfg.BuildNodes()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	if got := strings.Join(names, ","); got != "a100-0,a100-1,cpu-0,mi-0" {
		t.Fatalf("nodes %s", got)
	}
	a100 := nodes[0]
	if q := a100.Status.Allocatable["nvidia.com/gpu"]; q.Value() != 8 {
		t.Errorf("a100 allocatable gpu %s", q.String())
	}
	if a100.Labels[GPUModelLabel] != "A100" || a100.Labels[NVIDIAProductLabel] != "A100" || a100.Labels[PoolLabel] != "a100" {
		t.Errorf("a100 labels %v", a100.Labels)
	}
	if a100.Annotations[KwokNodeAnnotation] != KwokNodeAnnotationValue {
		t.Errorf("a100 is not a kwok node: %v", a100.Annotations)
	}
	cpu := nodes[2]
	if _, ok := cpu.Status.Allocatable["nvidia.com/gpu"]; ok {
		t.Error("cpu node has GPUs")
	}
	if q := cpu.Status.Capacity["cpu"]; q.String() != "8" {
		t.Errorf("cpu capacity %s", q.String())
	}
	mi := nodes[3]
	if q := mi.Status.Allocatable["amd.com/gpu"]; q.Value() != 4 {
		t.Errorf("mi allocatable amd.com/gpu %s", q.String())
	}
	if _, ok := mi.Labels[GPUModelLabel]; ok || mi.Labels[AMDProductLabel] != "MI300X" {
		t.Errorf("vendorLabelsOnly node labels %v", mi.Labels)
	}
}

func TestClusterConfigDefaults(t *testing.T) {
	for _, raw := range []string{"", "null", "{}"} {
		cfg, err := ParseClusterConfig([]byte(raw))
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		nodes, err := cfg.BuildNodes()
		if err != nil || len(nodes) != 1 || nodes[0].Name != "worker-0" {
			t.Fatalf("%q: nodes %v err %v", raw, nodes, err)
		}
	}
}

func TestClusterConfigErrorsNameTheField(t *testing.T) {
	for raw, field := range map[string]string{
		`{"nodes":[{"gpu":{"vendor":"intel","count":1}}]}`:            "spec.config.nodes[0].gpu.vendor",
		`{"nodes":[{},{"cpu":"lots"}]}`:                               "spec.config.nodes[1].cpu",
		`{"nodes":[{"count":-1}]}`:                                    "spec.config.nodes[0].count",
		`{"nodes":[{"name":"Bad_Name"}]}`:                             "spec.config.nodes[0].name",
		`{"nodes":[{"name":"a"},{"name":"a"}]}`:                       "spec.config.nodes[1].name",
		`{"nodes":[{"labels":{"k":"not a valid value!"}}]}`:           "spec.config.nodes[0].labels",
		`{"nodes":[{"gpu":{"vendor":"NVIDIA","count":1000}}]}`:        "spec.config.nodes[0].gpu.count",
		`{"nodes":"many"}`:                                            "spec.config",
		`{"nodes":[{"gpu":{"vendor":"NVIDIA","model":"has space"}}]}`: "spec.config.nodes[0].labels",
	} {
		cfg, err := ParseClusterConfig([]byte(raw))
		if err == nil {
			_, err = cfg.BuildNodes()
		}
		if err == nil || !strings.HasPrefix(err.Error(), field) {
			t.Errorf("%s: error %v, want one naming %s", raw, err, field)
		}
	}
}

func FuzzClusterConfig(f *testing.F) {
	f.Add([]byte(`{"nodes":[{"name":"a","count":2,"gpu":{"vendor":"NVIDIA","model":"A100","count":8}}]}`))
	f.Add([]byte(`{"nodes":[{"cpu":"1.5","memory":"1e3"}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := ParseClusterConfig(raw)
		if err != nil {
			return
		}
		nodes, err := cfg.BuildNodes()
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, n := range nodes {
			if seen[n.Name] {
				t.Fatalf("duplicate node %s", n.Name)
			}
			seen[n.Name] = true
		}
	})
}

// TestRuntimeClasses: a child with NVIDIA GPU nodes carries the RuntimeClass nvidia that NVIDIA's GPU
// operator creates and NVIDIA GPU charts name; AMD and CPU-only children carry none.
func TestRuntimeClasses(t *testing.T) {
	for cfg, want := range map[string]string{
		`{"nodes":[{"name":"cpu"},{"name":"l4","gpu":{"vendor":"NVIDIA","model":"L4","count":1}}]}`: "nvidia/nvidia",
		`{"nodes":[{"name":"mi","gpu":{"vendor":"AMD","model":"MI300X","count":8}}]}`:               "",
		`{}`: "",
	} {
		c, err := ParseClusterConfig([]byte(cfg))
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := c.BuildNodes()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, rc := range RuntimeClasses(nodes) {
			got = append(got, rc.Name+"/"+rc.Handler)
		}
		if strings.Join(got, ",") != want {
			t.Errorf("%s: RuntimeClasses %v, want %q", cfg, got, want)
		}
	}
}
