package workspaceclass

import (
	"strings"
	"testing"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

func tmpl(status, chartSpec, spec string) *k0rdentv1beta1.ServiceTemplate {
	t := &k0rdentv1beta1.ServiceTemplate{}
	t.Namespace, t.Name = "kcm-system", "t"
	t.Status.ChartVersion = status
	t.Spec.Version = spec
	if chartSpec != "" {
		t.Spec.Helm = &k0rdentv1beta1.HelmSpec{ChartSpec: &k0rdentv1beta1.HelmChartSpec{Version: chartSpec}}
	}
	return t
}

func TestCheckVersion(t *testing.T) {
	cases := []struct {
		constraint string
		t          *k0rdentv1beta1.ServiceTemplate
		wantErr    string
	}{
		{"", tmpl("", "", ""), ""},
		{">=0.3.0, <0.4.0", tmpl("0.3.2", "9.9.9", ""), ""},
		{">=0.3.0, <0.4.0", tmpl("0.4.0", "", ""), "does not satisfy"},
		{"~1.2", tmpl("", "1.2.7", ""), ""},
		{"^2", tmpl("", "", "v2.1.0"), ""},
		{">=1.0.0", tmpl("", "", ""), "reports no chart version"},
		{">=1.0.0", tmpl("not-semver", "", ""), "not a semantic version"},
		{">=>1", tmpl("1.0.0", "", ""), "does not parse"},
	}
	for _, tc := range cases {
		err := CheckVersion(tc.constraint, tc.t)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("CheckVersion(%q): %v", tc.constraint, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("CheckVersion(%q) = %v, want an error containing %q", tc.constraint, err, tc.wantErr)
		}
	}
}

func TestValidateInjection(t *testing.T) {
	cases := []struct {
		ri      *workspacesv1.ResourceInjection
		wantErr string
	}{
		{nil, ""},
		{&workspacesv1.ResourceInjection{CPU: []string{"a.cpu"}, GPUCount: []string{`a.limits["nvidia.com/gpu"]`}}, ""},
		{&workspacesv1.ResourceInjection{Memory: []string{"ok", "a..b"}}, "spec.resourceInjection.memory[1]"},
		{&workspacesv1.ResourceInjection{CPU: []string{"_exalsius.cpu"}}, "_exalsius"},
		{&workspacesv1.ResourceInjection{CPU: []string{"a.b"}, Memory: []string{`a["b"]`}}, "both write"},
		{&workspacesv1.ResourceInjection{CPU: []string{"a.b"}, Memory: []string{"a.b.c"}}, "both a leaf and a map"},
		{&workspacesv1.ResourceInjection{Memory: []string{"a.b.c"}, CPU: []string{"a.b"}}, "both a leaf and a map"},
	}
	for i, tc := range cases {
		err := ValidateInjection(tc.ri)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("case %d: %v", i, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("case %d: got %v, want an error containing %q", i, err, tc.wantErr)
		}
	}
}

func TestValidateUserFacingPaths(t *testing.T) {
	err := ValidateUserFacingPaths([]workspacesv1.UserFacingConfig{{HelmValuePath: "a.b"}, {HelmValuePath: `x["y`}})
	if err == nil || !strings.Contains(err.Error(), "spec.userFacingConfig[1].helmValuePath") {
		t.Fatalf("got %v", err)
	}
}
