package childns

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// These tests run against the child API server of the suite (suite_test.go); each uses workspace
// names of its own, so ws-<name> is its own on the shared child.

func admitted(ws *workspacesv1.WorkspaceDeployment) Want {
	return Want{Workspace: ws, PodSecurityLevel: "baseline", Admission: &workspacesv1.Admission{GPUResourceName: string(gpu.ResourceNVIDIA), GPUs: 1}}
}

func TestClaim(t *testing.T) {
	ctx := context.Background()
	n := Namespaces{Child: childAPI.Client, Cluster: cluster}

	ws := workspace("team-a", unique("nb"), "u1")
	out, err := n.Claim(ctx, ws)
	if err != nil || out.Kind != Absent || out.Namespace != nil {
		t.Fatalf("no namespace: %+v, %v", out, err)
	}

	ws = workspace("team-a", unique("nb"), "u1")
	terminating(t, namespaceLabelled(owned.LocalReleaseNamespace(ws.Name), ownerLabels("team-a", ws.Name, "u1")))
	out, err = n.Claim(ctx, ws)
	if err != nil || out.Kind != Terminating || out.Namespace == nil {
		t.Fatalf("terminating: %+v, %v", out, err)
	}

	ws = workspace("team-a", unique("nb"), "u1")
	onChild(t, namespaceLabelled(owned.LocalReleaseNamespace(ws.Name), ownerLabels("team-b", ws.Name, "u2")))
	out, err = n.Claim(ctx, ws)
	if err != nil || out.Kind != Conflict {
		t.Fatalf("another's: %+v, %v", out, err)
	}

	// A child that refuses the read: a user the child grants nothing.
	nobody := rest.CopyConfig(childAPI.Config)
	nobody.Impersonate = rest.ImpersonationConfig{UserName: "childns-test:nobody"}
	refused, err := client.New(nobody, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Namespaces{Child: refused, Cluster: cluster}.Claim(ctx, ws)
	if want := fmt.Sprintf("reading namespace %s on the child of team-a/cd: ", owned.LocalReleaseNamespace(ws.Name)); err == nil ||
		!strings.Contains(err.Error(), want) || !apierrors.IsForbidden(err) {
		t.Fatalf("a failed read: %v; want %q and the child's Forbidden", err, want)
	}
}

func TestEnsureMakesTheNamespaceAndQuota(t *testing.T) {
	ctx := context.Background()
	ws := workspace("team-a", unique("nb"), "u1")
	name := owned.LocalReleaseNamespace(ws.Name)
	cl := childAPI.Client
	n := Namespaces{Child: cl, Cluster: cluster}
	claim, err := n.Claim(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	out, err := n.Ensure(ctx, admitted(ws), &claim)
	if err != nil || out.Kind != Ready || !out.Created {
		t.Fatalf("Ensure = %+v, %v", out, err)
	}
	if want := fmt.Sprintf(`namespace %s on the child is owned by the workspace, enforces Pod Security "baseline", admits ingress from anywhere and caps requests at count/resourceclaims.resource.k8s.io=0, requests.amd.com/gpu=0, requests.nvidia.com/gpu=1`, name); out.Message != want ||
		out.Reason != workspacesv1.ReasonReleaseNamespaceReady {
		t.Fatalf("%s: %s", out.Reason, out.Message)
	}
	ns := &corev1.Namespace{}
	if err := cl.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil || ns.Labels[workspacesv1.WorkspaceUIDLabel] != "u1" {
		t.Fatalf("namespace %v, %v", ns.Labels, err)
	}
	q := &corev1.ResourceQuota{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: name, Name: owned.GPUQuotaName}, q); err != nil || QuotaString(q) != "count/resourceclaims.resource.k8s.io=0, requests.amd.com/gpu=0, requests.nvidia.com/gpu=1" {
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
	ws := withServiceSet(workspace("team-a", unique("nb"), "u1"))
	name := owned.LocalReleaseNamespace(ws.Name)
	cl := childAPI.Client
	// Unlabelled (adoptable: the workspace is installed), with a label of someone else's and a quota
	// that lets more GPUs through, and only to some pods (a scope, which the API server keeps
	// immutable).
	got := namespaceLabelled(name, map[string]string{"team": "platform", owned.LabelPodSecurityEnforce: "privileged"})
	quota := DesiredQuota(name, &workspacesv1.Admission{GPUResourceName: string(gpu.ResourceNVIDIA), GPUs: 8}, nil, false, nil)
	quota.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotBestEffort}
	onChild(t, got, quota)
	out, err := Namespaces{Child: cl, Cluster: cluster}.Ensure(ctx, admitted(ws), nil)
	if err != nil || out.Kind != Ready || out.Created || !out.Corrected {
		t.Fatalf("Ensure = %+v, %v", out, err)
	}
	ns := &corev1.Namespace{}
	if err := cl.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels["team"] != "platform" || ns.Labels[owned.LabelPodSecurityEnforce] != "baseline" || ns.Labels[workspacesv1.WorkspaceLabel] != ws.Name {
		t.Fatalf("labels %v: the controller's corrected, the others kept", ns.Labels)
	}
	q := &corev1.ResourceQuota{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(quota), q); err != nil || QuotaString(q) != "count/resourceclaims.resource.k8s.io=0, requests.amd.com/gpu=0, requests.nvidia.com/gpu=1" || len(q.Spec.Scopes) > 0 {
		t.Fatalf("quota %v scopes %v, %v", q.Spec.Hard, q.Spec.Scopes, err)
	}
	// Drift in the limits alone is patched in place.
	base := q.DeepCopy()
	q.Spec.Hard = DesiredQuota(name, &workspacesv1.Admission{GPUResourceName: string(gpu.ResourceNVIDIA), GPUs: 8}, nil, false, nil).Spec.Hard
	if err := cl.Patch(ctx, q, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	out, err = Namespaces{Child: cl, Cluster: cluster}.Ensure(ctx, admitted(ws), nil)
	if err != nil || out.Kind != Ready || !out.Corrected {
		t.Fatalf("Ensure after the limits drifted = %+v, %v", out, err)
	}
	uid := q.UID
	if err := cl.Get(ctx, client.ObjectKeyFromObject(quota), q); err != nil || QuotaString(q) != "count/resourceclaims.resource.k8s.io=0, requests.amd.com/gpu=0, requests.nvidia.com/gpu=1" || q.UID != uid {
		t.Fatalf("quota %v (uid %s, was %s), %v", q.Spec.Hard, q.UID, uid, err)
	}
}

// TestEnsureMadeBySomeoneElse: a namespace made between the claim and Ensure is checked like any
// other: another workspace's is a conflict, a terminating one is waited for, and neither is touched.
func TestEnsureMadeBySomeoneElse(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ns   func(t *testing.T, ws *workspacesv1.WorkspaceDeployment) *corev1.Namespace
		want Kind
	}{
		{"another's", func(t *testing.T, ws *workspacesv1.WorkspaceDeployment) *corev1.Namespace {
			ns := namespaceLabelled(owned.LocalReleaseNamespace(ws.Name), ownerLabels("team-b", ws.Name, "u2"))
			onChild(t, ns)
			return ns
		}, Conflict},
		{"own, terminating", func(t *testing.T, ws *workspacesv1.WorkspaceDeployment) *corev1.Namespace {
			return terminating(t, namespaceLabelled(owned.LocalReleaseNamespace(ws.Name), ownerLabels("team-a", ws.Name, "u1")))
		}, Terminating},
		{"own", func(t *testing.T, ws *workspacesv1.WorkspaceDeployment) *corev1.Namespace {
			ns := namespaceLabelled(owned.LocalReleaseNamespace(ws.Name), ownerLabels("team-a", ws.Name, "u0"))
			onChild(t, ns)
			return ns
		}, Ready},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := workspace("team-a", unique("nb"), "u1")
			made := tc.ns(t, ws)
			before := &corev1.Namespace{}
			if err := childAPI.Client.Get(ctx, client.ObjectKeyFromObject(made), before); err != nil {
				t.Fatal(err)
			}
			claim := Outcome{Kind: Absent} // the claim found none
			out, err := Namespaces{Child: childAPI.Client, Cluster: cluster}.Ensure(ctx, admitted(ws), &claim)
			if err != nil || out.Kind != tc.want || out.Created {
				t.Fatalf("Ensure = %+v, %v; want %v", out, err, tc.want)
			}
			err = childAPI.Client.Get(ctx, client.ObjectKey{Namespace: made.Name, Name: owned.GPUQuotaName}, &corev1.ResourceQuota{})
			if (tc.want == Ready) != (err == nil) {
				t.Fatalf("quota: %v", err)
			}
			after := &corev1.Namespace{}
			if err := childAPI.Client.Get(ctx, client.ObjectKeyFromObject(made), after); err != nil {
				t.Fatal(err)
			}
			if tc.want != Ready && after.ResourceVersion != before.ResourceVersion {
				t.Fatalf("the namespace was touched: %v -> %v", before.Labels, after.Labels)
			}
		})
	}
}

