package bootstrap

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// MinKubernetesVersion is the oldest Kubernetes a management cluster may run. `make test` runs the
// controller and webhook suites against an API server of that minor (make test-oldest-kube), and
// docs/supported-versions.md lists it; a component started against an older server stops at once
// with an error that names both versions, rather than failing later on an API the server lacks.
const MinKubernetesVersion = "v1.33.0"

// minKubernetesVersion is what NewManager checks; tests raise it to see the refusal.
var minKubernetesVersion = MinKubernetesVersion

// CheckKubernetesVersion returns an error when info reports a Kubernetes older than minimum. Vendor
// suffixes (v1.33.4+k0s, v1.33.2-eks-1234, GKE's minor "33+") are read as the release they build on.
func CheckKubernetesVersion(info *apimachineryversion.Info, minimum string) error {
	min, err := version.ParseGeneric(minimum)
	if err != nil {
		return fmt.Errorf("the minimum Kubernetes version %q does not parse: %w", minimum, err)
	}
	if info == nil {
		return fmt.Errorf("the API server reported no version")
	}
	got, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		// Some distributions leave gitVersion empty or odd; major and minor still say enough.
		got, err = version.ParseGeneric(strings.TrimSuffix(info.Major, "+") + "." + strings.TrimSuffix(info.Minor, "+"))
		if err != nil {
			return fmt.Errorf("the API server's version (gitVersion %q, major %q, minor %q) does not parse",
				info.GitVersion, info.Major, info.Minor)
		}
	}
	if got.LessThan(min) {
		return fmt.Errorf("the management cluster runs Kubernetes %s, older than v%s, the oldest this release supports: "+
			"upgrade the cluster or use an older release (docs/supported-versions.md)", displayVersion(info), min.String())
	}
	return nil
}

func displayVersion(info *apimachineryversion.Info) string {
	if info.GitVersion != "" {
		return info.GitVersion
	}
	return info.Major + "." + info.Minor
}

// checkServerVersion asks the API server behind cfg for its version and checks it against minimum.
func checkServerVersion(cfg *rest.Config, minimum string) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating a discovery client: %w", err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the management cluster's Kubernetes version: %w", err)
	}
	return CheckKubernetesVersion(info, minimum)
}
