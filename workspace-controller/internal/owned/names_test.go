package owned

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

func workspace(ns, name, cd string, annotations map[string]string) *workspacesv1.WorkspaceDeployment {
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}}
	ws.Spec.ClusterDeploymentRef.Name = cd
	return ws
}

// Names are bounded DNS labels, never shared between `team/x` and `team-x`, and never KCM's own.
func TestServiceSetNames(t *testing.T) {
	a := workspace("team", "x", "cd", nil)
	a.Spec.ClusterDeploymentRef.Namespace = "platform"
	b := workspace("team-x", "", "cd", nil)
	b.Name = "x"
	b.Namespace = "team"
	if ServiceSetName(workspace("team", "nb", "cd", nil)) != "cd-ws-nb" {
		t.Fatalf("same-namespace name: %s", ServiceSetName(workspace("team", "nb", "cd", nil)))
	}
	c := workspace("team-x", "y", "cd", nil)
	c.Spec.ClusterDeploymentRef.Namespace = "platform"
	d := workspace("team", "x-y", "cd", nil)
	d.Spec.ClusterDeploymentRef.Namespace = "platform"
	if ServiceSetName(c) == ServiceSetName(d) {
		t.Fatalf("team-x/y and team/x-y share %s", ServiceSetName(c))
	}
	long := workspace(strings.Repeat("n", 63), strings.Repeat("w", 63), strings.Repeat("c", 63), nil)
	long.Spec.ClusterDeploymentRef.Namespace = "platform"
	for _, n := range []string{ServiceSetName(long), PrerequisiteServiceSetName(strings.Repeat("c", 63), strings.Repeat("t", 63))} {
		if len(n) > 63 {
			t.Errorf("%s has %d characters", n, len(n))
		}
	}
	if ServiceSetName(a) == "cd" {
		t.Fatal("a workspace's ServiceSet took KCM's own name")
	}
	if len(ReleaseName(workspace("team", strings.Repeat("w", 63), "cd", nil))) > 53 {
		t.Fatal("a release name over Helm's limit")
	}
}

// The adoption annotations are honoured only for the upstream name and a valid release name.
func TestAdoptionAnnotations(t *testing.T) {
	for _, c := range []struct {
		name           string
		set, release   string
		wantSet, wantR string
	}{
		{"upstream name", "wsd-cd-nb", "wsd-cd-nb", "wsd-cd-nb", "wsd-cd-nb"},
		{"KCM's own ServiceSet", "cd", "cd", "", ""},
		{"another workspace's", "wsd-cd-other", "wsd-cd-other", "", ""},
		{"invalid release name", "wsd-cd-nb", "Not_Valid", "wsd-cd-nb", ""},
		{"release without the ServiceSet", "", "wsd-cd-nb", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := workspace("team", "nb", "cd", map[string]string{
				workspacesv1.ServiceSetNameAnnotation: c.set, workspacesv1.ReleaseNameAnnotation: c.release})
			if got := AdoptedServiceSetName(ws); got != c.wantSet {
				t.Errorf("ServiceSet name %q, want %q", got, c.wantSet)
			}
			if got := AdoptedReleaseName(ws); got != c.wantR {
				t.Errorf("release name %q, want %q", got, c.wantR)
			}
			if c.wantSet == "" && ServiceSetName(ws) != "cd-ws-nb" {
				t.Errorf("an ignored annotation changed the name to %s", ServiceSetName(ws))
			}
		})
	}
}

func TestValidateReleaseName(t *testing.T) {
	for n, ok := range map[string]bool{"nb": true, "wsd-cd-nb": true, "": false, strings.Repeat("a", 54): false, "A": false, "-a": false} {
		if err := ValidateReleaseName(n); (err == nil) != ok {
			t.Errorf("%q: %v", n, err)
		}
	}
}

