package childcluster

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	networkingv1client "k8s.io/client-go/kubernetes/typed/networking/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The objects a controller keeps on a child (Options.OwnedSelector): the Namespaces, ResourceQuotas
// and NetworkPolicies carrying its label. Watching them lets the controller read them without a round
// trip to the child on every pass (Cluster.OwnedClient), and learn at once when someone else changes
// or deletes one (Change.Owned), so that it puts them back without waiting for another event.

// ownedWatchers are the watches of the owned objects, nil when Options.OwnedSelector is empty.
type ownedWatchers struct {
	namespaces, quotas, policies *watcher
}

// all returns the watchers.
func (o *ownedWatchers) all() []*watcher {
	if o == nil {
		return nil
	}
	return []*watcher{o.namespaces, o.quotas, o.policies}
}

// forObject returns the watcher keeping objects of obj's type, nil for another type.
func (o *ownedWatchers) forObject(obj client.Object) *watcher {
	if o == nil {
		return nil
	}
	switch obj.(type) {
	case *corev1.Namespace:
		return o.namespaces
	case *corev1.ResourceQuota:
		return o.quotas
	case *networkingv1.NetworkPolicy:
		return o.policies
	}
	return nil
}

// newOwnedWatchers returns the watches of the objects selector selects. Their failures are not the
// child's, as for the workload Events: credentials that may not list them leave them to be read on
// the child, and never make it unreachable. A connect does not wait for them.
func newOwnedWatchers(key string, core corev1client.CoreV1Interface, networking networkingv1client.NetworkingV1Interface,
	selector string, onEvent func(), onChange func(delta)) *ownedWatchers {
	inNamespace := func(key string) {
		// A Namespace's key is its name; a namespaced object's is namespace/name.
		ns, _, _ := strings.Cut(key, "/")
		onChange(ownedIn(ns))
	}
	return &ownedWatchers{
		namespaces: newOwnedWatcher("childcluster owned namespaces "+key, selector,
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.Namespaces().List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return core.Namespaces().Watch(ctx, o)
			},
			&corev1.Namespace{}, namespaceChanged, onEvent, inNamespace),
		quotas: newOwnedWatcher("childcluster owned quotas "+key, selector,
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.ResourceQuotas(metav1.NamespaceAll).List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return core.ResourceQuotas(metav1.NamespaceAll).Watch(ctx, o)
			},
			&corev1.ResourceQuota{}, quotaChanged, onEvent, inNamespace),
		policies: newOwnedWatcher("childcluster owned networkpolicies "+key, selector,
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return networking.NetworkPolicies(metav1.NamespaceAll).List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return networking.NetworkPolicies(metav1.NamespaceAll).Watch(ctx, o)
			},
			&networkingv1.NetworkPolicy{}, policyChanged, onEvent, inNamespace),
	}
}

// newOwnedWatcher returns the watch of one kind of owned objects. Its store tells only what someone
// may have done to them: an object changed (in what changed reports) or gone, never one that came
// (the controller made it, or it came back into the selector, which the controller's labels do), and
// a relisting names each object it found changed or gone.
func newOwnedWatcher(name, selector string,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	expected client.Object, changed func(a, b client.Object) bool, onEvent func(), onChange func(key string)) *watcher {
	w := newWatcher(name, &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return unlessForbidden(ctx)(list(ctx, o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return watchFn(ctx, o)
		},
	}, expected, trimOwned, func(a, b any) bool {
		o, ok1 := a.(client.Object)
		n, ok2 := b.(client.Object)
		return !ok1 || !ok2 || changed(o, n)
	}, onEvent, onChange)
	w.store.quietAdds = true
	return w
}

