package validation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/valuepath"
)

func validDeployment() *workspacesv1.WorkspaceDeployment {
	return &workspacesv1.WorkspaceDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-notebook", Namespace: "team-a"},
		Spec: workspacesv1.WorkspaceDeploymentSpec{
			WorkspaceClassRef:    "jupyter-notebook-0-3-0",
			ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "gpu-cluster"},
			Resources: &workspacesv1.ResourceOverrides{Replicas: ptr(int32(2)), PerReplica: &workspacesv1.PerReplicaResources{
				CPU: ptr(resource.MustParse("4")), GPUCount: ptr(int32(2)), GPUVendor: workspacesv1.GPUVendorNVIDIA, GPUType: "A100-80GB",
				GPUNodeSelector: map[string]string{gpu.LabelNVIDIAProduct: "NVIDIA-A100-SXM4-80GB"}}},
			Values: raw(map[string]any{"auth": map[string]any{"password": "s3cret"}, "server": map[string]any{"port": 9000},
				"profile": "large", "ssh": map[string]any{"key": testKey}, "labels": map[string]any{"app.kubernetes.io/debug": true}}),
		},
	}
}

func TestWorkspaceDeploymentValid(t *testing.T) {
	errs, warnings := WorkspaceDeployment(validDeployment(), validClass(), DeploymentOptions{})
	expectPaths(t, errs)
	if len(warnings) != 0 {
		t.Fatalf("unexpected warnings %v", warnings)
	}
	// Without the class only the class-independent rules apply.
	d := validDeployment()
	d.Spec.Values = nil
	errs, _ = WorkspaceDeployment(d, nil, DeploymentOptions{})
	expectPaths(t, errs)
}

func TestWorkspaceDeploymentRules(t *testing.T) {
	cases := []struct {
		name   string
		opts   DeploymentOptions
		mutate func(*workspacesv1.WorkspaceDeployment)
		paths  []string
	}{
		{"name too long", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) { d.Name = strings.Repeat("a", 61) }, []string{"metadata.name"}},
		{"bad class name", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) { d.Spec.WorkspaceClassRef = "Bad_Class" }, []string{"spec.workspaceClassRef"}},
		{"missing cluster", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) { d.Spec.ClusterDeploymentRef.Name = "" }, []string{"spec.clusterDeploymentRef.name"}},
		{"bad cluster namespace", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) { d.Spec.ClusterDeploymentRef.Namespace = "A.B" }, []string{"spec.clusterDeploymentRef.namespace"}},
		{"replicas over the maximum", DeploymentOptions{MaxReplicas: 1}, func(*workspacesv1.WorkspaceDeployment) {}, []string{"spec.resources.replicas"}},
		{"zero cpu", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.Resources.PerReplica.CPU = ptr(resource.MustParse("0"))
		}, []string{"spec.resources.perReplica.cpu"}},
		{"negative storage", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.Resources.PerReplica.Storage = ptr(resource.MustParse("-5Gi"))
		}, []string{"spec.resources.perReplica.storage"}},
		{"gpuType without GPUs", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.Resources.PerReplica.GPUCount = ptr(int32(0))
		}, []string{"spec.resources.perReplica.gpuNodeSelector", "spec.resources.perReplica.gpuType"}},
		{"gpuType not a label value", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) { d.Spec.Resources.PerReplica.GPUType = "A100 80GB" }, []string{"spec.resources.perReplica.gpuType"}},
		{"selector key", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.Resources.PerReplica.GPUNodeSelector = map[string]string{"bad key": "x"}
		}, []string{"spec.resources.perReplica.gpuNodeSelector"}},
		{"selector value", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.Resources.PerReplica.GPUNodeSelector = map[string]string{"gpu": "bad value!"}
		}, []string{"spec.resources.perReplica.gpuNodeSelector[gpu]"}},
		{"selector contradicts gpuType", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.Resources.PerReplica.GPUNodeSelector = map[string]string{gpu.LabelGPUModel: "H100"}
		}, []string{"spec.resources.perReplica.gpuNodeSelector[exalsius.ai/gpu-model]"}},
		{"vendor differs from the class", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.Resources.PerReplica.GPUVendor = workspacesv1.GPUVendorAMD
		}, []string{"spec.resources.perReplica.gpuVendor"}},
		{"required value missing", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) { d.Spec.Values = raw(map[string]any{}) }, []string{"spec.values.auth.password"}},
		{"required value null", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.Values = raw(map[string]any{"auth": map[string]any{"password": nil}})
		}, []string{"spec.values.auth.password"}},
		{"int value is a string", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.Values = raw(map[string]any{"auth": map[string]any{"password": "x"}, "server": map[string]any{"port": "80"}})
		}, []string{"spec.values.server.port"}},
		{"value not an option", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.Values = raw(map[string]any{"auth": map[string]any{"password": "x"}, "profile": "medium"})
		}, []string{"spec.values.profile"}},
		{"bad public key", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.Values = raw(map[string]any{"auth": map[string]any{"password": "x"}, "ssh": map[string]any{"key": "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"}})
		}, []string{"spec.values.ssh.key"}},
		{"bool value with a dotted key", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.Values = raw(map[string]any{"auth": map[string]any{"password": "x"}, "labels": map[string]any{"app.kubernetes.io/debug": "yes"}})
		}, []string{"spec.values.labels[app.kubernetes.io/debug]"}},
		{"operator block", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.Values = raw(map[string]any{"auth": map[string]any{"password": "x"}, "_exalsius": map[string]any{}})
		}, []string{"spec.values._exalsius"}},
		{"values not an object", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) { d.Spec.Values = raw([]string{"a"}) }, []string{"spec.values"}},
		{"valuesFrom unknown kind", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.ValuesFrom = []workspacesv1.ValuesFromSource{{Kind: "Vault", Name: "pw"}}
		}, []string{"spec.valuesFrom[0].kind"}},
		{"valuesFrom bad name", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.ValuesFrom = []workspacesv1.ValuesFromSource{{Kind: "Secret", Name: "Bad_Name"}}
		}, []string{"spec.valuesFrom[0].name"}},
		{"stopAfter zero", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.StopAfter = &metav1.Duration{}
		}, []string{"spec.stopAfter"}},
		{"stopAfter negative", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.StopAfter = &metav1.Duration{Duration: -time.Hour}
		}, []string{"spec.stopAfter"}},
		{"valuesFrom twice", DeploymentOptions{}, func(d *workspacesv1.WorkspaceDeployment) {
			d.Spec.ValuesFrom = []workspacesv1.ValuesFromSource{{Kind: "Secret", Name: "pw"}, {Kind: "ConfigMap", Name: "pw"}, {Kind: "Secret", Name: "pw"}}
		}, []string{"spec.valuesFrom[2]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := validDeployment()
			tc.mutate(d)
			errs, _ := WorkspaceDeployment(d, validClass(), tc.opts)
			expectPaths(t, errs, tc.paths...)
		})
	}
}

