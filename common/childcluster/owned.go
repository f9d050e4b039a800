package childcluster

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"unique"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
			&corev1.Namespace{}, onEvent, inNamespace),
		quotas: newOwnedWatcher("childcluster owned quotas "+key, selector,
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.ResourceQuotas(metav1.NamespaceAll).List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return core.ResourceQuotas(metav1.NamespaceAll).Watch(ctx, o)
			},
			&corev1.ResourceQuota{}, onEvent, inNamespace),
		policies: newOwnedWatcher("childcluster owned networkpolicies "+key, selector,
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return networking.NetworkPolicies(metav1.NamespaceAll).List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return networking.NetworkPolicies(metav1.NamespaceAll).Watch(ctx, o)
			},
			&networkingv1.NetworkPolicy{}, onEvent, inNamespace),
	}
}

// newOwnedWatcher returns the watch of one kind of owned objects. Its store tells only what someone
// may have done to them: an object changed (in what changed reports) or gone, never one that came
// (the controller made it, or it came back into the selector, which the controller's labels do), and
// a relisting names each object it found changed or gone.
func newOwnedWatcher(name, selector string,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	expected client.Object, onEvent func(), onChange func(key string)) *watcher {
	w := newWatcher(name, &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return unlessForbidden(ctx)(list(ctx, o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return watchFn(ctx, o)
		},
	}, expected, trimOwned, ownedChanged, onEvent, onChange)
	w.store.quietAdds = true
	return w
}

// ownedObject is what the cache keeps of an owned object: its name, namespace, uid,
// resourceVersion, labels (their keys shared with every other kept object's), annotations and
// deletion, a Namespace's phase, and a quota's or a policy's spec as its JSON. Managed fields, the
// last-applied annotation, finalizers and a quota's status (which the child's quota controller
// rewrites at each pod change in the namespace) are dropped. A release namespace with its quota and
// policy costs about 2.7 KB here instead of the 4.6 KB of the decoded objects.
type ownedObject struct {
	metav1.ObjectMeta
	Phase corev1.NamespacePhase
	Spec  string
}

// GetObjectKind implements runtime.Object.
func (o *ownedObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (o *ownedObject) DeepCopyObject() runtime.Object {
	out := *o
	o.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// trimOwned turns a Namespace, ResourceQuota or NetworkPolicy into an ownedObject.
func trimOwned(obj any) any {
	o, ok := obj.(client.Object)
	if !ok {
		return obj // tombstones and the like pass through
	}
	out := &ownedObject{ObjectMeta: metav1.ObjectMeta{Name: o.GetName(), Namespace: unique.Make(o.GetNamespace()).Value(),
		UID: o.GetUID(), ResourceVersion: o.GetResourceVersion(), DeletionTimestamp: o.GetDeletionTimestamp(),
		Labels: internKeys(o.GetLabels()), Annotations: internKeys(o.GetAnnotations())}}
	delete(out.Annotations, corev1.LastAppliedConfigAnnotation)
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	var spec any
	switch v := o.(type) {
	case *corev1.Namespace:
		out.Phase = v.Status.Phase
	case *corev1.ResourceQuota:
		spec = &v.Spec
	case *networkingv1.NetworkPolicy:
		spec = &v.Spec
	default:
		return obj
	}
	if spec != nil {
		data, err := json.Marshal(spec)
		if err != nil {
			return obj // cannot happen for these types; kept whole
		}
		out.Spec = string(data)
	}
	return out
}

// internKeys returns m with its keys shared with every other kept object's (nil for none).
func internKeys(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[unique.Make(k).Value()] = v
	}
	return out
}

// ownedChanged reports whether two kept objects differ in what a controller sets or reads: labels,
// annotations, owner, deletion, a Namespace's phase, a quota's or a policy's spec.
func ownedChanged(a, b any) bool {
	o, ok1 := a.(*ownedObject)
	n, ok2 := b.(*ownedObject)
	return !ok1 || !ok2 || o.UID != n.UID || o.Phase != n.Phase || o.Spec != n.Spec ||
		!maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
		(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
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

// copyInto rebuilds a kept object into obj of its type; false for another type, or a spec that
// does not decode (which cannot happen: it was encoded from that type).
func copyInto(kept any, obj client.Object) bool {
	k, ok := kept.(*ownedObject)
	if !ok {
		return false
	}
	var meta metav1.ObjectMeta
	k.ObjectMeta.DeepCopyInto(&meta)
	switch out := obj.(type) {
	case *corev1.Namespace:
		*out = corev1.Namespace{ObjectMeta: meta, Status: corev1.NamespaceStatus{Phase: k.Phase}}
		return true
	case *corev1.ResourceQuota:
		*out = corev1.ResourceQuota{ObjectMeta: meta}
		return json.Unmarshal([]byte(k.Spec), &out.Spec) == nil
	case *networkingv1.NetworkPolicy:
		*out = networkingv1.NetworkPolicy{ObjectMeta: meta}
		return json.Unmarshal([]byte(k.Spec), &out.Spec) == nil
	}
	return false
}
