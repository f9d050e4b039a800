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

// TestCheckValuePaths: the class reconciler applies common/classpaths' rule to every value path of
// the class, the resourceInjection paths under InvalidInjectionPath and what a userFacingConfig
// helmValuePath breaks under InvalidValuePath.
func TestCheckValuePaths(t *testing.T) {
	cases := []struct {
		name    string
		spec    workspacesv1.WorkspaceClassSpec
		reason  string
		message string
	}{
		{name: "none"},
		{name: "valid", spec: workspacesv1.WorkspaceClassSpec{
			ResourceInjection: &workspacesv1.ResourceInjection{CPU: []string{"a.cpu"}, GPUCount: []string{`a.limits["nvidia.com/gpu"]`}},
			UserFacingConfig:  []workspacesv1.UserFacingConfig{{HelmValuePath: "a.b"}}}},
		{name: "injection path does not parse", spec: workspacesv1.WorkspaceClassSpec{
			ResourceInjection: &workspacesv1.ResourceInjection{Memory: []string{"ok", "a..b"}}},
			reason: workspacesv1.ReasonInvalidInjectionPath, message: "spec.resourceInjection.memory[1]"},
		{name: "injection into _exalsius", spec: workspacesv1.WorkspaceClassSpec{
			ResourceInjection: &workspacesv1.ResourceInjection{CPU: []string{"_exalsius.cpu"}}},
			reason: workspacesv1.ReasonInvalidInjectionPath, message: "_exalsius"},
		{name: "same value spelled twice", spec: workspacesv1.WorkspaceClassSpec{
			ResourceInjection: &workspacesv1.ResourceInjection{CPU: []string{"a.b"}, Memory: []string{`a["b"]`}}},
			reason: workspacesv1.ReasonInvalidInjectionPath, message: "spec.resourceInjection.memory[0]: Invalid value: \"a.b\": names the same value as spec.resourceInjection.cpu[0]"},
		{name: "leaf holds a map", spec: workspacesv1.WorkspaceClassSpec{
			ResourceInjection: &workspacesv1.ResourceInjection{CPU: []string{"a.b"}, Memory: []string{"a.b.c"}}},
			reason: workspacesv1.ReasonInvalidInjectionPath, message: "overlaps spec.resourceInjection.cpu[0] (a.b): one value would overwrite the other"},
		{name: "map holds a leaf", spec: workspacesv1.WorkspaceClassSpec{
			ResourceInjection: &workspacesv1.ResourceInjection{Memory: []string{"a.b.c"}, CPU: []string{"a.b"}}},
			reason: workspacesv1.ReasonInvalidInjectionPath, message: "overlaps spec.resourceInjection.cpu[0] (a.b)"},
		{name: "helmValuePath does not parse", spec: workspacesv1.WorkspaceClassSpec{
			UserFacingConfig: []workspacesv1.UserFacingConfig{{HelmValuePath: "a.b"}, {HelmValuePath: `x["y`}}},
			reason: workspacesv1.ReasonInvalidValuePath, message: "spec.userFacingConfig[1].helmValuePath"},
		{name: "an injection problem is named first", spec: workspacesv1.WorkspaceClassSpec{
			ResourceInjection: &workspacesv1.ResourceInjection{CPU: []string{"a.b"}, Memory: []string{"a.b"}},
			UserFacingConfig:  []workspacesv1.UserFacingConfig{{HelmValuePath: `x["y`}}},
			reason: workspacesv1.ReasonInvalidInjectionPath, message: "spec.resourceInjection.memory[0]"},
		// What the webhook denied and the controller accepted before both applied one rule.
		{name: "helmValuePath into _exalsius", spec: workspacesv1.WorkspaceClassSpec{
			UserFacingConfig: []workspacesv1.UserFacingConfig{{HelmValuePath: "_exalsius.resources"}}},
			reason: workspacesv1.ReasonInvalidValuePath, message: "spec.userFacingConfig[0].helmValuePath: Forbidden: the _exalsius values block"},
		{name: "helmValuePath names an injection path", spec: workspacesv1.WorkspaceClassSpec{
			ResourceInjection: &workspacesv1.ResourceInjection{Replicas: []string{"replicaCount"}},
			UserFacingConfig:  []workspacesv1.UserFacingConfig{{HelmValuePath: `["replicaCount"]`}}},
			reason: workspacesv1.ReasonInvalidValuePath, message: "spec.userFacingConfig[0].helmValuePath: Invalid value: \"replicaCount\": names the same value as spec.resourceInjection.replicas[0]"},
		{name: "helmValuePath inside an injection path", spec: workspacesv1.WorkspaceClassSpec{
			ResourceInjection: &workspacesv1.ResourceInjection{CPU: []string{"resources"}},
			UserFacingConfig:  []workspacesv1.UserFacingConfig{{HelmValuePath: "resources.limits.cpu"}}},
			reason: workspacesv1.ReasonInvalidValuePath, message: "overlaps spec.resourceInjection.cpu[0] (resources)"},
		{name: "two helmValuePaths nested", spec: workspacesv1.WorkspaceClassSpec{
			UserFacingConfig: []workspacesv1.UserFacingConfig{{HelmValuePath: "auth.password"}, {HelmValuePath: "auth"}}},
			reason: workspacesv1.ReasonInvalidValuePath, message: "spec.userFacingConfig[1].helmValuePath"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := checkValuePaths(&tc.spec)
			switch {
			case tc.reason == "" && p != nil:
				t.Errorf("got %+v, want no problem", *p)
			case tc.reason != "" && p == nil:
				t.Errorf("no problem, want %s containing %q", tc.reason, tc.message)
			case tc.reason != "" && (p.reason != tc.reason || !strings.Contains(p.message, tc.message)):
				t.Errorf("got %s: %s\nwant %s containing %q", p.reason, p.message, tc.reason, tc.message)
			}
		})
	}
}
