package mesh

import (
	"maps"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		mode     string
		waypoint bool
		ns       string
		want     Mode
		err      string
	}{
		{mode: "none", want: None},
		{mode: "ambient", want: Ambient},
		{mode: "ambient", waypoint: true, ns: "istio-system", want: Waypoint}, // the upstream operator's default
		{mode: "waypoint", ns: "istio-system", want: Waypoint},
		{mode: "waypoint", waypoint: true, ns: "mesh", want: Waypoint},
		{mode: "sidecar", want: Sidecar},
		{mode: "Ambient", err: "--workspace-mesh-mode must be one of"},
		{mode: "", err: "--workspace-mesh-mode must be one of"},
		{mode: "none", waypoint: true, err: "--workspace-waypoint-enabled applies to --workspace-mesh-mode=ambient only"},
		{mode: "sidecar", waypoint: true, err: "--workspace-waypoint-enabled"},
		{mode: "waypoint", ns: "", err: "--workspace-waypoint-namespace"},
		{mode: "ambient", waypoint: true, ns: "Not_A_Namespace", err: "--workspace-waypoint-namespace"},
	} {
		c, err := Parse(tc.mode, tc.waypoint, tc.ns)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Parse(%q, %v, %q) error %v, want one containing %q", tc.mode, tc.waypoint, tc.ns, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("Parse(%q, %v, %q): %v", tc.mode, tc.waypoint, tc.ns, err)
		case tc.err == "" && c.Mode != tc.want:
			t.Errorf("Parse(%q, %v, %q) = %q, want %q", tc.mode, tc.waypoint, tc.ns, c.Mode, tc.want)
		}
	}
}

func TestWaypointName(t *testing.T) {
	if got := WaypointName("gpu-1"); got != "gpu-1-waypoint" {
		t.Errorf("short name: %q", got)
	}
	exact := strings.Repeat("a", 54) // 54 + len("-waypoint") = 63
	if got := WaypointName(exact); got != exact+"-waypoint" {
		t.Errorf("63 characters: %q", got)
	}
	long := strings.Repeat("b", 55)
	// The first 8 hex digits of the SHA-256 of 55 "b"s, as the upstream operator computes them.
	want := strings.Repeat("b", 45) + "-" + "eb2c86e9" + "-waypoint"
	if got := WaypointName(long); got != want {
		t.Errorf("long name: %q, want %q", got, want)
	}
}

func TestLabelsPerMode(t *testing.T) {
	for _, tc := range []struct {
		mode            Mode
		release, mirror map[string]string
		service         map[string]string
	}{
		{mode: None},
		{mode: Ambient,
			release: map[string]string{"istio.io/dataplane-mode": "ambient"},
			mirror:  map[string]string{"istio.io/dataplane-mode": "ambient"},
			service: map[string]string{"istio.io/global": "true"}},
		{mode: Waypoint,
			release: map[string]string{"istio.io/dataplane-mode": "ambient", "istio.io/use-waypoint": "cd-1-waypoint",
				"istio.io/use-waypoint-namespace": "istio-system", "istio.io/ingress-use-waypoint": "true"},
			mirror:  map[string]string{"istio.io/dataplane-mode": "ambient"},
			service: map[string]string{"istio.io/global": "true"}},
		{mode: Sidecar,
			release: map[string]string{"istio-injection": "enabled"},
			mirror:  map[string]string{"istio-injection": "enabled"},
			service: map[string]string{"istio.io/global": "true"}},
	} {
		c := Config{Mode: tc.mode, WaypointNamespace: "istio-system"}
		if got := c.ReleaseNamespaceLabels("cd-1"); !maps.Equal(got, tc.release) {
			t.Errorf("%s: release namespace labels %v, want %v", tc.mode, got, tc.release)
		}
		if got := c.MirrorNamespaceLabels(); !maps.Equal(got, tc.mirror) {
			t.Errorf("%s: mirror namespace labels %v, want %v", tc.mode, got, tc.mirror)
		}
		if got := c.ServiceLabels(); !maps.Equal(got, tc.service) {
			t.Errorf("%s: Service labels %v, want %v", tc.mode, got, tc.service)
		}
	}
}

// FuzzWaypointName: any ClusterDeployment name (a DNS subdomain) gives a waypoint name that is a DNS
// label, ends in -waypoint, and is <name>-waypoint whenever that fits.
func FuzzWaypointName(f *testing.F) {
	for _, s := range []string{"a", "gpu-1", strings.Repeat("c", 54), strings.Repeat("d", 55), strings.Repeat("e.f", 80)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cd string) {
		if len(validation.IsDNS1123Subdomain(cd)) > 0 || strings.Contains(cd, ".") {
			return // ClusterDeployment names of children are DNS labels in practice; dots are not label characters
		}
		got := WaypointName(cd)
		if len(got) > 63 || !strings.HasSuffix(got, "-waypoint") {
			t.Fatalf("WaypointName(%q) = %q", cd, got)
		}
		if len(cd)+len("-waypoint") <= 63 && got != cd+"-waypoint" {
			t.Fatalf("WaypointName(%q) = %q, want the plain name", cd, got)
		}
		if WaypointName(cd) != got {
			t.Fatalf("WaypointName(%q) is not stable", cd)
		}
	})
}
