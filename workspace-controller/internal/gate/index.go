package gate

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/cacheread"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// A GPU decision reads every workspace and ServiceSet on its child cluster. Listing them through the
// cached client copies each one's struct, and at a thousand workspaces on one child that copy, and
// sorting the copies, was most of a decision's CPU (make bench, class gpu). The gate reads the cache's
// field indexes instead (internal/cacheread) and keeps the cache's own objects: it only reads them.

// workspacesBy returns the cached workspaces whose field index holds value: the cache's own objects
// (or, when the cache cannot be read by its indexes, the items of a list made without a deep copy),
// read only.
func (g *Gate) workspacesBy(ctx context.Context, index, value string) ([]*workspacesv1.WorkspaceDeployment, error) {
	if out, ok, err := cacheread.ByIndex[workspacesv1.WorkspaceDeployment](ctx, g.informers, index, value); ok || err != nil {
		return out, err
	}
	var list workspacesv1.WorkspaceDeploymentList
	if err := g.client.List(ctx, &list, client.MatchingFields{index: value}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*workspacesv1.WorkspaceDeployment, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// serviceSetsBy returns the cached ServiceSets whose field index holds value and that carry a
// workspace label: read only, as workspacesBy's.
func (g *Gate) serviceSetsBy(ctx context.Context, index, value string) ([]*k0rdentv1beta1.ServiceSet, error) {
	var out []*k0rdentv1beta1.ServiceSet
	sets, ok, err := cacheread.ByIndex[k0rdentv1beta1.ServiceSet](ctx, g.informers, index, value)
	if err != nil {
		return nil, err
	}
	if ok {
		for _, set := range sets {
			if _, labelled := set.Labels[workspacesv1.WorkspaceLabel]; labelled {
				out = append(out, set)
			}
		}
		return out, nil
	}
	var list k0rdentv1beta1.ServiceSetList
	if err := g.client.List(ctx, &list, client.MatchingFields{index: value}, client.UnsafeDisableDeepCopy,
		client.HasLabels{workspacesv1.WorkspaceLabel}); err != nil {
		return nil, err
	}
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// cached reads what a namespace's quota counts from the manager's cache: the cache's own objects by
// its indexes when informers can be read so (see cacheread), else the items of lists made without a
// deep copy. Read only, as workspacesBy's.
type cached struct {
	client    client.Reader
	informers cache.Informers
}

// cache is the gate's reader of its namespace counts.
func (g *Gate) cache() cached { return cached{client: g.client, informers: g.informers} }

// workspacesIn returns the cached workspaces of a namespace.
func (c cached) workspacesIn(ctx context.Context, namespace string) ([]*workspacesv1.WorkspaceDeployment, error) {
	if out, ok, err := cacheread.InNamespace[workspacesv1.WorkspaceDeployment](ctx, c.informers, namespace); ok || err != nil {
		return out, err
	}
	var list workspacesv1.WorkspaceDeploymentList
	if err := c.client.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing workspaces of %s: %w", namespace, err)
	}
	out := make([]*workspacesv1.WorkspaceDeployment, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// serviceSetsOf returns the cached ServiceSets of the workspaces of a namespace (those labelled
// with it: workspacesv1.WorkspaceNamespaceLabel).
func (c cached) serviceSetsOf(ctx context.Context, namespace string) ([]*k0rdentv1beta1.ServiceSet, error) {
	if out, ok, err := cacheread.ByIndex[k0rdentv1beta1.ServiceSet](ctx, c.informers, owned.IndexServiceSetWorkspaceNamespace, namespace); ok || err != nil {
		return out, err
	}
	var list k0rdentv1beta1.ServiceSetList
	if err := c.client.List(ctx, &list, client.MatchingLabels{workspacesv1.WorkspaceNamespaceLabel: namespace}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ServiceSets of the workspaces of %s: %w", namespace, err)
	}
	out := make([]*k0rdentv1beta1.ServiceSet, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
