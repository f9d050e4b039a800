package owned

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