// A workspace on a cluster of its own namespace keeps ws-<name>; one on a cluster of another namespace
// gets its namespace's qualified form, so two namespaces' `notebook` never share a release namespace.
// A recorded namespace is kept only in one of the two forms; a workspace installed before it was
// recorded stays in ws-<name>.
func TestReleaseNamespace(t *testing.T) {
	own := workspace("team-a", "notebook", "cd", nil)
	if got := ReleaseNamespace(own); got != "ws-notebook" {
		t.Fatalf("own-namespace cluster: %s", got)
	}
	a, b := workspace("team-a", "notebook", "cd", nil), workspace("team-b", "notebook", "cd", nil)
	a.Spec.ClusterDeploymentRef.Namespace, b.Spec.ClusterDeploymentRef.Namespace = "platform", "platform"
	ra, rb := ReleaseNamespace(a), ReleaseNamespace(b)
	if ra == rb || ra == "ws-notebook" || !strings.HasPrefix(ra, "wst-notebook-") || len(ra) != len("wst-notebook-")+5 {
		t.Fatalf("shared cluster: %s and %s", ra, rb)
	}
	// Placed by a Colony or selector of another namespace: the placement's namespace decides.
	placed := workspace("team-a", "notebook", "", nil)
	placed.Status.Placement = &workspacesv1.Placement{Namespace: "platform", Cluster: "cd"}
	if got := ReleaseNamespace(placed); got != ra {
		t.Fatalf("placed on another namespace's cluster: %s, want %s", got, ra)
	}
	if got := ReleaseNamespaceOn(own, types.NamespacedName{Namespace: "platform", Name: "cd"}); got != ra {
		t.Fatalf("weighed on another namespace's cluster: %s, want %s", got, ra)
	}
	// No workspace name makes ws-<name> equal another's shared form, nor the other way round.
	squat := workspace("platform", strings.TrimPrefix(ra, "ws-"), "cd", nil)
	if ReleaseNamespace(squat) == ra {
		t.Fatal("a workspace of the cluster's namespace took a shared release namespace")
	}
	recorded := a.DeepCopy()
	recorded.Status.ReleaseNamespace = "kube-system"
	if got := ReleaseNamespace(recorded); got != ra {
		t.Fatalf("a recorded namespace of neither form was honoured: %s", got)
	}
	recorded.Status.ReleaseNamespace = "ws-notebook"
	if got := ReleaseNamespace(recorded); got != "ws-notebook" {
		t.Fatalf("the recorded ws-<name> was not kept: %s", got)
	}
	legacy := a.DeepCopy()
	legacy.Status.ServiceSetName = "cd-ws-team-a-notebook-12345678"
	if got := ReleaseNamespace(legacy); got != "ws-notebook" {
		t.Fatalf("a workspace installed before the namespace was recorded moved: %s", got)
	}
	long := workspace(strings.Repeat("n", 63), strings.Repeat("w", 60), "cd", nil)
	long.Spec.ClusterDeploymentRef.Namespace = "platform"
	if got := ReleaseNamespace(long); len(got) > 63 || !strings.HasPrefix(got, "wst-") {
		t.Fatalf("long shared release namespace: %s", got)
	}
}

