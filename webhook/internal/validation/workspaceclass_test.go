package validation

import (
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

const testKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@host"

func validClass() *workspacesv1.WorkspaceClass {
	return &workspacesv1.WorkspaceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "jupyter-notebook-0-3-0"},
		Spec: workspacesv1.WorkspaceClassSpec{
			DisplayName:     "Jupyter",
			ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: "jupyter-0-3-0", VersionConstraint: ">=0.3.0, <0.4.0"},
			DefaultResources: workspacesv1.DefaultResources{Replicas: ptr(int32(1)), PerReplica: &workspacesv1.PerReplicaResources{
				CPU: ptr(resource.MustParse("2")), Memory: ptr(resource.MustParse("8Gi")), GPUCount: ptr(int32(1)), GPUVendor: workspacesv1.GPUVendorNVIDIA}},
			Prerequisites:   []workspacesv1.Prerequisite{{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: "gpu-operator", VersionConstraint: ">=1.0.0"}, Namespace: "gpu-operator"}, {ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: "llm-d-infra-0-3-0"}}},
			AccessEndpoints: []workspacesv1.AccessEndpoint{{Name: "web", Protocol: "HTTP", Port: 8888}, {Name: "ssh", Protocol: "SSH", Port: 22}},
			UserFacingConfig: []workspacesv1.UserFacingConfig{
				{HelmValuePath: "auth.password", DisplayName: "Password", Type: "secret", Required: true},
				{HelmValuePath: "server.port", DisplayName: "Port", Type: "int", Default: raw(8888)},
				{HelmValuePath: "profile", DisplayName: "Profile", Type: "string", Options: []apiextensionsv1.JSON{*raw("small"), *raw("large")}, Default: raw("small")},
				{HelmValuePath: "ssh.key", DisplayName: "Key", Type: "publicKey"},
				{HelmValuePath: `labels["app.kubernetes.io/debug"]`, DisplayName: "Debug", Type: "bool", Default: raw(false)},
			},
			DeployTimeout:     &metav1.Duration{Duration: 15 * time.Minute},
			DefaultValues:     raw(map[string]any{"server": map[string]any{"port": 8888}, "profile": "large"}),
			ResourceInjection: &workspacesv1.ResourceInjection{Replicas: []string{"replicaCount"}, GPUCount: []string{`resources.limits["nvidia.com/gpu"]`}},
		},
	}
}

func TestWorkspaceClassValid(t *testing.T) {
	expectPaths(t, WorkspaceClass(validClass()))
}

