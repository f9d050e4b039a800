package childns

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// child is a fake child cluster (or management cluster: workspaces are indexed by name) holding objs.
func child(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	return builder(objs...).Build()
}

func builder(objs ...client.Object) *fake.ClientBuilder {
	return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithIndex(&workspacesv1.WorkspaceDeployment{}, owned.IndexName, func(o client.Object) []string { return []string{o.GetName()} })
}

func terminating(ns *corev1.Namespace) *corev1.Namespace {
	now := metav1.NewTime(time.Now())
	ns.DeletionTimestamp, ns.Finalizers = &now, []string{"test"}
	return ns
}

func admitted(ws *workspacesv1.WorkspaceDeployment) Want {
	return Want{Workspace: ws, PodSecurityLevel: "baseline", Admission: &workspacesv1.Admission{GPUResourceName: string(gpu.ResourceNVIDIA), GPUs: 1}}
}

func TestClaim(t *testing.T) {
	ctx := context.Background()
	ws := workspace("team-a", "nb", "u1")
	out, err := Namespaces{Child: child(t), Cluster: cluster}.Claim(ctx, ws)
	if err != nil || out.Kind != Absent || out.Namespace != nil {
		t.Fatalf("no namespace: %+v, %v", out, err)
	}
	out, err = Namespaces{Child: child(t, terminating(namespaceLabelled("ws-nb", ownerLabels("team-a", "nb", "u1")))), Cluster: cluster}.Claim(ctx, ws)
	if err != nil || out.Kind != Terminating || out.Namespace == nil {
		t.Fatalf("terminating: %+v, %v", out, err)
	}
	out, err = Namespaces{Child: child(t, namespaceLabelled("ws-nb", ownerLabels("team-b", "nb", "u2"))), Cluster: cluster}.Claim(ctx, ws)
	if err != nil || out.Kind != Conflict {
		t.Fatalf("another's: %+v, %v", out, err)
	}
	broken := builder().WithInterceptorFuncs(interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return errors.New("boom")
	}}).Build()
	if _, err := (Namespaces{Child: broken, Cluster: cluster}).Claim(ctx, ws); err == nil || !strings.Contains(err.Error(), "reading namespace ws-nb on the child of team-a/cd: boom") {
		t.Fatalf("a failed read: %v", err)
	}
}

func TestEnsureMakesTheNamespaceAndQuota(t *testing.T) {
	ctx := context.Background()
	ws := workspace("team-a", "nb", "u1")
	cl := child(t)
	n := Namespaces{Child: cl, Cluster: cluster}
	claim, err := n.Claim(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	out, err := n.Ensure(ctx, admitted(ws), &claim)
	if err != nil || out.Kind != Ready || !out.Created {
		t.Fatalf("Ensure = %+v, %v", out, err)
	}
	if want := `namespace ws-nb on the child is owned by the workspace, enforces Pod Security "baseline" and caps GPU requests at requests.amd.com/gpu=0, requests.nvidia.com/gpu=1`; out.Message != want ||
		out.Reason != workspacesv1.ReasonReleaseNamespaceReady {
		t.Fatalf("%s: %s", out.Reason, out.Message)
	}
	ns := &corev1.Namespace{}
	if err := cl.Get(ctx, client.ObjectKey{Name: "ws-nb"}, ns); err != nil || ns.Labels[workspacesv1.WorkspaceUIDLabel] != "u1" {
		t.Fatalf("namespace %v, %v", ns.Labels, err)
	}
	q := &corev1.ResourceQuota{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "ws-nb", Name: owned.GPUQuotaName}, q); err != nil || QuotaString(q) != "requests.amd.com/gpu=0, requests.nvidia.com/gpu=1" {
		t.Fatalf("quota %v, %v", q.Spec.Hard, err)
	}
	// A second pass finds both as they should be.
	out, err = n.Ensure(ctx, admitted(ws), nil)
	if err != nil || out.Kind != Ready || out.Created || out.Corrected {
		t.Fatalf("second Ensure = %+v, %v", out, err)
	}
}