// A required value may come from spec.valuesFrom, which only the controller reads.
func TestWorkspaceDeploymentRequiredFromValuesFrom(t *testing.T) {
	d := validDeployment()
	d.Spec.Values = raw(map[string]any{})
	d.Spec.ValuesFrom = []workspacesv1.ValuesFromSource{{Kind: workspacesv1.ValuesSourceSecret, Name: "notebook-password"}}
	errs, _ := WorkspaceDeployment(d, validClass(), DeploymentOptions{})
	expectPaths(t, errs)
}

func TestWorkspaceDeploymentSecretNeverEchoed(t *testing.T) {
	d := validDeployment()
	d.Spec.Values = raw(map[string]any{"auth": map[string]any{"password": 424242}})
	errs, _ := WorkspaceDeployment(d, validClass(), DeploymentOptions{})
	expectPaths(t, errs, "spec.values.auth.password")
	if strings.Contains(errs.ToAggregate().Error(), "424242") {
		t.Fatalf("the denial shows the secret: %v", errs)
	}
}

func TestWorkspaceDeploymentInjectionWarning(t *testing.T) {
	d := validDeployment()
	d.Spec.Values = raw(map[string]any{"auth": map[string]any{"password": "x"}, "replicaCount": 3})
	errs, warnings := WorkspaceDeployment(d, validClass(), DeploymentOptions{})
	expectPaths(t, errs)
	if len(warnings) != 1 || !strings.Contains(warnings[0], "spec.values.replicaCount") {
		t.Fatalf("want one warning naming spec.values.replicaCount, got %v", warnings)
	}
}

func TestOnlyStoppedChanged(t *testing.T) {
	oldD := validDeployment()
	newD := validDeployment()
	if OnlyStoppedChanged(oldD, newD) {
		t.Error("no change taken for a stop")
	}
	newD.Spec.Stopped = true
	if !OnlyStoppedChanged(oldD, newD) {
		t.Error("a stop not recognised")
	}
	if !OnlyStoppedChanged(newD, oldD) {
		t.Error("a start not recognised")
	}
	newD.Spec.StopAfter = &metav1.Duration{Duration: -time.Hour}
	if OnlyStoppedChanged(oldD, newD) {
		t.Error("a stop with another spec change taken for a stop only")
	}
}