// trimOwned drops what a reading of an owned object never needs: its managed fields, its
// last-applied annotation, and a quota's status (which the child's quota controller rewrites at every
// pod change in the namespace).
func trimOwned(obj any) any {
	o, ok := obj.(client.Object)
	if !ok {
		return obj // tombstones and the like pass through
	}
	o.SetManagedFields(nil)
	if a := o.GetAnnotations(); a[corev1.LastAppliedConfigAnnotation] != "" {
		delete(a, corev1.LastAppliedConfigAnnotation)
		o.SetAnnotations(a)
	}
	if q, ok := o.(*corev1.ResourceQuota); ok {
		q.Status = corev1.ResourceQuotaStatus{}
	}
	return o
}

// metaChanged reports whether two kept objects differ in what a controller sets or reads of their
// metadata: labels, annotations, owner and deletion.
func metaChanged(a, b client.Object) bool {
	return a.GetUID() != b.GetUID() ||
		!equality.Semantic.DeepEqual(a.GetLabels(), b.GetLabels()) ||
		!equality.Semantic.DeepEqual(a.GetAnnotations(), b.GetAnnotations()) ||
		(a.GetDeletionTimestamp() == nil) != (b.GetDeletionTimestamp() == nil)
}

func namespaceChanged(a, b client.Object) bool {
	o, ok1 := a.(*corev1.Namespace)
	n, ok2 := b.(*corev1.Namespace)
	return !ok1 || !ok2 || metaChanged(o, n) || o.Status.Phase != n.Status.Phase
}

func quotaChanged(a, b client.Object) bool {
	o, ok1 := a.(*corev1.ResourceQuota)
	n, ok2 := b.(*corev1.ResourceQuota)
	return !ok1 || !ok2 || metaChanged(o, n) || !equality.Semantic.DeepEqual(o.Spec, n.Spec)
}

func policyChanged(a, b client.Object) bool {
	o, ok1 := a.(*networkingv1.NetworkPolicy)
	n, ok2 := b.(*networkingv1.NetworkPolicy)
	return !ok1 || !ok2 || metaChanged(o, n) || !equality.Semantic.DeepEqual(o.Spec, n.Spec)
}

// OwnedClient returns the child's direct client whose Gets of the owned objects (a Namespace,
// ResourceQuota or NetworkPolicy that Options.OwnedSelector selects) are served from the watch of
// them once it has listed the child and holds the object asked for; any other Get, every List and
// every write go to the child. An object the watch does not hold (absent, not selected, not listed
// yet, or its credentials may not list it) is read on the child, so a Get answers as the child
// would, as of the watch's last event. Without Options.OwnedSelector it is Client.
func (c *Cluster) OwnedClient() client.Client {
	if c.owned == nil {
		return c.client
	}
	return ownedClient{Client: c.client, owned: c.owned}
}

// ownedClient is Cluster.OwnedClient.
type ownedClient struct {
	client.Client
	owned *ownedWatchers
}

// Get implements client.Reader.
func (o ownedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if w := o.owned.forObject(obj); w != nil && len(opts) == 0 && w.HasSynced() {
		k := key.Name
		if key.Namespace != "" {
			k = key.Namespace + "/" + key.Name
		}
		if kept, ok := w.store.get(k); ok && copyInto(kept, obj) {
			return nil
		}
	}
	return o.Client.Get(ctx, key, obj, opts...)
}

// copyInto deep-copies a kept object into obj of the same type; false for another type.
func copyInto(kept any, obj client.Object) bool {
	switch out := obj.(type) {
	case *corev1.Namespace:
		if in, ok := kept.(*corev1.Namespace); ok {
			*out = corev1.Namespace{}
			in.DeepCopyInto(out)
			return true
		}
	case *corev1.ResourceQuota:
		if in, ok := kept.(*corev1.ResourceQuota); ok {
			*out = corev1.ResourceQuota{}
			in.DeepCopyInto(out)
			return true
		}
	case *networkingv1.NetworkPolicy:
		if in, ok := kept.(*networkingv1.NetworkPolicy); ok {
			*out = networkingv1.NetworkPolicy{}
			in.DeepCopyInto(out)
			return true
		}
	}
	return false
}
