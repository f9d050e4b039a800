package childcluster

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/exalsius/exalsius-operator/common/testing/childtest"
)

const ownedLabel, ownedSelector = "owned-by", "owned-by=test"

// ownedObjects are a release namespace, its quota and its network policy, labelled as the caller's.
func ownedObjects(ns string) []client.Object {
	labels := map[string]string{ownedLabel: "test"}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}},
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpu", Labels: labels},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("1")}}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ingress", Labels: labels},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}},
	}
}

// TestOwnedClientReadsTheWatch: with OwnedSelector, Gets of the selected Namespaces, ResourceQuotas
// and NetworkPolicies are answered from the watch, as copies, without a request to the child (the
// credentials here may list and watch them but not get them); a Get of an object the selector leaves
// out goes to the child.
func TestOwnedClientReadsTheWatch(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "owned")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "list-only"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces", "resourcequotas"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"list", "watch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "list-only"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "list-only"}}}
	objs := append(ownedObjects("ws-a"), role, binding, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain"}})
	for _, o := range objs {
		if err := child.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	user, err := child.Env.AddUser(envtest.User{Name: "list-only"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "owned", Name: "alpha"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, kc); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Options{OwnedSelector: ownedSelector})
	cl, err := c.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if err := cl.Client().Get(ctx, client.ObjectKey{Name: "ws-a"}, &corev1.Namespace{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a Get on the child with credentials that may only list: %v, want forbidden", err)
	}
	oc := cl.OwnedClient()
	ns := &corev1.Namespace{}
	eventually(t, "the owned namespace read from the watch", func() (bool, string) {
		err := oc.Get(ctx, client.ObjectKey{Name: "ws-a"}, ns)
		return err == nil, fmt.Sprint(err)
	})
	if ns.Labels[ownedLabel] != "test" || ns.ManagedFields != nil {
		t.Fatalf("namespace %+v: want its labels, without managed fields", ns.ObjectMeta)
	}
	ns.Labels[ownedLabel] = "changed by the reader"
	again := &corev1.Namespace{}
	if err := oc.Get(ctx, client.ObjectKey{Name: "ws-a"}, again); err != nil || again.Labels[ownedLabel] != "test" {
		t.Fatalf("a second read %v %v: want the kept object untouched by the first reader", again.Labels, err)
	}
	quota := &corev1.ResourceQuota{}
	policy := &networkingv1.NetworkPolicy{}
	eventually(t, "the owned quota and policy read from the watch", func() (bool, string) {
		errQ := oc.Get(ctx, client.ObjectKey{Namespace: "ws-a", Name: "gpu"}, quota)
		errP := oc.Get(ctx, client.ObjectKey{Namespace: "ws-a", Name: "ingress"}, policy)
		return errQ == nil && errP == nil, fmt.Sprint(errQ, errP)
	})
	if got := quota.Spec.Hard["requests.nvidia.com/gpu"]; got.Value() != 1 || len(policy.Spec.PolicyTypes) != 1 {
		t.Fatalf("quota %v, policy %+v: want them as made", quota.Spec.Hard, policy.Spec)
	}
	if err := oc.Get(ctx, client.ObjectKey{Name: "plain"}, &corev1.Namespace{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a namespace the selector leaves out: %v, want it read on the child (forbidden here)", err)
	}
	if err := oc.Get(ctx, client.ObjectKey{Namespace: "ws-a", Name: "absent"}, &corev1.ResourceQuota{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a quota the watch does not hold: %v, want it read on the child (forbidden here)", err)
	}
}

// TestOwnedChangesAreTold: what someone does to an owned object (a quota raised, the namespace
// relabelled, a policy deleted) is told as a change of the owned objects of its namespace; objects
// that came and a quota's new status are not.
func TestOwnedChangesAreTold(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "ownedchanges")
	key := types.NamespacedName{Namespace: "ownedchanges", Name: "alpha"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Options{OwnedSelector: ownedSelector})
	events, cancel := c.subscribe()
	defer cancel()
	cl, err := c.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	expectChange(t, events, key, "anything changed (the connect)", func(c Change) bool { return c.All })
	oc := cl.OwnedClient()
	eventually(t, "the owned watches listed", func() (bool, string) {
		for _, w := range cl.owned.all() {
			if !w.HasSynced() {
				return false, "not yet"
			}
		}
		return true, ""
	})

	objs := ownedObjects("ws-b")
	for _, o := range objs {
		if err := child.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	quota := objs[1].(*corev1.ResourceQuota)
	quota.Status.Hard = quota.Spec.Hard.DeepCopy()
	quota.Status.Used = corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("1")}
	if err := child.Client.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new objects and the quota's status in the watch", func() (bool, string) {
		q := &corev1.ResourceQuota{}
		errQ := oc.Get(ctx, client.ObjectKeyFromObject(quota), q)
		errN := oc.Get(ctx, client.ObjectKey{Name: "ws-b"}, &corev1.Namespace{})
		errP := oc.Get(ctx, client.ObjectKeyFromObject(objs[2]), &networkingv1.NetworkPolicy{})
		return errQ == nil && errN == nil && errP == nil && q.ResourceVersion == quota.ResourceVersion, fmt.Sprint(errQ, errN, errP, q.ResourceVersion)
	})
	// A Pod change as a marker: every change told before it (the creates and the status, folded or
	// not) is in hand once it is.
	if err := childtest.CreatePod(ctx, child.Client, childtest.Pod{Namespace: "marker", Name: "p"}); err != nil {
		t.Fatal(err)
	}
	var seen []Change
	expectChange(t, events, key, "the marker pod", func(c Change) bool {
		seen = append(seen, c)
		return c.PodsOf("marker")
	})
	for _, ch := range seen {
		if !ch.All && ch.OwnedIn("ws-b") {
			t.Fatalf("creates and a new quota status told %+v, want no change of the owned objects", ch)
		}
	}

	ownedChange := func(what string) {
		t.Helper()
		expectChange(t, events, key, what, func(c Change) bool { return !c.All && slices.Equal(c.Owned, []string{"ws-b"}) })
	}
	base := quota.DeepCopy()
	quota.Spec.Hard["requests.nvidia.com/gpu"] = resource.MustParse("8")
	if err := child.Client.Patch(ctx, quota, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	ownedChange("the quota raised")
	ns := objs[0].(*corev1.Namespace)
	nsBase := ns.DeepCopy()
	ns.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
	if err := child.Client.Patch(ctx, ns, client.MergeFrom(nsBase)); err != nil {
		t.Fatal(err)
	}
	ownedChange("the namespace relabelled")
	if err := child.Client.Delete(ctx, objs[2]); err != nil {
		t.Fatal(err)
	}
	ownedChange("the policy deleted")
	eventually(t, "the deleted policy read on the child", func() (bool, string) {
		err := oc.Get(ctx, client.ObjectKeyFromObject(objs[2]), &networkingv1.NetworkPolicy{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