func TestWorkspaceDeploymentUpdate(t *testing.T) {
	oldD := validDeployment()
	newD := validDeployment()
	newD.Spec.Suspend = true
	expectPaths(t, WorkspaceDeploymentUpdate(oldD, newD))
	newD.Spec.ClusterDeploymentRef.Namespace = "team-a" // the same as the own namespace
	expectPaths(t, WorkspaceDeploymentUpdate(oldD, newD))
	newD.Spec.WorkspaceClassRef = "other"
	newD.Spec.ClusterDeploymentRef = workspacesv1.ClusterDeploymentRef{Name: "other", Namespace: "team-b"}
	errs := WorkspaceDeploymentUpdate(oldD, newD)
	expectPaths(t, errs, "spec.clusterDeploymentRef.name", "spec.clusterDeploymentRef.namespace", "spec.workspaceClassRef")
	// The refusal of another class says what to do instead, as docs/WEBHOOK.md promises (the CRD's
	// CEL rule says the same; common/testing/crdtests checks it).
	for _, err := range errs {
		if err.Field != "spec.workspaceClassRef" {
			continue
		}
		for _, want := range []string{"delete the WorkspaceDeployment and create it again with the new class", "its volumes go with it", "create another WorkspaceDeployment beside it", "stop and start keep the class"} {
			if !strings.Contains(err.Detail, want) {
				t.Errorf("the refusal of another class does not say %q: %s", want, err.Detail)
			}
		}
	}
}

func TestValuesFromToReview(t *testing.T) {
	sec := func(n string) workspacesv1.ValuesFromSource {
		return workspacesv1.ValuesFromSource{Kind: workspacesv1.ValuesSourceSecret, Name: n}
	}
	cm := func(n string) workspacesv1.ValuesFromSource {
		return workspacesv1.ValuesFromSource{Kind: workspacesv1.ValuesSourceConfigMap, Name: n}
	}
	list := func(refs ...workspacesv1.ValuesFromSource) []workspacesv1.ValuesFromSource { return refs }
	cases := []struct {
		name     string
		old, new []workspacesv1.ValuesFromSource
		want     []int
	}{
		{"create: every source", nil, list(sec("a"), cm("b")), []int{0, 1}},
		{"create: none", nil, nil, nil},
		{"update keeps the sources", list(sec("a"), cm("b")), list(sec("a"), cm("b")), nil},
		{"update reorders and drops", list(sec("a"), cm("b"), sec("c")), list(cm("b"), sec("a")), nil},
		{"update marks a source optional", list(sec("a")), list(workspacesv1.ValuesFromSource{Kind: workspacesv1.ValuesSourceSecret, Name: "a", Optional: true}), nil},
		{"update adds a source", list(sec("a")), list(sec("a"), sec("b")), []int{1}},
		{"update renames a source", list(sec("a")), list(sec("a2")), []int{0}},
		{"a ConfigMap becomes a Secret of the same name", list(cm("a")), list(sec("a")), []int{0}},
		{"an unknown kind is left to the kind rule", nil, list(workspacesv1.ValuesFromSource{Kind: "Pod", Name: "a"}, sec("b")), []int{1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ValuesFromToReview(c.old, c.new)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("want %v, got %v", c.want, got)
			}
		})
	}
}

// TestWorkspaceDeploymentValuesLimits: spec.values over a limit of common/valuepath is denied naming
// spec.values and the limit, without quoting the values.
func TestWorkspaceDeploymentValuesLimits(t *testing.T) {
	deep := func(depth int) any {
		var v any = "s3cret"
		for range depth {
			v = map[string]any{"a": v}
		}
		return v
	}
	wide := map[string]any{}
	for i := range valuepath.MaxValuesLeaves + 1 {
		wide[fmt.Sprintf("k%d", i)] = "s3cret"
	}
	cases := map[string]struct {
		values map[string]any
		limit  string
	}{
		"depth":  {deep(valuepath.MaxValuesDepth + 1).(map[string]any), "depth"},
		"leaves": {wide, "leaves"},
		"size":   {map[string]any{"a": strings.Repeat("s3cret", valuepath.MaxValuesBytes/6)}, "size"},
	}
	for name, tc := range cases {
		d := validDeployment()
		d.Spec.Values = raw(tc.values)
		errs, _ := WorkspaceDeployment(d, validClass(), DeploymentOptions{})
		expectPaths(t, errs, "spec.values")
		if msg := errs.ToAggregate().Error(); !strings.Contains(msg, tc.limit+" limit") || strings.Contains(msg, "s3cret") {
			t.Errorf("%s: denial %q does not name the limit, or quotes the values", name, msg)
		}
	}
	// At the limits the values pass.
	d := validDeployment()
	d.Spec.Values = raw(map[string]any{"x": deep(valuepath.MaxValuesDepth - 1)})
	errs, _ := WorkspaceDeployment(d, nil, DeploymentOptions{})
	expectPaths(t, errs)
}

