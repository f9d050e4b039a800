package v1

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestColonyClusterCredential: the Credential an entry names, also when other fields come first, and
// "" for no spec, a spec without one, and a spec that does not parse.
func TestColonyClusterCredential(t *testing.T) {
	for raw, want := range map[string]string{
		``:                 "",
		`null`:             "",
		`{"template":"t"}`: "",
		`{"template":"t","credential":"cred-eu"}`:        "cred-eu",
		`{"credential":7}`:                               "",
		`{"config":{"credential":"x"},"credential":"y"}`: "y",
	} {
		c := ColonyCluster{ClusterName: "a", ClusterDeploymentSpec: apiextensionsv1.JSON{Raw: []byte(raw)}}
		if got := c.Credential(); got != want {
			t.Errorf("%s: got %q, want %q", raw, got, want)
		}
	}
}