func TestEnsureCorrectsDrift(t *testing.T) {
	ctx := context.Background()
	ws := withServiceSet(workspace("team-a", "nb", "u1"))
	// Unlabelled (adoptable: the workspace is installed), with a label of someone else's and a quota
	// that lets more GPUs through.
	got := namespaceLabelled("ws-nb", map[string]string{"team": "platform", owned.LabelPodSecurityEnforce: "privileged"})
	quota := DesiredQuota("ws-nb", &workspacesv1.Admission{GPUResourceName: string(gpu.ResourceNVIDIA), GPUs: 8})
	quota.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotBestEffort}
	cl := child(t, got, quota)
	out, err := Namespaces{Child: cl, Cluster: cluster}.Ensure(ctx, admitted(ws), nil)
	if err != nil || out.Kind != Ready || out.Created || !out.Corrected {
		t.Fatalf("Ensure = %+v, %v", out, err)
	}
	ns := &corev1.Namespace{}
	if err := cl.Get(ctx, client.ObjectKey{Name: "ws-nb"}, ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels["team"] != "platform" || ns.Labels[owned.LabelPodSecurityEnforce] != "baseline" || ns.Labels[workspacesv1.WorkspaceLabel] != "nb" {
		t.Fatalf("labels %v: the controller's corrected, the others kept", ns.Labels)
	}
	q := &corev1.ResourceQuota{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(quota), q); err != nil || QuotaString(q) != "requests.amd.com/gpu=0, requests.nvidia.com/gpu=1" || len(q.Spec.Scopes) > 0 {
		t.Fatalf("quota %v scopes %v, %v", q.Spec.Hard, q.Spec.Scopes, err)
	}
}

// TestEnsureMadeBySomeoneElse: a namespace made between the claim and Ensure is checked like any
// other: another workspace's is a conflict, a terminating one is waited for, and neither is touched.
func TestEnsureMadeBySomeoneElse(t *testing.T) {
	ctx := context.Background()
	ws := workspace("team-a", "nb", "u1")
	for _, tc := range []struct {
		name string
		ns   *corev1.Namespace
		want Kind
	}{
		{"another's", namespaceLabelled("ws-nb", ownerLabels("team-b", "nb", "u2")), Conflict},
		{"own, terminating", terminating(namespaceLabelled("ws-nb", ownerLabels("team-a", "nb", "u1"))), Terminating},
		{"own", namespaceLabelled("ws-nb", ownerLabels("team-a", "nb", "u0")), Ready},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := child(t, tc.ns)
			claim := Outcome{Kind: Absent} // the claim found none
			out, err := Namespaces{Child: cl, Cluster: cluster}.Ensure(ctx, admitted(ws), &claim)
			if err != nil || out.Kind != tc.want || out.Created {
				t.Fatalf("Ensure = %+v, %v; want %v", out, err, tc.want)
			}
			err = cl.Get(ctx, client.ObjectKey{Namespace: "ws-nb", Name: owned.GPUQuotaName}, &corev1.ResourceQuota{})
			if (tc.want == Ready) != (err == nil) {
				t.Fatalf("quota: %v", err)
			}
		})
	}
}