// TestEnsureReportsCreatedWhenTheQuotaFails: the child makes the namespace and then refuses the
// quota (here, an admission the API server's validation rejects: a negative number of GPUs).
func TestEnsureReportsCreatedWhenTheQuotaFails(t *testing.T) {
	ctx := context.Background()
	ws := workspace("team-a", unique("nb"), "u1")
	name := owned.LocalReleaseNamespace(ws.Name)
	want := admitted(ws)
	want.Admission.GPUs = -1
	out, err := Namespaces{Child: childAPI.Client, Cluster: cluster}.Ensure(ctx, want, &Outcome{Kind: Absent})
	if err == nil || !strings.Contains(err.Error(), "GPU quota in namespace "+name+" on the child of team-a/cd") || !apierrors.IsInvalid(err) || !out.Created {
		t.Fatalf("Ensure = %+v, %v; want the quota error, with the namespace reported made", out, err)
	}
	if err := childAPI.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{}); err != nil {
		t.Fatalf("the namespace reported made: %v", err)
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	const (
		otherNone = iota
		olderOther
		youngerOther
	)
	for _, tc := range []struct {
		name          string
		labels        func(name string) map[string]string
		terminating   bool
		madeByIt      bool // the workspace has evidence of having made the namespace
		targetAllowed bool
		other         int // another workspace of the name on the cluster, in team-0
		deleted       bool
		left          string // %[1]s is the namespace, %[2]s the workspace's name
	}{
		{"own", func(n string) map[string]string { return ownerLabels("team-a", n, "u1") }, false, true, true, otherNone, true, ""},
		{"own, target not allowed", func(n string) map[string]string { return ownerLabels("team-a", n, "u1") }, false, true, false, otherNone, true, ""},
		{"another's", func(n string) map[string]string { return ownerLabels("team-b", n, "u2") }, false, true, true, otherNone, false,
			"namespace %[1]s on the child belongs to a workspace of another namespace and was left alone"},
		{"unlabelled, made by it", nil, false, true, true, otherNone, true, ""},
		{"unlabelled, not made by it", nil, false, false, true, otherNone, false,
			"namespace %[1]s on the child has no owner labels and this workspace did not make it; it was left alone"},
		{"unlabelled, target not allowed", nil, false, true, false, otherNone, false,
			"namespace %[1]s on the child has no owner labels and this workspace did not make it; it was left alone"},
		{"unlabelled, an older workspace of the name", nil, false, true, true, olderOther, false,
			"namespace %[1]s on the child has no owner labels and an older workspace of the same name in another namespace uses it; it was left alone"},
		{"unlabelled, a younger workspace of the name", nil, false, true, true, youngerOther, true, ""},
		{"own, terminating: done", func(n string) map[string]string { return ownerLabels("team-a", n, "u1") }, true, true, true, otherNone, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := workspace("team-a", unique("nb"), "u1")
			if tc.madeByIt {
				ws = withServiceSet(ws)
			}
			nsName := owned.LocalReleaseNamespace(ws.Name)
			var labels map[string]string
			if tc.labels != nil {
				labels = tc.labels(ws.Name)
			}
			if tc.terminating {
				terminating(t, namespaceLabelled(nsName, labels))
			} else {
				onChild(t, namespaceLabelled(nsName, labels))
			}
			if tc.other != otherNone {
				other := onManagement(t, workspace("team-0", ws.Name, "u0"))[0]
				installedInLocalNamespace(t, other) // in ws-<name> too: from before the qualifier
				// The server sets creationTimestamp; this workspace is a second later or earlier.
				at := other.CreationTimestamp.Add(time.Second)
				if tc.other == youngerOther {
					at = other.CreationTimestamp.Add(-time.Second)
				}
				ws.CreationTimestamp = metav1.NewTime(at)
			}
			// The child is real; the wrapper only records whether Delete asked it to delete (a
			// repeated delete of a terminating namespace changes nothing the server would show).
			direct, err := client.NewWithWatch(childAPI.Config, client.Options{Scheme: scheme.New()})
			if err != nil {
				t.Fatal(err)
			}
			var deleted bool
			cl := interceptor.NewClient(direct, interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
				deleted = true
				return c.Delete(ctx, o, opts...)
			}})
			n := Namespaces{Child: cl, Workspaces: workspaces, Cluster: cluster}
			left, err := n.Delete(ctx, ws, tc.targetAllowed)
			want := ""
			if tc.left != "" {
				want = fmt.Sprintf(tc.left, nsName, ws.Name)
			}
			if err != nil || left != want || deleted != tc.deleted {
				t.Fatalf("Delete = %q, %v, deleted %v; want %q, deleted %v", left, err, deleted, want, tc.deleted)
			}
			got := &corev1.Namespace{}
			if err := childAPI.Client.Get(ctx, client.ObjectKey{Name: nsName}, got); err != nil {
				t.Fatal(err)
			}
			if going := !got.DeletionTimestamp.IsZero(); going != (tc.deleted || tc.terminating) {
				t.Fatalf("namespace %s terminating: %v", nsName, going)
			}
		})
	}
	ws := withServiceSet(workspace("team-a", unique("nb"), "u1"))
	if left, err := (Namespaces{Child: childAPI.Client, Cluster: cluster}).Delete(ctx, ws, true); left != "" || err != nil {
		t.Fatalf("no namespace: %q, %v", left, err)
	}
}