// FuzzReleaseNamespaceOnKeepsTheRule: ReleaseNamespaceOn, which recognises a recorded ws-<name>
// without building it and builds the shared form only when it needs it, names what the rule names
// when both forms are built first (releaseNamespaceRule).
func FuzzReleaseNamespaceOnKeepsTheRule(f *testing.F) {
	// rec: 0 none, 1 ws-<name>, 2 the shared form, 3 the literal; then the ServiceSet name recorded,
	// whether the workspace adopted an upstream ServiceSet, and the cluster's namespace.
	f.Add("team-a", "notebook", uint8(1), "", "", false, "team-a")
	f.Add("team-a", "notebook", uint8(2), "", "", false, "platform")
	f.Add("team-a", "notebook", uint8(0), "", "cd-ws-notebook", false, "platform")
	f.Add("team-a", "notebook", uint8(0), "", "", true, "platform")
	f.Add("team-a", "notebook", uint8(3), "kube-system", "", false, "platform")
	f.Add("team-a", "notebook", uint8(3), "ws-notebooks", "", false, "")
	f.Add("team-a", "", uint8(3), "ws-", "", false, "team-b")
	f.Fuzz(func(t *testing.T, ns, name string, recKind uint8, literal, setName string, adopted bool, cdNamespace string) {
		ws := workspace(ns, name, "cd", nil)
		ws.Spec.ClusterDeploymentRef.Namespace = cdNamespace
		switch recKind % 4 {
		case 1:
			ws.Status.ReleaseNamespace = LocalReleaseNamespace(name)
		case 2:
			ws.Status.ReleaseNamespace = SharedReleaseNamespace(name, ns)
		case 3:
			ws.Status.ReleaseNamespace = literal
		}
		ws.Status.ServiceSetName = setName
		if adopted {
			ws.Annotations = map[string]string{workspacesv1.ServiceSetNameAnnotation: LegacyName(ws)}
		}
		cd := types.NamespacedName{Namespace: cdNamespace, Name: "cd"}
		if got, want := ReleaseNamespaceOn(ws, cd), releaseNamespaceRule(ws, cd); got != want {
			t.Fatalf("ReleaseNamespaceOn(%s/%s, recorded %q, ServiceSet %q, adopted %v, cluster %s) = %q, the rule gives %q",
				ns, name, ws.Status.ReleaseNamespace, setName, adopted, cd, got, want)
		}
	})
}

// releaseNamespaceRule is ReleaseNamespaceOn's rule written plainly: the recorded namespace when it is
// one of the workspace's two forms; ws-<name> for a workspace installed before it was recorded or
// adopted; else the form of the cluster's namespace.
func releaseNamespaceRule(ws *workspacesv1.WorkspaceDeployment, cd types.NamespacedName) string {
	local, shared := LocalReleaseNamespace(ws.Name), SharedReleaseNamespace(ws.Name, ws.Namespace)
	switch rec := ws.Status.ReleaseNamespace; {
	case rec == local || rec == shared:
		return rec
	case rec == "" && ws.Status.ServiceSetName != "", AdoptedServiceSetName(ws) != "":
		return local
	case cd.Namespace != "" && cd.Namespace != ws.Namespace:
		return shared
	}
	return local
}

func TestClusterWaiterKeys(t *testing.T) {
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "w"}}
	ws.Spec.ClusterDeploymentRef.Name = "gpu-1"
	ws.Spec.ClusterDeploymentRef.Namespace = "fleet"
	for _, phase := range []workspacesv1.WorkspacePhase{"", workspacesv1.PhasePending, workspacesv1.PhaseDeploying, workspacesv1.PhaseRunning, workspacesv1.PhaseFailed} {
		ws.Status.Phase = phase
		if got := ClusterWaiterKeys(ws); len(got) != 0 {
			t.Fatalf("a %q workspace is indexed as a waiter under %v", phase, got)
		}
	}
	ws.Status.Phase = workspacesv1.PhaseWaiting
	if got := ClusterWaiterKeys(ws); len(got) != 1 || got[0] != "fleet/gpu-1" {
		t.Fatalf("a Waiting workspace is indexed under %v, want its cluster fleet/gpu-1", got)
	}
}

func TestServiceSetClusterKeys(t *testing.T) {
	ss := &metav1.ObjectMeta{Namespace: "fleet", Labels: map[string]string{workspacesv1.ClusterDeploymentLabel: "gpu-1"}}
	if got := ServiceSetClusterKeys(ss); len(got) != 1 || got[0] != "fleet/gpu-1" {
		t.Fatalf("a ServiceSet of cluster gpu-1 in fleet is indexed under %v", got)
	}
	if got := ServiceSetClusterKeys(&metav1.ObjectMeta{Namespace: "fleet"}); len(got) != 0 {
		t.Fatalf("a ServiceSet without the cluster label is indexed under %v", got)
	}
}