// TestWorkspaceDeploymentDeclaredValuesPolicy: under valuesPolicy Declared a value at a path the class
// does not declare is refused, naming the path and not the value; declared paths and what lies under
// them pass; the default policy accepts any path.
func TestWorkspaceDeploymentDeclaredValuesPolicy(t *testing.T) {
	class := validClass()
	class.Spec.ValuesPolicy = workspacesv1.ValuesPolicyDeclared
	errs, _ := WorkspaceDeployment(validDeployment(), class, DeploymentOptions{})
	expectPaths(t, errs)
	d := validDeployment()
	vals := map[string]any{"auth": map[string]any{"password": "s3cret"},
		"extraObjects": []any{map[string]any{"kind": "ClusterRoleBinding"}}, "namespaceOverride": "kube-system",
		"server": map[string]any{"port": 9000, "hostNetwork": true}}
	d.Spec.Values = raw(vals)
	errs, _ = WorkspaceDeployment(d, class, DeploymentOptions{})
	expectPaths(t, errs, "spec.values.extraObjects", "spec.values.namespaceOverride", "spec.values.server.hostNetwork")
	if msg := errs.ToAggregate().Error(); strings.Contains(msg, "kube-system") || strings.Contains(msg, "ClusterRoleBinding") || !strings.Contains(msg, "valuesPolicy is Declared") {
		t.Errorf("the denial quotes a value or does not name the policy: %v", msg)
	}
	class.Spec.ValuesPolicy = workspacesv1.ValuesPolicyAny
	errs, _ = WorkspaceDeployment(d, class, DeploymentOptions{})
	expectPaths(t, errs)
}

// TestWorkspaceDeploymentEnforcedValues: spec.values may not set what the class's enforcedValues set
// (nor a map above it); values beside them pass.
func TestWorkspaceDeploymentEnforcedValues(t *testing.T) {
	class := validClass()
	class.Spec.EnforcedValues = raw(map[string]any{"securityContext": map[string]any{"runAsNonRoot": true}})
	errs, _ := WorkspaceDeployment(validDeployment(), class, DeploymentOptions{})
	expectPaths(t, errs)
	d := validDeployment()
	d.Spec.Values = raw(map[string]any{"auth": map[string]any{"password": "s3cret"},
		"securityContext": map[string]any{"runAsNonRoot": false, "runAsUser": 1000}})
	errs, _ = WorkspaceDeployment(d, class, DeploymentOptions{})
	expectPaths(t, errs, "spec.values.securityContext.runAsNonRoot")
	d.Spec.Values = raw(map[string]any{"auth": map[string]any{"password": "s3cret"}, "securityContext": nil})
	errs, _ = WorkspaceDeployment(d, class, DeploymentOptions{})
	expectPaths(t, errs, "spec.values.securityContext")
}

// TestPublicKeyPlaceholderWarns: a key line whose key is a placeholder (as in the upstream operator's
// examples, `ssh-ed25519 AAAA...`) is admitted with a warning naming the path, as upstream admits it;
// anything else that is not a key is still refused.
func TestPublicKeyPlaceholderWarns(t *testing.T) {
	for _, key := range []string{"ssh-ed25519 AAAA...", "ssh-ed25519 AAAA user@host", "ssh-rsa AA"} {
		d := validDeployment()
		d.Spec.Values = raw(map[string]any{"auth": map[string]any{"password": "x"}, "ssh": map[string]any{"key": key}})
		errs, warnings := WorkspaceDeployment(d, validClass(), DeploymentOptions{})
		expectPaths(t, errs)
		if len(warnings) != 1 || !strings.Contains(warnings[0], "spec.values.ssh.key") || strings.Contains(warnings[0], key) {
			t.Errorf("%q: want one warning naming spec.values.ssh.key without the value, got %v", key, warnings)
		}
	}
	for _, key := range []string{"AAAA", "ssh-unknown AAAA...", "ssh-ed25519 AAAA...\nssh-ed25519 AAAA...", "ssh-ed25519"} {
		d := validDeployment()
		d.Spec.Values = raw(map[string]any{"auth": map[string]any{"password": "x"}, "ssh": map[string]any{"key": key}})
		errs, _ := WorkspaceDeployment(d, validClass(), DeploymentOptions{})
		expectPaths(t, errs, "spec.values.ssh.key")
	}
}