func TestOlderSameName(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// other is the other workspace on the management server (nil: none); ws is made a second later
		// than it (later) or earlier.
		other func(name string) *workspacesv1.WorkspaceDeployment
		later bool
		// legacy: ws was installed before release namespaces carried a qualifier, into ws-<name>.
		legacy bool
		want   bool
	}{
		{"alone", nil, true, true, false},
		{"an older one on the cluster, both in ws-<name>", func(n string) *workspacesv1.WorkspaceDeployment { return workspace("team-a", n, "u2") }, true, true, true},
		{"an older one on the cluster, each in its own", func(n string) *workspacesv1.WorkspaceDeployment { return workspace("team-a", n, "u2") }, true, false, false},
		{"an older one from a third namespace", func(n string) *workspacesv1.WorkspaceDeployment { return workspace("team-0", n, "u2") }, true, false, false},
		{"a younger one", func(n string) *workspacesv1.WorkspaceDeployment { return workspace("team-a", n, "u2") }, false, true, false},
		{"an older one on another cluster", func(n string) *workspacesv1.WorkspaceDeployment {
			ws := workspace("team-0", n, "u3")
			ws.Spec.ClusterDeploymentRef.Name = "elsewhere"
			return ws
		}, true, true, false},
		{"an older one of another name", func(n string) *workspacesv1.WorkspaceDeployment { return workspace("team-a", n+"-other", "u2") }, true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := unique("nb")
			ws := onManagement(t, workspace("team-b", name, "u1"))[0]
			if tc.legacy {
				ws.Status.ServiceSetName = "cd-ws-team-b-" + name
			}
			at := ws.CreationTimestamp.Time
			if tc.other != nil {
				other := onManagement(t, tc.other(name))[0]
				at = other.CreationTimestamp.Add(-time.Second)
				if tc.later {
					at = other.CreationTimestamp.Add(time.Second)
				}
			}
			ws.CreationTimestamp = metav1.NewTime(at)
			got, err := Namespaces{Workspaces: workspaces, Cluster: cluster}.OlderSameName(ctx, ws)
			if err != nil || got != tc.want {
				t.Errorf("OlderSameName = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestEnsureIsolatesTheNamespace: a class's release namespaces get a NetworkPolicy that admits ingress
// only from the namespace itself, the data planes and the class's allowFrom; drift is corrected; a
// class with isolation None gets none (the controller's is removed, someone else's left alone).
func TestEnsureIsolatesTheNamespace(t *testing.T) {
	ctx := context.Background()
	ws := workspace("team-a", unique("np"), "u1")
	name := owned.LocalReleaseNamespace(ws.Name)
	cl := childAPI.Client
	n := Namespaces{Child: cl, Cluster: cluster}
	monitoring := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "monitoring"}}}
	class := &workspacesv1.WorkspaceClass{Spec: workspacesv1.WorkspaceClassSpec{NetworkPolicy: &workspacesv1.ReleaseNetworkPolicy{
		AllowFrom: []networkingv1.NetworkPolicyPeer{monitoring}}}}
	want := admitted(ws)
	want.Ingress = IngressPolicy(class, []string{"istio-ingress", "istio-system", "istio-ingress", ""})
	out, err := n.Ensure(ctx, want, nil)
	if err != nil || out.Kind != Ready || !strings.Contains(out.Message, "admits ingress only from itself and the data planes") {
		t.Fatalf("Ensure = %+v, %v", out, err)
	}
	np := &networkingv1.NetworkPolicy{}
	mustOK(t, cl.Get(ctx, client.ObjectKey{Namespace: name, Name: NetworkPolicyName}, np))
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress || len(np.Spec.PodSelector.MatchLabels) != 0 ||
		len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 3 {
		t.Fatalf("NetworkPolicy spec %+v", np.Spec)
	}
	from := np.Spec.Ingress[0].From
	if from[0].PodSelector == nil || from[0].NamespaceSelector != nil {
		t.Errorf("the first peer is not the namespace itself: %+v", from[0])
	}
	if e := from[1].NamespaceSelector.MatchExpressions; len(e) != 1 || e[0].Key != "kubernetes.io/metadata.name" ||
		strings.Join(e[0].Values, ",") != "istio-ingress,istio-system" {
		t.Errorf("the data planes' peer %+v", from[1])
	}
	if from[2].NamespaceSelector == nil || from[2].NamespaceSelector.MatchLabels["team"] != "monitoring" {
		t.Errorf("the class's peer %+v", from[2])
	}

	// Someone opens it to everyone: corrected.
	base := np.DeepCopy()
	np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
	mustOK(t, cl.Patch(ctx, np, client.MergeFrom(base)))
	if out, err := n.Ensure(ctx, want, nil); err != nil || !out.Corrected {
		t.Fatalf("Ensure after drift = %+v, %v", out, err)
	}
	mustOK(t, cl.Get(ctx, client.ObjectKey{Namespace: name, Name: NetworkPolicyName}, np))
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 3 {
		t.Fatalf("drift not corrected: %+v", np.Spec)
	}

	// Isolation None: the controller's NetworkPolicy goes.
	none := &workspacesv1.WorkspaceClass{Spec: workspacesv1.WorkspaceClassSpec{NetworkPolicy: &workspacesv1.ReleaseNetworkPolicy{Isolation: workspacesv1.NetworkIsolationNone}}}
	want.Ingress = IngressPolicy(none, []string{"istio-ingress"})
	if want.Ingress != nil {
		t.Fatalf("isolation None gave a policy: %+v", want.Ingress)
	}
	if _, err := n.Ensure(ctx, want, nil); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: name, Name: NetworkPolicyName}, np); !apierrors.IsNotFound(err) {
		t.Fatalf("the controller's NetworkPolicy is left under isolation None: %v", err)
	}
	// One of that name that is not the controller's is left alone.
	theirs := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: NetworkPolicyName},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	mustOK(t, cl.Create(ctx, theirs))
	if _, err := n.Ensure(ctx, want, nil); err != nil {
		t.Fatal(err)
	}
	mustOK(t, cl.Get(ctx, client.ObjectKey{Namespace: name, Name: NetworkPolicyName}, np))
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestEnsureLabelsTheMesh: the mesh mode's labels go on the new namespace, come back when removed or
// changed by hand, and leave other mesh labels alone (a label the mode does not set is never removed).
func TestEnsureLabelsTheMesh(t *testing.T) {
	ctx := context.Background()
	ws := workspace("team-a", unique("mesh"), "u1")
	name := owned.LocalReleaseNamespace(ws.Name)
	cl := childAPI.Client
	n := Namespaces{Child: cl, Cluster: cluster}
	want := admitted(ws)
	want.MeshLabels = map[string]string{"istio.io/dataplane-mode": "ambient", "istio.io/use-waypoint": "cd-1-waypoint"}
	if out, err := n.Ensure(ctx, want, nil); err != nil || out.Kind != Ready || !out.Created {
		t.Fatalf("Ensure = %+v, %v", out, err)
	}
	ns := &corev1.Namespace{}
	mustOK(t, cl.Get(ctx, client.ObjectKey{Name: name}, ns))
	if ns.Labels["istio.io/dataplane-mode"] != "ambient" || ns.Labels["istio.io/use-waypoint"] != "cd-1-waypoint" {
		t.Fatalf("labels of the new namespace %v", ns.Labels)
	}
	base := ns.DeepCopy()
	delete(ns.Labels, "istio.io/use-waypoint")
	ns.Labels["istio.io/dataplane-mode"] = "none"
	ns.Labels["istio-injection"] = "disabled" // the platform team's
	mustOK(t, cl.Patch(ctx, ns, client.MergeFrom(base)))
	if out, err := n.Ensure(ctx, want, nil); err != nil || out.Kind != Ready || !out.Corrected {
		t.Fatalf("Ensure after the mesh labels drifted = %+v, %v", out, err)
	}
	mustOK(t, cl.Get(ctx, client.ObjectKey{Name: name}, ns))
	if ns.Labels["istio.io/dataplane-mode"] != "ambient" || ns.Labels["istio.io/use-waypoint"] != "cd-1-waypoint" || ns.Labels["istio-injection"] != "disabled" {
		t.Fatalf("labels after the correction %v: the mode's restored, the others kept", ns.Labels)
	}
}
