package childns

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

var cluster = types.NamespacedName{Namespace: "team-a", Name: "cd"}

func workspace(namespace, name, uid string) *workspacesv1.WorkspaceDeployment {
	return &workspacesv1.WorkspaceDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(uid)},
		Spec:       workspacesv1.WorkspaceDeploymentSpec{ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: cluster.Name, Namespace: cluster.Namespace}},
	}
}

func namespaceLabelled(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func ownerLabels(namespace, name, uid string) map[string]string {
	l := map[string]string{}
	for k, v := range map[string]string{workspacesv1.WorkspaceNamespaceLabel: namespace, workspacesv1.WorkspaceLabel: name, workspacesv1.WorkspaceUIDLabel: uid} {
		if v != "" {
			l[k] = v
		}
	}
	return l
}

func TestOwnerOf(t *testing.T) {
	ws := workspace("team-a", "nb", "u1")
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   Owner
		who    string
	}{
		{"no labels", nil, OwnerNone, ""},
		{"unrelated labels only", map[string]string{"team": "platform"}, OwnerNone, ""},
		{"this uid", ownerLabels("other", "other", "u1"), OwnerSelf, ""},
		{"an earlier object of the same workspace", ownerLabels("team-a", "nb", "u0"), OwnerSelf, ""},
		{"same name and namespace without uid", ownerLabels("team-a", "nb", ""), OwnerSelf, ""},
		// The tenant of team-a reads who: another namespace's workspace is not named.
		{"same name from another namespace", ownerLabels("team-b", "nb", "u2"), OwnerOther, "a workspace of another namespace"},
		{"only a uid of another", ownerLabels("", "", "u2"), OwnerOther, "a workspace of another namespace"},
		{"another workspace of this namespace", ownerLabels("team-a", "nb2", "u3"), OwnerOther, "workspace nb2 (uid u3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, who := OwnerOf(namespaceLabelled("ws-nb", tc.labels), ws)
			if got != tc.want || who != tc.who {
				t.Fatalf("OwnerOf = %v, %q; want %v, %q", got, who, tc.want, tc.who)
			}
		})
	}
}

func TestMayAdoptUnlabelled(t *testing.T) {
	fresh := workspace("team-a", "nb", "u1")
	if MayAdoptUnlabelled(fresh) {
		t.Fatal("a workspace with no evidence of having made the namespace may adopt it")
	}
	installed := fresh.DeepCopy()
	installed.Status.ServiceSetName = "cd-ws-nb"
	legacy := fresh.DeepCopy()
	legacy.Finalizers = []string{workspacesv1.LegacyFinalizer}
	adopted := fresh.DeepCopy()
	adopted.Annotations = map[string]string{workspacesv1.ServiceSetNameAnnotation: owned.LegacyName(adopted)}
	notAdopted := fresh.DeepCopy()
	notAdopted.Annotations = map[string]string{workspacesv1.ServiceSetNameAnnotation: "cd"} // not the upstream name: ignored
	if MayAdoptUnlabelled(notAdopted) {
		t.Fatal("an annotation naming another ServiceSet than the upstream one counts as evidence")
	}
	for name, ws := range map[string]*workspacesv1.WorkspaceDeployment{"installed": installed, "upstream finalizer": legacy, "adopted ServiceSet": adopted} {
		if !MayAdoptUnlabelled(ws) {
			t.Errorf("%s: may not adopt an unlabelled namespace", name)
		}
	}
}

func TestPodSecurityLevel(t *testing.T) {
	if got := PodSecurityLevel(nil); got != string(workspacesv1.PodSecurityBaseline) {
		t.Errorf("no class: %q, want baseline", got)
	}
	class := &workspacesv1.WorkspaceClass{}
	if got := PodSecurityLevel(class); got != string(workspacesv1.PodSecurityBaseline) {
		t.Errorf("a class asking none: %q, want baseline", got)
	}
	class.Spec.PodSecurityLevel = workspacesv1.PodSecurityRestricted
	if got := PodSecurityLevel(class); got != string(workspacesv1.PodSecurityRestricted) {
		t.Errorf("a class asking restricted: %q", got)
	}
}

