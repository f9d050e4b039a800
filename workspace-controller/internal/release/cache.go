package release

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// cachedValuesPrefix starts the digest that stands, in the cache, for a ServiceSet service's inline
// values. A NUL byte never starts a values document, so a digest is never taken for values.
const cachedValuesPrefix = "\x00sha256:"

// ValuesDigest is the digest of inline values as the cache keeps them: values that are a digest
// already are returned as they are, so a cached service and a desired one compare by digest.
func ValuesDigest(values string) string {
	if values == "" || strings.HasPrefix(values, cachedValuesPrefix) {
		return values
	}
	sum := sha256.Sum256([]byte(values))
	return cachedValuesPrefix + hex.EncodeToString(sum[:])
}

// StripServiceSetValues is the cache transform of ServiceSets: each service's inline values, up to the
// limits of values per workspace and a copy per ServiceSet, are replaced by their digest (and
// managedFields are dropped, as for every cached object). The controller compares values by digest
// and writes ServiceSets by merge patches of the fields it sets, so the digest never reaches the API
// server.
func StripServiceSetValues(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if err != nil {
		return obj, err
	}
	if ss, ok := obj.(*k0rdentv1beta1.ServiceSet); ok {
		for i := range ss.Spec.Services {
			ss.Spec.Services[i].Values = ValuesDigest(ss.Spec.Services[i].Values)
		}
	}
	return obj, nil
}

// CacheByObject is the workspace-controller's per-kind cache configuration, for the manager's
// cache.Options.ByObject.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{&k0rdentv1beta1.ServiceSet{}: {Transform: StripServiceSetValues}}
}
