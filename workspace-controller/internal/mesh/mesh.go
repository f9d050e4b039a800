// Package mesh is the service-mesh mode of the workspace-controller (--workspace-mesh-mode): which
// labels the release namespace on the child, the mirror namespace on the regional cluster and the
// Services in both get, so that the workspaces' traffic joins a mesh that spans both clusters, and
// which per-child waypoint must be programmed before routes count as serving. docs/ROUTING.md
// ("Mesh modes") says which mode fits which mesh. The operator never installs the mesh nor makes a
// waypoint: the onboarding of a cluster does.
package mesh

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Mode is a mesh mode.
type Mode string

const (
	// None is no mesh: no mesh labels, mirror Services in the wsr-<name> route namespaces (the
	// behaviour before mesh modes, and the default).
	None Mode = "none"
	// Ambient is Istio's ambient data plane without waypoints.
	Ambient Mode = "ambient"
	// Waypoint is Istio ambient with one waypoint per child cluster, <cluster>-waypoint: the upstream
	// operator's ambient mode with its waypoint enabled (its default).
	Waypoint Mode = "waypoint"
	// Sidecar is Istio's sidecar injection.
	Sidecar Mode = "sidecar"
)

// Modes lists the modes in the order the flag's help names them.
var Modes = []Mode{None, Ambient, Waypoint, Sidecar}

// Istio's labels and values. They are Istio's API (istio.io/api, label package); written out here so
// the controller does not depend on Istio's modules for a few strings.
const (
	DataplaneModeLabel        = "istio.io/dataplane-mode"
	UseWaypointLabel          = "istio.io/use-waypoint"
	UseWaypointNamespaceLabel = "istio.io/use-waypoint-namespace"
	IngressUseWaypointLabel   = "istio.io/ingress-use-waypoint"
	InjectionLabel            = "istio-injection"
	GlobalServiceLabel        = "istio.io/global"

	dataplaneAmbient = "ambient"
	injectionEnabled = "enabled"
	trueValue        = "true"
)

// DefaultWaypointNamespace is the default of --workspace-waypoint-namespace (the upstream operator's).
const DefaultWaypointNamespace = "istio-system"

// The waypoint name: <cluster>-waypoint, shortened past a DNS label's 63 characters (WaypointName).
const (
	waypointSuffix              = "-waypoint"
	maxNameLength               = validation.DNS1123LabelMaxLength
	waypointPrefixWhenTruncated = 45
)

// Config is the mesh configuration of the controller.
type Config struct {
	Mode Mode
	// WaypointNamespace is the namespace of the per-child waypoints on both clusters (Waypoint only).
	WaypointNamespace string
}

// Parse reads --workspace-mesh-mode, --workspace-waypoint-enabled and --workspace-waypoint-namespace.
// waypointEnabled is the upstream operator's switch, accepted for compatibility: with ambient it
// gives Waypoint; with waypoint it changes nothing; with none or sidecar it is refused, since it would
// do nothing there. An unknown mode is refused (the upstream operator treated it as none, silently).
func Parse(mode string, waypointEnabled bool, waypointNamespace string) (Config, error) {
	c := Config{Mode: Mode(mode), WaypointNamespace: waypointNamespace}
	switch c.Mode {
	case None, Sidecar:
		if waypointEnabled {
			return Config{}, fmt.Errorf("--workspace-waypoint-enabled applies to --workspace-mesh-mode=ambient only, not to %q", mode)
		}
	case Ambient:
		if waypointEnabled {
			c.Mode = Waypoint
		}
	case Waypoint:
	default:
		return Config{}, fmt.Errorf("--workspace-mesh-mode must be one of %v, got %q", Modes, mode)
	}
	if c.Mode == Waypoint {
		if errs := validation.IsDNS1123Label(waypointNamespace); len(errs) > 0 {
			return Config{}, fmt.Errorf("--workspace-waypoint-namespace %q is not a namespace name: %s", waypointNamespace, errs[0])
		}
	}
	return c, nil
}

// Enabled reports whether a mesh is used (any mode but none).
func (c Config) Enabled() bool { return c.Mode != "" && c.Mode != None }

// WaypointName is the per-child waypoint of the child cluster of ClusterDeployment cluster:
// <cluster>-waypoint, or, when that is longer than a DNS label, the first 45 characters of cluster,
// "-", the first 8 hex digits of its SHA-256 and "-waypoint" (the upstream operator's names, which the
// onboarding provisions).
func WaypointName(cluster string) string {
	if n := cluster + waypointSuffix; len(n) <= maxNameLength {
		return n
	}
	sum := sha256.Sum256([]byte(cluster))
	return cluster[:waypointPrefixWhenTruncated] + "-" + hex.EncodeToString(sum[:])[:8] + waypointSuffix
}

// ReleaseNamespaceLabels are the mesh labels of the release namespace on the child of ClusterDeployment
// cluster; nil for none. They are set where missing or different; other labels are left alone.
func (c Config) ReleaseNamespaceLabels(cluster string) map[string]string {
	switch c.Mode {
	case Ambient:
		return map[string]string{DataplaneModeLabel: dataplaneAmbient}
	case Waypoint:
		return map[string]string{
			DataplaneModeLabel:        dataplaneAmbient,
			UseWaypointLabel:          WaypointName(cluster),
			UseWaypointNamespaceLabel: c.WaypointNamespace,
			IngressUseWaypointLabel:   trueValue,
		}
	case Sidecar:
		return map[string]string{InjectionLabel: injectionEnabled}
	}
	return nil
}

// MirrorNamespaceLabels are the mesh labels of the mirror namespace on the regional cluster: the data
// plane only. A waypoint is the child's: the regional cluster's traffic reaches it through the child's
// Services, so the mirror namespace never names one. nil for none.
func (c Config) MirrorNamespaceLabels() map[string]string {
	switch c.Mode {
	case Ambient, Waypoint:
		return map[string]string{DataplaneModeLabel: dataplaneAmbient}
	case Sidecar:
		return map[string]string{InjectionLabel: injectionEnabled}
	}
	return nil
}

// ServiceLabels are the mesh labels of a mirror Service and of the child's Service of the same name:
// istio.io/global, which makes Istio multi-cluster treat the Services of one namespace and name in
// both clusters as one. nil for none. Namespaces never get it.
func (c Config) ServiceLabels() map[string]string {
	if !c.Enabled() {
		return nil
	}
	return map[string]string{GlobalServiceLabel: trueValue}
}
