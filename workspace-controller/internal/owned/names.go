package owned

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/names"
)

// ReleaseNamespace is the namespace of the workspace's Helm release on the child.
//
// A workspace on a cluster of its own namespace (the single-namespace case, and every workspace
// adopted from the upstream operator) uses ws-<name>, LocalReleaseNamespace. A workspace on a cluster
// of another namespace (a platform team's shared fleet) uses SharedReleaseNamespace, which carries its
// namespace's qualifier, so that two teams can each run a `notebook` on one cluster. Neither form can
// be the other's: ws-<name> always has '-' as its third character, the shared form 't'.
//
// The namespace a workspace was installed into is kept (status.releaseNamespace) when it is one of its
// two; a workspace installed before it was recorded (a ServiceSet name, no release namespace) was
// installed into ws-<name>, which every workspace used before.
func ReleaseNamespace(ws *workspacesv1.WorkspaceDeployment) string {
	return ReleaseNamespaceOn(ws, ClusterKey(ws))
}

// ReleaseNamespaceOn is ReleaseNamespace on the cluster of ClusterDeployment cd, which placement
// weighs before the workspace is placed there.
//
// The GPU gate asks it for every workspace of a cluster in each decision, so the recorded ws-<name>,
// the common case, is recognised without building either form, and the shared form (a hash of the
// namespace) is built only when it is needed.
func ReleaseNamespaceOn(ws *workspacesv1.WorkspaceDeployment, cd types.NamespacedName) string {
	rec := ws.Status.ReleaseNamespace
	if isLocalReleaseNamespace(rec, ws.Name) {
		return rec
	}
	if rec != "" && rec == SharedReleaseNamespace(ws.Name, ws.Namespace) {
		return rec
	}
	if (rec == "" && ws.Status.ServiceSetName != "") || AdoptedServiceSetName(ws) != "" {
		return LocalReleaseNamespace(ws.Name)
	}
	if cd.Namespace != "" && cd.Namespace != ws.Namespace {
		return SharedReleaseNamespace(ws.Name, ws.Namespace)
	}
	return LocalReleaseNamespace(ws.Name)
}

// isLocalReleaseNamespace reports whether ns is LocalReleaseNamespace(name), without building it.
func isLocalReleaseNamespace(ns, name string) bool {
	const prefix = "ws-"
	return len(ns) == len(prefix)+len(name) && strings.HasPrefix(ns, prefix) && ns[len(prefix):] == name
}

// LocalReleaseNamespace is the release namespace of a workspace on a cluster of its own namespace:
// ws-<name>, as the upstream operator named it.
func LocalReleaseNamespace(name string) string { return "ws-" + name }

// SharedReleaseNamespace is the release namespace of a workspace on a cluster of another namespace:
// wst-<name>-<qualifier>, cut to a DNS label (names.DNSLabel) when long.
func SharedReleaseNamespace(name, namespace string) string {
	return names.DNSLabel("wst", name, names.NamespaceQualifier(namespace))
}

// ClusterKey returns the namespace/name of the ClusterDeployment a workspace targets.
// A workspace that names a Colony or a cluster selector targets the cluster status.placement names,
// and none (an empty name) until it is placed.
func ClusterKey(ws *workspacesv1.WorkspaceDeployment) types.NamespacedName {
	if ws.Spec.ClusterDeploymentRef.Name == "" {
		return PlacedKey(ws)
	}
	ns := ws.Spec.ClusterDeploymentRef.Namespace
	if ns == "" {
		ns = ws.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: ws.Spec.ClusterDeploymentRef.Name}
}

// PlacedKey is the cluster status.placement names, or, while the workspace is unplaced, an empty name
// in the namespace it is placed from (WorkspaceDeployment.PlacementNamespace).
func PlacedKey(ws *workspacesv1.WorkspaceDeployment) types.NamespacedName {
	p := ws.Status.Placement
	if p == nil || p.Cluster == "" {
		ns, _ := ws.PlacementNamespace()
		return types.NamespacedName{Namespace: ns}
	}
	ns := p.Namespace
	if ns == "" {
		ns = ws.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: p.Cluster}
}

// ServiceSetName is the name of a workspace's ServiceSet, bounded to 63 characters: `<cd>-ws-<name>`
// for a workspace in the ClusterDeployment's namespace, else `<cd>-ws-<namespace>-<name>-<hash>` with
// a short hash of namespace/name, so that `team/x` and `team-x` never share one. It never equals the
// `<cd>` ServiceSet KCM makes itself. A ServiceSet of that name is used only when its labels name the
// workspace.
func ServiceSetName(ws *workspacesv1.WorkspaceDeployment) string {
	if n := AdoptedServiceSetName(ws); n != "" {
		return n // adopted from an earlier operator
	}
	cd := ClusterKey(ws)
	if cd.Namespace == ws.Namespace {
		return names.DNSLabel(cd.Name, "ws", ws.Name)
	}
	return names.DNSLabel(cd.Name, "ws", ws.Namespace, ws.Name, names.ShortHash(ws.Namespace+"/"+ws.Name))
}