func TestWorkspaceClassRules(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*workspacesv1.WorkspaceClassSpec)
		paths  []string
	}{
		{"blank display name", func(s *workspacesv1.WorkspaceClassSpec) { s.DisplayName = " " }, []string{"spec.displayName"}},
		{"bad version range", func(s *workspacesv1.WorkspaceClassSpec) { s.ServiceTemplate.VersionConstraint = "banana" }, []string{"spec.serviceTemplate.versionConstraint"}},
		{"bad template name", func(s *workspacesv1.WorkspaceClassSpec) { s.ServiceTemplate.Name = "Bad_Name" }, []string{"spec.serviceTemplate.name"}},
		{"zero cpu", func(s *workspacesv1.WorkspaceClassSpec) {
			s.DefaultResources.PerReplica.CPU = ptr(resource.MustParse("0"))
		}, []string{"spec.defaultResources.perReplica.cpu"}},
		{"negative memory", func(s *workspacesv1.WorkspaceClassSpec) {
			s.DefaultResources.PerReplica.Memory = ptr(resource.MustParse("-1Gi"))
		}, []string{"spec.defaultResources.perReplica.memory"}},
		{"class gpuType", func(s *workspacesv1.WorkspaceClassSpec) { s.DefaultResources.PerReplica.GPUType = "A100" }, []string{"spec.defaultResources.perReplica.gpuType"}},
		{"enforcedValues into _exalsius", func(s *workspacesv1.WorkspaceClassSpec) {
			s.EnforcedValues = raw(map[string]any{workspacesv1.ExalsiusValuesKey: map[string]any{"x": 1}})
		}, []string{"spec.enforcedValues._exalsius"}},
		{"allowedNamespaces operator", func(s *workspacesv1.WorkspaceClassSpec) {
			s.AllowedNamespaces = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}
		}, []string{"spec.allowedNamespaces.matchExpressions[0].operator"}},
		{"allowedNamespaces label", func(s *workspacesv1.WorkspaceClassSpec) {
			s.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
		}, []string{"spec.allowedNamespaces.matchLabels"}},
		{"networkPolicy peer with ipBlock and a selector", func(s *workspacesv1.WorkspaceClassSpec) {
			s.NetworkPolicy = &workspacesv1.ReleaseNetworkPolicy{AllowFrom: []networkingv1.NetworkPolicyPeer{
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "monitoring"}}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}, PodSelector: &metav1.LabelSelector{}}}}
		}, []string{"spec.networkPolicy.allowFrom[1]"}},
		{"networkPolicy peer with nothing, a bad CIDR, a bad except and a bad selector", func(s *workspacesv1.WorkspaceClassSpec) {
			s.NetworkPolicy = &workspacesv1.ReleaseNetworkPolicy{AllowFrom: []networkingv1.NetworkPolicyPeer{
				{},
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/33"}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"192.168.0.0/16"}}},
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}}}}
		}, []string{"spec.networkPolicy.allowFrom[0]", "spec.networkPolicy.allowFrom[1].ipBlock.cidr",
			"spec.networkPolicy.allowFrom[2].ipBlock.except[0]", "spec.networkPolicy.allowFrom[3].podSelector.matchLabels"}},
		{"class gpuNodeSelector", func(s *workspacesv1.WorkspaceClassSpec) {
			s.DefaultResources.PerReplica.GPUNodeSelector = map[string]string{"a": "b"}
		}, []string{"spec.defaultResources.perReplica.gpuNodeSelector"}},
		{"zero replicas", func(s *workspacesv1.WorkspaceClassSpec) { s.DefaultResources.Replicas = ptr(int32(0)) }, []string{"spec.defaultResources.replicas"}},
		{"duplicate prerequisite", func(s *workspacesv1.WorkspaceClassSpec) {
			s.Prerequisites = append(s.Prerequisites, workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: "gpu-operator"}, Namespace: "other"})
		}, []string{"spec.prerequisites[2].serviceTemplate.name"}},
		{"self prerequisite", func(s *workspacesv1.WorkspaceClassSpec) { s.Prerequisites[0].ServiceTemplate.Name = "jupyter-0-3-0" }, []string{"spec.prerequisites[0].serviceTemplate.name"}},
		{"prerequisite without template name", func(s *workspacesv1.WorkspaceClassSpec) { s.Prerequisites[1].ServiceTemplate.Name = "" }, []string{"spec.prerequisites[1].serviceTemplate.name"}},
		{"prerequisite bad version range", func(s *workspacesv1.WorkspaceClassSpec) {
			s.Prerequisites[0].ServiceTemplate.VersionConstraint = "banana"
		}, []string{"spec.prerequisites[0].serviceTemplate.versionConstraint"}},
		{"prerequisite bad template namespace", func(s *workspacesv1.WorkspaceClassSpec) { s.Prerequisites[1].ServiceTemplate.Namespace = "Bad_NS" }, []string{"spec.prerequisites[1].serviceTemplate.namespace"}},
		{"prerequisite bad release namespace", func(s *workspacesv1.WorkspaceClassSpec) { s.Prerequisites[0].Namespace = "Bad_NS" }, []string{"spec.prerequisites[0].namespace"}},
		{"duplicate endpoint name", func(s *workspacesv1.WorkspaceClassSpec) { s.AccessEndpoints[1].Name = "web" }, []string{"spec.accessEndpoints[1].name"}},
		{"duplicate endpoint port", func(s *workspacesv1.WorkspaceClassSpec) { s.AccessEndpoints[1].Port = 8888 }, []string{"spec.accessEndpoints[1].port"}},
		{"endpoint port out of range", func(s *workspacesv1.WorkspaceClassSpec) { s.AccessEndpoints[0].Port = 70000 }, []string{"spec.accessEndpoints[0].port"}},
		{"endpoint protocol", func(s *workspacesv1.WorkspaceClassSpec) { s.AccessEndpoints[0].Protocol = "UDP" }, []string{"spec.accessEndpoints[0].protocol"}},
		{"injection path does not parse", func(s *workspacesv1.WorkspaceClassSpec) { s.ResourceInjection.CPU = []string{"a..b"} }, []string{"spec.resourceInjection.cpu[0]"}},
		{"injection into _exalsius", func(s *workspacesv1.WorkspaceClassSpec) { s.ResourceInjection.Memory = []string{"_exalsius.x"} }, []string{"spec.resourceInjection.memory[0]"}},
		{"injection paths collide", func(s *workspacesv1.WorkspaceClassSpec) { s.ResourceInjection.Storage = []string{"replicaCount"} }, []string{"spec.resourceInjection.storage[0]"}},
		{"injection paths overlap", func(s *workspacesv1.WorkspaceClassSpec) { s.ResourceInjection.CPU = []string{"replicaCount.cpu"} }, []string{"spec.resourceInjection.cpu[0]"}},
		{"config path equals injection path", func(s *workspacesv1.WorkspaceClassSpec) { s.UserFacingConfig[3].HelmValuePath = "replicaCount" }, []string{"spec.userFacingConfig[3].helmValuePath"}},
		{"config path spelled twice", func(s *workspacesv1.WorkspaceClassSpec) { s.UserFacingConfig[3].HelmValuePath = `["server"].port` }, []string{"spec.defaultValues.server.port", "spec.userFacingConfig[3].helmValuePath"}},
		{"int default is a string", func(s *workspacesv1.WorkspaceClassSpec) { s.UserFacingConfig[1].Default = raw("eighty") }, []string{"spec.userFacingConfig[1].default"}},
		{"int default has a fraction", func(s *workspacesv1.WorkspaceClassSpec) { s.UserFacingConfig[1].Default = raw(1.5) }, []string{"spec.userFacingConfig[1].default"}},
		{"default not an option", func(s *workspacesv1.WorkspaceClassSpec) { s.UserFacingConfig[2].Default = raw("medium") }, []string{"spec.userFacingConfig[2].default"}},
		{"option of the wrong type", func(s *workspacesv1.WorkspaceClassSpec) { s.UserFacingConfig[2].Options[1] = *raw(3) }, []string{"spec.defaultValues.profile", "spec.userFacingConfig[2].options[1]"}},
		{"duplicate option", func(s *workspacesv1.WorkspaceClassSpec) { s.UserFacingConfig[2].Options[1] = *raw("small") }, []string{"spec.defaultValues.profile", "spec.userFacingConfig[2].options[1]"}},
		{"secret default", func(s *workspacesv1.WorkspaceClassSpec) { s.UserFacingConfig[0].Default = raw("hunter2") }, []string{"spec.userFacingConfig[0].default"}},
		{"secret options", func(s *workspacesv1.WorkspaceClassSpec) {
			s.UserFacingConfig[0].Options = []apiextensionsv1.JSON{*raw("a")}
		}, []string{"spec.userFacingConfig[0].options"}},
		{"bad public key default", func(s *workspacesv1.WorkspaceClassSpec) { s.UserFacingConfig[3].Default = raw("ssh-ed25519 !!!") }, []string{"spec.userFacingConfig[3].default"}},
		{"bool default", func(s *workspacesv1.WorkspaceClassSpec) { s.UserFacingConfig[4].Default = raw("yes") }, []string{"spec.userFacingConfig[4].default"}},
		{"defaultValues mismatch type", func(s *workspacesv1.WorkspaceClassSpec) {
			s.DefaultValues = raw(map[string]any{"server": map[string]any{"port": "x"}})
		}, []string{"spec.defaultValues.server.port"}},
		{"defaultValues holds a secret", func(s *workspacesv1.WorkspaceClassSpec) {
			s.DefaultValues = raw(map[string]any{"auth": map[string]any{"password": "x"}})
		}, []string{"spec.defaultValues.auth.password"}},
		{"defaultValues in the operator block", func(s *workspacesv1.WorkspaceClassSpec) {
			s.DefaultValues = raw(map[string]any{"_exalsius": map[string]any{"resources": map[string]any{"replicas": 3}}})
		}, []string{"spec.defaultValues._exalsius"}},
		{"defaultValues not an option", func(s *workspacesv1.WorkspaceClassSpec) { s.DefaultValues = raw(map[string]any{"profile": "huge"}) }, []string{"spec.defaultValues.profile"}},
		{"zero deploy timeout", func(s *workspacesv1.WorkspaceClassSpec) { s.DeployTimeout = &metav1.Duration{} }, []string{"spec.deployTimeout"}},
		{"unknown type", func(s *workspacesv1.WorkspaceClassSpec) { s.UserFacingConfig[1].Type = "float" }, []string{"spec.userFacingConfig[1].type"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wc := validClass()
			tc.mutate(&wc.Spec)
			expectPaths(t, WorkspaceClass(wc), tc.paths...)
		})
	}
}

