package prerequisites

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// The prerequisite collector wakes for what changes a cluster's prerequisite use, not for status churn.
func TestChangesPrerequisiteUse(t *testing.T) {
	base := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "nb"},
		Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: "jupyter", ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "cd"}}}
	p := changesPrerequisiteUse{}
	for _, c := range []struct {
		name   string
		change func(*workspacesv1.WorkspaceDeployment)
		want   bool
	}{
		{"status", func(w *workspacesv1.WorkspaceDeployment) { w.Status.Phase = workspacesv1.PhaseRunning }, false},
		{"class", func(w *workspacesv1.WorkspaceDeployment) { w.Spec.WorkspaceClassRef = "vllm" }, true},
		{"cluster", func(w *workspacesv1.WorkspaceDeployment) { w.Spec.ClusterDeploymentRef.Name = "other" }, true},
		{"deletion", func(w *workspacesv1.WorkspaceDeployment) { now := metav1.Now(); w.DeletionTimestamp = &now }, true},
	} {
		n := base.DeepCopy()
		c.change(n)
		if got := p.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: n}); got != c.want {
			t.Errorf("%s: Update = %v, want %v", c.name, got, c.want)
		}
	}
	if !p.Create(event.CreateEvent{Object: base}) || !p.Delete(event.DeleteEvent{Object: base}) {
		t.Error("a workspace made or gone must wake the collector")
	}
}

// A service the Colony put on the ClusterDeployment counts only for the exact template: from
// spec.serviceSpec (its state from status.services, Pending until reported; a disabled one never),
// else a Deployed entry of status.services.
func TestColonyService(t *testing.T) {
	cd := &k0rdentv1beta1.ClusterDeployment{}
	cd.Spec.ServiceSpec.Services = []k0rdentv1beta1.Service{
		{Name: "gpu-operator", Template: "gpu-operator-v25-3-0"},
		{Name: "off", Namespace: "off", Template: "disabled-v1", Disable: true},
		{Name: "certs", Namespace: "cert-manager", Template: "cert-manager-v1-16-0"},
	}
	cd.Status.Services = []k0rdentv1beta1.ServiceState{
		{Name: "certs", Namespace: "cert-manager", Template: "cert-manager-v1-16-0", State: k0rdentv1beta1.ServiceStateDeployed},
		{Name: "gpu-operator", Namespace: "elsewhere", Template: "gpu-operator-v25-3-0", State: k0rdentv1beta1.ServiceStateFailed},
		{Name: "ingress", Namespace: "ingress", Template: "ingress-v4", State: k0rdentv1beta1.ServiceStateDeployed},
		{Name: "dns", Namespace: "dns", Template: "dns-v1", State: k0rdentv1beta1.ServiceStateProvisioning},
	}
	for _, c := range []struct {
		template string
		ok       bool
		want     providedService
	}{
		// In the spec without a namespace: "default"; the Failed state of the same name in another
		// namespace is not its own.
		{"gpu-operator-v25-3-0", true, providedService{namespace: "default", state: string(k0rdentv1beta1.ServiceStatePending)}},
		{"cert-manager-v1-16-0", true, providedService{namespace: "cert-manager", state: string(k0rdentv1beta1.ServiceStateDeployed)}},
		{"disabled-v1", false, providedService{}},
		// Only in the status: counted when Deployed.
		{"ingress-v4", true, providedService{namespace: "ingress", state: string(k0rdentv1beta1.ServiceStateDeployed)}},
		{"dns-v1", false, providedService{}},
		// Templates are versioned by name: another version is another template.
		{"gpu-operator-v25-3-1", false, providedService{}},
	} {
		got, ok := colonyService(cd, c.template)
		if ok != c.ok || got != c.want {
			t.Errorf("%s: colonyService = %+v, %v; want %+v, %v", c.template, got, ok, c.want, c.ok)
		}
	}
}

// A prerequisite's values reach the shared ServiceSet as YAML with template delimiters escaped; none
// (absent, empty or null) are no values.
func TestValuesYAML(t *testing.T) {
	p := func(raw string) workspacesv1.Prerequisite {
		p := workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: "gpu-operator-v25-3-0"}}
		if raw != "-" {
			p.Values = &apiextensionsv1.JSON{Raw: []byte(raw)}
		}
		return p
	}
	for _, raw := range []string{"-", "", "null"} {
		if got, err := valuesYAML(p(raw)); err != nil || got != "" {
			t.Errorf("values %q: %q, %v; want none", raw, got, err)
		}
	}
	got, err := valuesYAML(p(`{"driver":{"enabled":false},"name":"{{ .Release.Name }}"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "driver:\n  enabled: false\nname: '{{\"{{\"}} .Release.Name }}'\n"; got != want {
		t.Errorf("values YAML %q, want %q", got, want)
	}
	if _, err := valuesYAML(p(`{"driver":`)); err == nil || !strings.Contains(err.Error(), "gpu-operator-v25-3-0") {
		t.Errorf("invalid values: %v, want an error naming the prerequisite", err)
	}
}

// Ready holds only without conflicts, failures and pending prerequisites.
func TestResultReady(t *testing.T) {
	if !(Result{}).Ready() {
		t.Error("an empty result is not ready")
	}
	for _, r := range []Result{{Conflicts: []string{"x"}}, {Failed: []string{"x"}}, {Pending: []string{"x"}}} {
		if r.Ready() {
			t.Errorf("%+v is ready", r)
		}
	}
}

// The collector's ServiceSet watch passes shared prerequisite ServiceSets only.
func TestIsPrerequisite(t *testing.T) {
	ss := &k0rdentv1beta1.ServiceSet{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{workspacesv1.ClusterDeploymentLabel: "cd"}}}
	if isPrerequisite(ss) {
		t.Error("a workspace's ServiceSet passes")
	}
	ss.Labels[workspacesv1.PrerequisiteLabel] = "gpu-operator"
	if !isPrerequisite(ss) {
		t.Error("a prerequisite ServiceSet does not pass")
	}
}