// ReleaseName is the Helm release name of a workspace, at most 53 characters.
func ReleaseName(ws *workspacesv1.WorkspaceDeployment) string {
	if n := AdoptedReleaseName(ws); n != "" {
		return n // adopted from an earlier operator
	}
	return names.HelmRelease(ws.Name)
}

// ValuesSecretName is the name of the Secret, next to a workspace's ServiceSet, that holds the values
// which must not travel inline: `<serviceset>-values`.
func ValuesSecretName(ws *workspacesv1.WorkspaceDeployment) string {
	return ServiceSetName(ws) + "-values"
}

// PrerequisiteServiceSetName is the name of the shared ServiceSet that installs a prerequisite on a
// cluster: one per ClusterDeployment and ServiceTemplate.
func PrerequisiteServiceSetName(cd, template string) string {
	return names.DNSLabel(cd, "prereq", template)
}

// LegacyName is the ServiceSet and Helm release name the upstream operator 0.11 gave a workspace:
// `wsd-<cluster deployment>-<name>`.
func LegacyName(ws *workspacesv1.WorkspaceDeployment) string {
	return "wsd-" + ws.Spec.ClusterDeploymentRef.Name + "-" + ws.Name
}

// AdoptedServiceSetName is the name of the upstream ServiceSet the workspace adopted, or "". The
// annotation that pins it is written by the adoption, but whoever may edit the workspace can write
// it too: it is honoured only when it names the one ServiceSet adoption can ever take,
// LegacyName(ws), so it can never point the controller at KCM's `<cd>` ServiceSet, a prerequisite's
// or another workspace's.
func AdoptedServiceSetName(ws *workspacesv1.WorkspaceDeployment) string {
	if n := ws.Annotations[workspacesv1.ServiceSetNameAnnotation]; n != "" && n == LegacyName(ws) {
		return n
	}
	return ""
}

// AdoptedReleaseName is the Helm release name of the adopted upstream ServiceSet, or "": the pinned
// annotation, honoured only next to an honoured ServiceSet annotation and only when it is a valid
// Helm release name.
func AdoptedReleaseName(ws *workspacesv1.WorkspaceDeployment) string {
	n := ws.Annotations[workspacesv1.ReleaseNameAnnotation]
	if n == "" || AdoptedServiceSetName(ws) == "" || ValidateReleaseName(n) != nil {
		return ""
	}
	return n
}

// maxReleaseName is Helm's limit on a release name.
const maxReleaseName = 53

// ValidateReleaseName checks a Helm release name: at most 53 characters, lower-case alphanumerics and
// '-' or '.', starting and ending with an alphanumeric (Helm's own rule).
func ValidateReleaseName(n string) error {
	if len(n) == 0 || len(n) > maxReleaseName {
		return fmt.Errorf("a Helm release name has 1 to %d characters, got %d", maxReleaseName, len(n))
	}
	if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
		return fmt.Errorf("not a valid Helm release name: %s", strings.Join(errs, "; "))
	}
	return nil
}

// ClusterWaiterKeys is the IndexClusterWaiter value of a workspace: its cluster's key while it is
// Waiting, or stopped by a reclaim and waiting to start again (RestartsAfterReclaim); nothing
// otherwise.
func ClusterWaiterKeys(ws *workspacesv1.WorkspaceDeployment) []string {
	if ws.Status.Phase != workspacesv1.PhaseWaiting && !RestartsAfterReclaim(&ws.Status) {
		return nil
	}
	return []string{ClusterKey(ws).String()}
}

// ReclaimStopped reports whether a reclaim stopped the workspace (status.reclaim.stoppedAt): it stays
// stopped, without its spec saying so, until the gate admits it again.
func ReclaimStopped(st *workspacesv1.WorkspaceDeploymentStatus) bool {
	return st.Reclaim != nil && st.Reclaim.StoppedAt != nil
}

// RestartsAfterReclaim reports whether a workspace stopped by a reclaim has given its GPUs back (its
// admission released) and waits in its cluster's GPU queue to start again.
func RestartsAfterReclaim(st *workspacesv1.WorkspaceDeploymentStatus) bool {
	return ReclaimStopped(st) && st.Admission == nil && st.Phase == workspacesv1.PhaseStopped
}

// ReclaimedByKeys is the IndexReclaimedBy value of a workspace: "<namespace>/<name>" of each borrower
// its status.reclaiming names.
func ReclaimedByKeys(ws *workspacesv1.WorkspaceDeployment) []string {
	rc := ws.Status.Reclaiming
	if rc == nil {
		return nil
	}
	out := make([]string, 0, len(rc.Borrowers))
	for _, b := range rc.Borrowers {
		out = append(out, b.Namespace+"/"+b.Name)
	}
	return out
}

// ServiceSetClusterKeys is the IndexServiceSetCluster value of a ServiceSet: its namespace and the
// ClusterDeployment its label names, nothing without the label.
func ServiceSetClusterKeys(ss metav1.Object) []string {
	cd := ss.GetLabels()[workspacesv1.ClusterDeploymentLabel]
	if cd == "" {
		return nil
	}
	return []string{types.NamespacedName{Namespace: ss.GetNamespace(), Name: cd}.String()}
}
