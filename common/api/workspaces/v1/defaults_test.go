package v1

import (
	"os"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The CRD's defaults (from the +kubebuilder:default markers) and the Go constants the controller
// falls back to are the same durations.
func TestTimeoutDefaultsMatchTheCRD(t *testing.T) {
	b, err := os.ReadFile("../../../config/crd/bases/workspaces.exalsius.ai_workspaceclasses.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	for field, want := range map[string]time.Duration{
		"deployTimeout":             DefaultDeployTimeout,
		"prerequisiteDeployTimeout": DefaultPrerequisiteDeployTimeout,
	} {
		def := spec.Properties[field].Default
		if def == nil {
			t.Errorf("spec.%s has no default in the CRD", field)
			continue
		}
		var s string
		if err := yaml.Unmarshal(def.Raw, &s); err != nil {
			t.Fatalf("spec.%s default %s: %v", field, def.Raw, err)
		}
		if got, err := time.ParseDuration(s); err != nil || got != want {
			t.Errorf("spec.%s: CRD default %q, Go default %s", field, s, want)
		}
	}
}

func TestTimeoutOrDefault(t *testing.T) {
	var s WorkspaceClassSpec
	if s.DeployTimeoutOrDefault() != DefaultDeployTimeout || s.PrerequisiteDeployTimeoutOrDefault() != DefaultPrerequisiteDeployTimeout {
		t.Errorf("unset: %s, %s", s.DeployTimeoutOrDefault(), s.PrerequisiteDeployTimeoutOrDefault())
	}
	s.DeployTimeout, s.PrerequisiteDeployTimeout = &metav1.Duration{}, &metav1.Duration{Duration: -time.Second}
	if s.DeployTimeoutOrDefault() != DefaultDeployTimeout || s.PrerequisiteDeployTimeoutOrDefault() != DefaultPrerequisiteDeployTimeout {
		t.Errorf("not positive: %s, %s", s.DeployTimeoutOrDefault(), s.PrerequisiteDeployTimeoutOrDefault())
	}
	s.DeployTimeout, s.PrerequisiteDeployTimeout = &metav1.Duration{Duration: time.Hour}, &metav1.Duration{Duration: time.Minute}
	if s.DeployTimeoutOrDefault() != time.Hour || s.PrerequisiteDeployTimeoutOrDefault() != time.Minute {
		t.Errorf("set: %s, %s", s.DeployTimeoutOrDefault(), s.PrerequisiteDeployTimeoutOrDefault())
	}
}
