package workspace

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/childns"
)

// Children is what the reconciler needs from the per-child client cache (common/childcluster): the
// live Nodes and Pods of a ClusterDeployment's child cluster for the GPU gate, and a client for the
// release namespace, its ResourceQuota and teardown. Implementations keep one cached client per
// child, built from the `<cd>-kubeconfig` Secret, and rebuild it when the Secret rotates.
type Children interface {
	// Snapshot returns the child's Nodes and Pods from its cache, starting the cache and
	// waiting for its first sync when needed. An error means the child cannot be reached now.
	Snapshot(ctx context.Context, cd types.NamespacedName) ([]corev1.Node, []corev1.Pod, error)
	// DeviceResources returns the device resources the child's Nodes advertise
	// (childns.DeviceResources), computed once per change of the child's cached Nodes and Pods rather
	// than once per pass. The slice is shared: read it only. An error means the child cannot be
	// reached now.
	DeviceResources(ctx context.Context, cd types.NamespacedName) ([]corev1.ResourceName, error)
	// Identity returns the identity of the child cluster (the UID of its kube-system namespace);
	// empty when not known.
	Identity(ctx context.Context, cd types.NamespacedName) types.UID
	// Peers returns the other ClusterDeployments connected to the same child cluster now, without
	// connecting.
	Peers(cd types.NamespacedName) []types.NamespacedName
	// Refusals returns what the child's cache holds of one namespace for reading why its pods are
	// not running (childns.Cached): its non-terminal Pods (with the PodScheduled condition of those
	// Unschedulable) and, when watched and listed, its workload Events. An error means the child
	// cannot be read now.
	Refusals(ctx context.Context, cd types.NamespacedName, namespace string) (childns.Cached, error)
	// Client returns a client for the child whose Gets of the controller's own release namespaces,
	// their ResourceQuotas and NetworkPolicies are served from the child's watch of them when it holds
	// them (childcluster.Cluster.OwnedClient); every other read and every write goes to the child. An
	// error means the child cannot be reached now.
	Client(ctx context.Context, cd types.NamespacedName) (client.Client, error)
	// Find reports whether the child's kubeconfig exists: `<cd>-kubeconfig`, or the Secret of an
	// adopted (SveltosCluster) or regional (Region) cluster. Nil when found; an error with reason
	// KubeconfigMissing (childcluster.UnreachableReason) naming what is missing; another error when a
	// lookup failed. indirect is true for an adopted or regional cluster.
	Find(ctx context.Context, cd types.NamespacedName) (indirect bool, err error)
	// Forget stops and drops the child's cache, when its ClusterDeployment or Secret is gone.
	Forget(cd types.NamespacedName)
	// Size is the number of children cached now, for the cache-size metric.
	Size() int
}

// Adopted and regional clusters are reached through their SveltosCluster or their Region
// (common/childcluster), which the cache reads:
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=credentials;regions,verbs=get
// +kubebuilder:rbac:groups=lib.projectsveltos.io,resources=sveltosclusters,verbs=get

// CacheChildren adapts a common/childcluster Cache to Children.
type CacheChildren struct {
	Cache *childcluster.Cache
}

// Identity implements Children: the identity the child showed at connect. It waits for a connect,
// as Snapshot does.
func (c CacheChildren) Identity(ctx context.Context, cd types.NamespacedName) types.UID {
	cl, err := c.Cache.Get(ctx, cd.Namespace, cd.Name)
	if err != nil {
		return ""
	}
	return cl.Identity()
}

// Peers implements Children.
func (c CacheChildren) Peers(cd types.NamespacedName) []types.NamespacedName {
	return c.Cache.Peers(cd)
}

// Snapshot implements Children.
func (c CacheChildren) Snapshot(ctx context.Context, cd types.NamespacedName) ([]corev1.Node, []corev1.Pod, error) {
	cl, err := c.Cache.Get(ctx, cd.Namespace, cd.Name)
	if err != nil {
		return nil, nil, err
	}
	if err := cl.Err(); err != nil {
		return nil, nil, err
	}
	return cl.Nodes(), cl.Pods(), nil
}

// DeviceResources implements Children.
func (c CacheChildren) DeviceResources(ctx context.Context, cd types.NamespacedName) ([]corev1.ResourceName, error) {
	cl, err := c.Cache.Get(ctx, cd.Namespace, cd.Name)
	if err != nil {
		return nil, err
	}
	if err := cl.Err(); err != nil {
		return nil, err
	}
	devices, _ := cl.Memo("childns.DeviceResources", func() any { return childns.DeviceResources(cl.Nodes()) }).([]corev1.ResourceName)
	return devices, nil
}

// Refusals implements Children.
func (c CacheChildren) Refusals(ctx context.Context, cd types.NamespacedName, namespace string) (childns.Cached, error) {
	cl, err := c.Cache.Get(ctx, cd.Namespace, cd.Name)
	if err != nil {
		return childns.Cached{}, err
	}
	if err := cl.Err(); err != nil {
		return childns.Cached{}, err
	}
	events, known := cl.WorkloadEvents(namespace)
	return childns.Cached{Pods: cl.PodsIn(namespace), Events: events, EventsKnown: known}, nil
}

// Client implements Children.
func (c CacheChildren) Client(ctx context.Context, cd types.NamespacedName) (client.Client, error) {
	cl, err := c.Cache.Get(ctx, cd.Namespace, cd.Name)
	if err != nil {
		return nil, err
	}
	if err := cl.Err(); err != nil {
		return nil, err
	}
	return cl.OwnedClient(), nil
}

// Find implements Children.
func (c CacheChildren) Find(ctx context.Context, cd types.NamespacedName) (bool, error) {
	return c.Cache.Find(ctx, cd)
}

// Forget implements Children.
func (c CacheChildren) Forget(cd types.NamespacedName) { c.Cache.Forget(cd) }

// Size implements Children.
func (c CacheChildren) Size() int { return len(c.Cache.Keys()) }