func TestEnsureReportsCreatedWhenTheQuotaFails(t *testing.T) {
	ws := workspace("team-a", "nb", "u1")
	cl := builder().WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
		if _, ok := o.(*corev1.ResourceQuota); ok {
			return apierrors.NewServiceUnavailable("child gone")
		}
		return c.Create(ctx, o, opts...)
	}}).Build()
	out, err := Namespaces{Child: cl, Cluster: cluster}.Ensure(context.Background(), admitted(ws), &Outcome{Kind: Absent})
	if err == nil || !strings.Contains(err.Error(), "GPU quota in namespace ws-nb on the child of team-a/cd") || !out.Created {
		t.Fatalf("Ensure = %+v, %v; want the quota error, with the namespace reported made", out, err)
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	ws := withServiceSet(workspace("team-a", "nb", "u1"))
	for _, tc := range []struct {
		name          string
		ns            *corev1.Namespace
		ws            *workspacesv1.WorkspaceDeployment
		targetAllowed bool
		others        []client.Object
		deleted       bool
		left          string
	}{
		{"own", namespaceLabelled("ws-nb", ownerLabels("team-a", "nb", "u1")), ws, true, nil, true, ""},
		{"own, target not allowed", namespaceLabelled("ws-nb", ownerLabels("team-a", "nb", "u1")), ws, false, nil, true, ""},
		{"another's", namespaceLabelled("ws-nb", ownerLabels("team-b", "nb", "u2")), ws, true, nil, false,
			"namespace ws-nb on the child belongs to workspace team-b/nb (uid u2) and was left alone"},
		{"unlabelled, made by it", namespaceLabelled("ws-nb", nil), ws, true, nil, true, ""},
		{"unlabelled, not made by it", namespaceLabelled("ws-nb", nil), workspace("team-a", "nb", "u1"), true, nil, false,
			"namespace ws-nb on the child has no owner labels and this workspace did not make it; it was left alone"},
		{"unlabelled, target not allowed", namespaceLabelled("ws-nb", nil), ws, false, nil, false,
			"namespace ws-nb on the child has no owner labels and this workspace did not make it; it was left alone"},
		{"unlabelled, an older workspace of the name", namespaceLabelled("ws-nb", nil), created(ws, 2), true,
			[]client.Object{created(workspace("team-0", "nb", "u0"), 1)}, false,
			"namespace ws-nb on the child has no owner labels and the older workspace team-0/nb uses it; it was left alone"},
		{"unlabelled, a younger workspace of the name", namespaceLabelled("ws-nb", nil), created(ws, 1), true,
			[]client.Object{created(workspace("team-0", "nb", "u0"), 2)}, true, ""},
		{"own, terminating: done", terminating(namespaceLabelled("ws-nb", ownerLabels("team-a", "nb", "u1"))), ws, true, nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := child(t, tc.ns)
			var deleted bool
			cl = interceptor.NewClient(cl.(client.WithWatch), interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
				deleted = true
				return c.Delete(ctx, o, opts...)
			}})
			n := Namespaces{Child: cl, Workspaces: child(t, tc.others...), Cluster: cluster}
			left, err := n.Delete(ctx, tc.ws, tc.targetAllowed)
			if err != nil || left != tc.left || deleted != tc.deleted {
				t.Fatalf("Delete = %q, %v, deleted %v; want %q, deleted %v", left, err, deleted, tc.left, tc.deleted)
			}
		})
	}
	if left, err := (Namespaces{Child: child(t), Cluster: cluster}).Delete(ctx, ws, true); left != "" || err != nil {
		t.Fatalf("no namespace: %q, %v", left, err)
	}
}

func created(ws *workspacesv1.WorkspaceDeployment, sec int64) *workspacesv1.WorkspaceDeployment {
	ws = ws.DeepCopy()
	ws.CreationTimestamp = metav1.NewTime(time.Unix(sec, 0))
	return ws
}

func TestOlderSameName(t *testing.T) {
	ctx := context.Background()
	ws := created(workspace("team-b", "nb", "u1"), 5)
	otherCluster := created(workspace("team-0", "nb", "u3"), 1)
	otherCluster.Spec.ClusterDeploymentRef.Name = "elsewhere"
	for _, tc := range []struct {
		name   string
		others []client.Object
		want   string
	}{
		{"alone", []client.Object{ws}, ""},
		{"an older one on the cluster", []client.Object{ws, created(workspace("team-a", "nb", "u2"), 1)}, "team-a/nb"},
		{"a younger one", []client.Object{ws, created(workspace("team-a", "nb", "u2"), 9)}, ""},
		{"an older one on another cluster", []client.Object{ws, otherCluster}, ""},
		{"an older one of another name", []client.Object{ws, created(workspace("team-a", "other", "u2"), 1)}, ""},
	} {
		got, err := Namespaces{Workspaces: child(t, tc.others...), Cluster: cluster}.OlderSameName(ctx, ws)
		if err != nil || got != tc.want {
			t.Errorf("%s: OlderSameName = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}