func TestWorkspaceClassSecretsNeverEchoed(t *testing.T) {
	wc := validClass()
	wc.Spec.UserFacingConfig[0].Default = raw("hunter2-secret")
	wc.Spec.DefaultValues = raw(map[string]any{"auth": map[string]any{"password": "hunter2-secret"}})
	errs := WorkspaceClass(wc)
	if len(errs) == 0 || strings.Contains(errs.ToAggregate().Error(), "hunter2") {
		t.Fatalf("want denials without the secret, got %v", errs)
	}
}

func TestWorkspaceClassUpdate(t *testing.T) {
	oldWC := validClass()
	same := validClass()
	same.Labels = map[string]string{"new": "label"}
	expectPaths(t, WorkspaceClassUpdate(oldWC, same))
	changed := validClass()
	changed.Spec.DisplayName = "Other"
	errs := WorkspaceClassUpdate(oldWC, changed)
	expectPaths(t, errs, "spec")
	if !strings.Contains(errs[0].Detail, "publish a new WorkspaceClass") {
		t.Fatalf("the denial must say to publish a new class: %v", errs)
	}
}

func TestDeterministicOrder(t *testing.T) {
	wc := validClass()
	wc.Spec.DisplayName = ""
	wc.Spec.ServiceTemplate.VersionConstraint = "x"
	wc.Spec.AccessEndpoints[1].Port = 8888
	first := WorkspaceClass(wc).ToAggregate().Error()
	for range 20 {
		if got := WorkspaceClass(wc).ToAggregate().Error(); got != first {
			t.Fatalf("denials differ between calls:\n%s\n%s", first, got)
		}
	}
}