func TestWantNamespace(t *testing.T) {
	ns := Want{Workspace: workspace("team-a", "nb", "u1"), PodSecurityLevel: "restricted"}.Namespace()
	if ns.Name != "ws-nb" {
		t.Fatalf("name %q, want ws-nb", ns.Name)
	}
	want := map[string]string{
		workspacesv1.WorkspaceLabel: "nb", workspacesv1.WorkspaceNamespaceLabel: "team-a", workspacesv1.WorkspaceUIDLabel: "u1",
		owned.LabelManagedBy: "workspace-controller", owned.LabelPodSecurityEnforce: "restricted",
	}
	if len(ns.Labels) != len(want) {
		t.Fatalf("labels %v, want %v", ns.Labels, want)
	}
	for k, v := range want {
		if ns.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, ns.Labels[k], v)
		}
	}
	if owner, _ := OwnerOf(ns, workspace("team-a", "nb", "u1")); owner != OwnerSelf {
		t.Errorf("the namespace the controller makes is not its workspace's: %v", owner)
	}
}

// TestCheckOrder: ownership comes before termination (a terminating namespace of another workspace is
// a conflict), and a terminating namespace of this workspace is waited for, never used.
func TestCheckOrder(t *testing.T) {
	n := Namespaces{Cluster: cluster}
	ws := workspace("team-a", "nb", "u1")
	gone := func(ns *corev1.Namespace) *corev1.Namespace {
		now := metav1.NewTime(time.Now())
		ns.DeletionTimestamp = &now
		return ns
	}
	for _, tc := range []struct {
		name   string
		ns     *corev1.Namespace
		ws     *workspacesv1.WorkspaceDeployment
		want   Kind
		substr string
	}{
		{"own", namespaceLabelled("ws-nb", ownerLabels("team-a", "nb", "u1")), ws, Usable, ""},
		{"own terminating", gone(namespaceLabelled("ws-nb", ownerLabels("team-a", "nb", "u1"))), ws, Terminating, ""},
		{"another's", namespaceLabelled("ws-nb", ownerLabels("team-b", "nb", "u2")), ws,
			Conflict, "namespace ws-nb on the child of ClusterDeployment team-a/cd belongs to a workspace of another namespace; rename this workspace"},
		{"another's terminating", gone(namespaceLabelled("ws-nb", ownerLabels("team-b", "nb", "u2"))), ws, Conflict, "belongs to a workspace of another namespace"},
		{"unlabelled, not adoptable", namespaceLabelled("ws-nb", nil), ws, Conflict, "exists without the labels of a workspace and is not adopted"},
		{"unlabelled, not adoptable, terminating", gone(namespaceLabelled("ws-nb", nil)), ws, Conflict, "without the labels of a workspace"},
		{"unlabelled, adoptable", namespaceLabelled("ws-nb", nil), withServiceSet(ws), Usable, ""},
		{"unlabelled, adoptable, terminating", gone(namespaceLabelled("ws-nb", nil)), withServiceSet(ws), Terminating, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := n.Check(tc.ns, tc.ws)
			if out.Kind != tc.want || !strings.Contains(out.Message, tc.substr) || out.Namespace != tc.ns {
				t.Fatalf("Check = %+v; want kind %v with %q", out, tc.want, tc.substr)
			}
			if out.Kind == Conflict && out.Reason != workspacesv1.ReasonReleaseNamespaceConflict {
				t.Fatalf("reason %q", out.Reason)
			}
		})
	}
}

func withServiceSet(ws *workspacesv1.WorkspaceDeployment) *workspacesv1.WorkspaceDeployment {
	ws = ws.DeepCopy()
	ws.Status.ServiceSetName = "cd-ws-nb"
	return ws
}
