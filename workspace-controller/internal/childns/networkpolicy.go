package childns

// The release namespace's ingress isolation: a NetworkPolicy that admits traffic to the workspace's
// pods only from the namespace itself, the data planes that route to it, and the class's allowFrom.

import (
	"context"
	"sort"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/component"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// NetworkPolicyName is the name of the release namespace's NetworkPolicy.
const NetworkPolicyName = "workspace-ingress"

// namespaceNameLabel is the label the API server sets on every namespace to its name.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// IngressPolicy is the NetworkPolicy spec a class asks for in its release namespaces, or nil for
// none (isolation None). dataPlanes are the namespaces whose pods route to workspaces (the Gateway's
// and the mesh's).
func IngressPolicy(class *workspacesv1.WorkspaceClass, dataPlanes []string) *networkingv1.NetworkPolicySpec {
	var np *workspacesv1.ReleaseNetworkPolicy
	if class != nil {
		np = class.Spec.NetworkPolicy
	}
	if np != nil && np.Isolation == workspacesv1.NetworkIsolationNone {
		return nil
	}
	peers := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	planes := map[string]bool{}
	for _, n := range dataPlanes {
		if n != "" {
			planes[n] = true
		}
	}
	if len(planes) > 0 {
		names := make([]string, 0, len(planes))
		for n := range planes {
			names = append(names, n)
		}
		sort.Strings(names)
		peers = append(peers, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpIn, Values: names}}}})
	}
	if np != nil {
		peers = append(peers, np.AllowFrom...)
	}
	return &networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: peers}},
	}
}

// ensureNetworkPolicy makes, corrects or (want nil) removes the release namespace's NetworkPolicy,
// and reports whether it changed one that existed; fresh says the namespace was just made.
func ensureNetworkPolicy(ctx context.Context, cl client.Client, namespace string, want *networkingv1.NetworkPolicySpec, fresh bool) (bool, error) {
	got := &networkingv1.NetworkPolicy{}
	var err error
	if fresh {
		err = apierrors.NewNotFound(networkingv1.Resource("networkpolicies"), NetworkPolicyName)
	} else {
		err = cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: NetworkPolicyName}, got)
	}
	switch {
	case apierrors.IsNotFound(err):
		if want == nil {
			return false, nil
		}
		obj := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: NetworkPolicyName, Labels: map[string]string{owned.LabelManagedBy: component.Name}},
			Spec:       *want,
		}
		if err := cl.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err
		}
		return false, nil
	case err != nil:
		return false, err
	case want == nil:
		if got.Labels[owned.LabelManagedBy] != component.Name {
			return false, nil // not the controller's: left alone
		}
		return true, client.IgnoreNotFound(cl.Delete(ctx, got, client.Preconditions{UID: &got.UID}))
	case equality.Semantic.DeepEqual(got.Spec, *want):
		return false, nil
	}
	base := got.DeepCopy()
	got.Spec = *want
	return true, cl.Patch(ctx, got, client.MergeFrom(base))
}
