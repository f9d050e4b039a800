// Package cacheread reads the manager's cache without copying: the informers' own objects, by a
// field index or all of one kind. Listing through the cached client copies each object's struct into
// the list even without a deep copy; at thousands of workspaces that copy, made by every GPU decision
// and every metrics scrape, was most of their CPU and of the garbage the collector chased (make bench,
// make bench-envelope). The objects returned are the cache's: the caller only reads them, and never
// keeps them past the moment.
package cacheread

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fieldIndexName and allNamespaces are how the manager's cache names a field index registered with
// IndexField (what client.MatchingFields reads) and the key under which it files an object's value
// for a lookup across namespaces. The workspace package's TestGateReadsTheCacheIndexes holds them to
// the cache's own List.
const (
	fieldIndexName = "field:"
	allNamespaces  = "__all_namespaces/"
)

// indexer returns the store of the informer of obj's kind, or nil when informers is nil or the
// informer keeps no store to read (a cache restricted to some namespaces has one informer per
// namespace): then the caller lists through the client.
func indexer(ctx context.Context, informers cache.Informers, obj client.Object) (toolscache.Indexer, error) {
	if informers == nil {
		return nil, nil
	}
	inf, err := informers.GetInformer(ctx, obj)
	if err != nil {
		return nil, fmt.Errorf("reading the cache's informer of %T: %w", obj, err)
	}
	shared, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, nil
	}
	return shared.GetIndexer(), nil
}

// ByIndex returns the cached objects of PT's kind whose field index holds value, across namespaces,
// and true; false when the cache cannot be read this way (see indexer).
func ByIndex[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, informers cache.Informers, index, value string) ([]PT, bool, error) {
	idx, err := indexer(ctx, informers, PT(new(T)))
	if idx == nil || err != nil {
		return nil, false, err
	}
	objs, err := idx.ByIndex(fieldIndexName+index, allNamespaces+value)
	if err != nil {
		return nil, false, fmt.Errorf("reading the cache's index %s: %w", index, err)
	}
	return typed[T, PT](objs), true, nil
}

// InNamespace returns the cached objects of PT's kind in one namespace (the informer's namespace
// index), and true; false when the cache cannot be read this way (see indexer).
func InNamespace[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, informers cache.Informers, namespace string) ([]PT, bool, error) {
	idx, err := indexer(ctx, informers, PT(new(T)))
	if idx == nil || err != nil {
		return nil, false, err
	}
	objs, err := idx.ByIndex(toolscache.NamespaceIndex, namespace)
	if err != nil {
		return nil, false, fmt.Errorf("reading the cache's namespace index: %w", err)
	}
	return typed[T, PT](objs), true, nil
}

// All returns every cached object of PT's kind, and true; false when the cache cannot be read this
// way (see indexer).
func All[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, informers cache.Informers) ([]PT, bool, error) {
	idx, err := indexer(ctx, informers, PT(new(T)))
	if idx == nil || err != nil {
		return nil, false, err
	}
	return typed[T, PT](idx.List()), true, nil
}

func typed[T any, PT interface {
	*T
	client.Object
}](objs []any) []PT {
	out := make([]PT, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(PT); ok {
			out = append(out, t)
		}
	}
	return out
}
