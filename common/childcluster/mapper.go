package childcluster

import (
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// resourceLister reads one group version's resources from a cluster's discovery API (GET /api/v1 or
// /apis/<group>/<version>); a discovery client is one.
type resourceLister interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// versionMapper is a child client's REST mapper. A kind asked for with its versions, as the client
// asks, is mapped from the discovery document of those group versions alone, read at the kind's first
// use, and only the kind's resource name and scope are kept.
//
// controller-runtime's dynamic mapper, at its first use against a server that offers aggregated
// discovery, reads and keeps every group and resource the child serves (about 250 KB per child, as
// much as the child's Nodes and Pods in the watch of a small cluster), and reads all of it again
// each time a kind of a group the child does not serve is asked for (routing asks for the Gateway
// API's kinds on children without them). It still answers what this mapper does not: a kind asked
// for without a version, and the mappings from a resource to its kind.
//
// A kind not found in a group version kept from an earlier read makes the mapper read that group
// version again (a CRD installed since may have added it); a group version the child does not serve
// is not kept, so its installation is seen at the next request. The read holds the mapper's lock,
// as the dynamic mapper's does: its HTTP client has a time limit of its own, so a child that stopped
// answering holds each waiting request for that long at most.
type versionMapper struct {
	discovery resourceLister
	fallback  meta.RESTMapper

	mu  sync.Mutex
	gvs map[schema.GroupVersion]map[string]mappedKind
}

// mappedKind is what a mapping needs of a kind's resource.
type mappedKind struct {
	resource   string
	namespaced bool
}

var _ meta.RESTMapper = (*versionMapper)(nil)

func newVersionMapper(discovery resourceLister, fallback meta.RESTMapper) *versionMapper {
	return &versionMapper{discovery: discovery, fallback: fallback, gvs: map[schema.GroupVersion]map[string]mappedKind{}}
}

// versionsGiven reports whether versions names at least one version (a client passes [""] for a
// kind without one).
func versionsGiven(versions []string) bool {
	for _, v := range versions {
		if v != "" {
			return true
		}
	}
	return false
}

// RESTMapping maps gk in the first of versions the child serves it in. Without a version it asks
// the fallback.
func (m *versionMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if !versionsGiven(versions) {
		return m.fallback.RESTMapping(gk, versions...)
	}
	out, err := m.mappings(gk, versions, true)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// RESTMappings maps gk in each of versions the child serves it in. Without a version it asks the
// fallback.
func (m *versionMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	if !versionsGiven(versions) {
		return m.fallback.RESTMappings(gk, versions...)
	}
	return m.mappings(gk, versions, false)
}

// mappings maps gk in versions, in their order, stopping at the first served when first is set; a
// no-match error when the child serves gk in none of them.
func (m *versionMapper) mappings(gk schema.GroupKind, versions []string, first bool) ([]*meta.RESTMapping, error) {
	var out []*meta.RESTMapping
	for _, v := range versions {
		if v == "" {
			continue
		}
		mapping, err := m.lookup(gk, v)
		if err != nil {
			return nil, err
		}
		if mapping != nil {
			out = append(out, mapping)
			if first {
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
	}
	return out, nil
}

// lookup maps gk in version, reading the group version's resources when they are not kept or do not
// have gk. A group version the child does not serve maps nothing, without an error.
func (m *versionMapper) lookup(gk schema.GroupKind, version string) (*meta.RESTMapping, error) {
	gv := schema.GroupVersion{Group: gk.Group, Version: version}
	m.mu.Lock()
	defer m.mu.Unlock()
	kinds, kept := m.gvs[gv]
	k, found := kinds[gk.Kind]
	if !found {
		var err error
		if kinds, err = m.read(gv); err != nil {
			return nil, err
		}
		if kinds == nil {
			if kept {
				delete(m.gvs, gv)
			}
			return nil, nil
		}
		m.gvs[gv] = kinds
		if k, found = kinds[gk.Kind]; !found {
			return nil, nil
		}
	}
	scope := meta.RESTScopeRoot
	if k.namespaced {
		scope = meta.RESTScopeNamespace
	}
	return &meta.RESTMapping{Resource: gv.WithResource(k.resource), GroupVersionKind: gv.WithKind(gk.Kind), Scope: scope}, nil
}

// read reads gv's resources: nil when the child does not serve gv. Subresources are left out.
func (m *versionMapper) read(gv schema.GroupVersion) (map[string]mappedKind, error) {
	list, err := m.discovery.ServerResourcesForGroupVersion(gv.String())
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the resources of %s from the cluster's discovery API: %w", gv, err)
	}
	kinds := make(map[string]mappedKind, len(list.APIResources))
	for _, r := range list.APIResources {
		if strings.Contains(r.Name, "/") || r.Kind == "" {
			continue
		}
		if _, dup := kinds[r.Kind]; !dup {
			kinds[r.Kind] = mappedKind{resource: r.Name, namespaced: r.Namespaced}
		}
	}
	return kinds, nil
}

// KindFor asks the fallback.
func (m *versionMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return m.fallback.KindFor(resource)
}

// KindsFor asks the fallback.
func (m *versionMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return m.fallback.KindsFor(resource)
}

// ResourceFor asks the fallback.
func (m *versionMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return m.fallback.ResourceFor(input)
}

// ResourcesFor asks the fallback.
func (m *versionMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return m.fallback.ResourcesFor(input)
}

// ResourceSingularizer asks the fallback.
func (m *versionMapper) ResourceSingularizer(resource string) (string, error) {
	return m.fallback.ResourceSingularizer(resource)
}
