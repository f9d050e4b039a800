package classpaths

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/valuepath"
)

func TestOf(t *testing.T) {
	s := &workspacesv1.WorkspaceClassSpec{
		ResourceInjection: &workspacesv1.ResourceInjection{
			GPUType: []string{"t"}, Replicas: []string{"r0", "r1"}, CPU: []string{"c"}, Memory: []string{"m"},
			Storage: []string{"s"}, GPUCount: []string{"g"}, GPUVendor: []string{"v"},
		},
		UserFacingConfig: []workspacesv1.UserFacingConfig{{HelmValuePath: "u0"}, {HelmValuePath: "u1"}},
	}
	var got []string
	for _, p := range Of(s, field.NewPath("spec")) {
		got = append(got, p.Field.String()+"="+p.Kind+":"+p.Raw)
	}
	want := []string{
		"spec.resourceInjection.replicas[0]=replicas:r0", "spec.resourceInjection.replicas[1]=replicas:r1",
		"spec.resourceInjection.cpu[0]=cpu:c", "spec.resourceInjection.memory[0]=memory:m",
		"spec.resourceInjection.storage[0]=storage:s", "spec.resourceInjection.gpuCount[0]=gpuCount:g",
		"spec.resourceInjection.gpuVendor[0]=gpuVendor:v", "spec.resourceInjection.gpuType[0]=gpuType:t",
		"spec.userFacingConfig[0].helmValuePath=:u0", "spec.userFacingConfig[1].helmValuePath=:u1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := Of(&workspacesv1.WorkspaceClassSpec{}, field.NewPath("spec")); len(got) != 0 {
		t.Errorf("an empty spec has paths %v", got)
	}
}

func paths(raw ...string) []Path {
	out := make([]Path, len(raw))
	for i, r := range raw {
		out[i] = Path{Field: field.NewPath("p").Index(i), Raw: r}
	}
	return out
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name  string
		paths []Path
		want  []string // each error, rendered
	}{
		{name: "none"},
		{name: "apart", paths: paths("a.b", "a.c", `x["nvidia.com/gpu"]`, "ab")},
		{name: "does not parse", paths: paths("a..b", "ok", `x["y`),
			want: []string{`p[0]: Invalid value: "a..b": `, `p[2]: Invalid value: "x[\"y": `}},
		{name: "into the operator's block", paths: paths("_exalsius.x", `["_exalsius"]`, "a._exalsius"),
			want: []string{"p[0]: Forbidden: the _exalsius values block is written by the operator",
				"p[1]: Forbidden: the _exalsius values block is written by the operator"}},
		{name: "the same value spelled twice", paths: paths("a.b", `["a"]["b"]`),
			want: []string{`p[1]: Invalid value: "a.b": names the same value as p[0]`}},
		{name: "nested either way", paths: paths("a.b", "a.b.c", "a"),
			want: []string{`p[1]: Invalid value: "a.b.c": overlaps p[0] (a.b): one value would overwrite the other`,
				`p[2]: Invalid value: "a": overlaps p[0] (a.b): one value would overwrite the other`,
				`p[2]: Invalid value: "a": overlaps p[1] (a.b.c): one value would overwrite the other`}},
		{name: "single-path problems first, pairs checked among the rest", paths: paths("a", "a.b", "a..b"),
			want: []string{`p[2]: Invalid value: "a..b": `, `p[1]: Invalid value: "a.b": overlaps p[0] (a)`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := Check(tc.paths)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors %v, want %d %q", len(errs), errs, len(tc.want), tc.want)
			}
			for i, e := range errs {
				if !strings.HasPrefix(e.Error(), tc.want[i]) {
					t.Errorf("error %d: %q, want it to start with %q", i, e.Error(), tc.want[i])
				}
			}
		})
	}
}

// FuzzCheck: for any two paths, Check never panics, reports a path's own problem on that path, and
// reports a conflict, on the second path, exactly when both are usable and one holds the other.
func FuzzCheck(f *testing.F) {
	for _, s := range [][2]string{{"a.b", "a.b.c"}, {"a.b", `["a"].b`}, {"_exalsius", "x"}, {"a..b", "a"}, {`a["x.y"]`, "a.x"}, {"", "a"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		errs := Check(paths(a, b))
		usable := func(raw string) []string {
			segs, err := valuepath.Parse(raw)
			if err != nil || segs[0] == workspacesv1.ExalsiusValuesKey {
				return nil
			}
			return segs
		}
		sa, sb := usable(a), usable(b)
		want := 0
		for i, s := range [][]string{sa, sb} {
			if s == nil {
				want++
				if !hasErrorOn(errs, i) {
					t.Errorf("path %d %q is unusable and has no error: %v", i, []string{a, b}[i], errs)
				}
			}
		}
		if sa != nil && sb != nil && (valuepath.HasPrefix(sa, sb) || valuepath.HasPrefix(sb, sa)) {
			want++
			if !hasErrorOn(errs, 1) {
				t.Errorf("%q and %q conflict and p[1] has no error: %v", a, b, errs)
			}
		}
		if len(errs) != want {
			t.Errorf("%q, %q: %d errors %v, want %d", a, b, len(errs), errs, want)
		}
		if len(Check(paths(b, a))) != len(errs) {
			t.Errorf("%q, %q: the order changes the number of problems", a, b)
		}
	})
}

func hasErrorOn(errs field.ErrorList, i int) bool {
	f := field.NewPath("p").Index(i).String()
	for _, e := range errs {
		if e.Field == f {
			return true
		}
	}
	return false
}
