package bootstrap

import (
	"strings"
	"testing"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
)

func TestCheckKubernetesVersion(t *testing.T) {
	cases := []struct {
		name    string
		info    *apimachineryversion.Info
		wantErr string
	}{
		{"the minimum itself", &apimachineryversion.Info{GitVersion: "v1.33.0"}, ""},
		{"k0s suffix", &apimachineryversion.Info{GitVersion: "v1.33.4+k0s"}, ""},
		{"newer", &apimachineryversion.Info{GitVersion: "v1.37.2"}, ""},
		{"EKS suffix, older", &apimachineryversion.Info{GitVersion: "v1.32.9-eks-113cf36"}, "runs Kubernetes v1.32.9-eks-113cf36, older than v1.33.0"},
		{"older", &apimachineryversion.Info{GitVersion: "v1.30.1"}, "older than v1.33.0"},
		{"empty gitVersion, GKE minor", &apimachineryversion.Info{Major: "1", Minor: "34+"}, ""},
		{"empty gitVersion, older minor", &apimachineryversion.Info{Major: "1", Minor: "31"}, "runs Kubernetes 1.31, older"},
		{"nothing parses", &apimachineryversion.Info{GitVersion: "banana", Major: "x"}, "does not parse"},
		{"no info", nil, "no version"},
	}
	for _, c := range cases {
		err := CheckKubernetesVersion(c.info, MinKubernetesVersion)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.wantErr)
		}
	}
	if err := CheckKubernetesVersion(&apimachineryversion.Info{GitVersion: "v1.37.0"}, "latest"); err == nil {
		t.Errorf("an unparsable minimum was accepted")
	}
}

// The real API server passes the check, and a manager refuses to start against a server older than
// the minimum (the minimum raised above the test's server), naming both versions and what to do.
func TestNewManagerRefusesAnOldAPIServer(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(mgmt.Config)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckKubernetesVersion(info, MinKubernetesVersion); err != nil {
		t.Fatalf("the test's API server %s fails the minimum: %v", info.GitVersion, err)
	}
	t.Logf("the test's API server runs %s", info.GitVersion)

	o := NewOptions("webhook")
	o.RestConfig = mgmt.Config
	o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0"
	saved := minKubernetesVersion
	minKubernetesVersion = "v99.0.0"
	t.Cleanup(func() { minKubernetesVersion = saved })
	_, err = NewManager(o, mgmt.Scheme)
	if err == nil || !strings.Contains(err.Error(), "runs Kubernetes "+info.GitVersion+", older than v99.0.0") ||
		!strings.Contains(err.Error(), "upgrade the cluster") {
		t.Fatalf("NewManager against %s with minimum v99.0.0: %v, want a refusal naming both versions", info.GitVersion, err)
	}
}
