package owned

import "strconv"

// OlderVersion reports whether resourceVersion a is older than b: how the memories of this process's
// own writes (the gate's admissions and placements, the reconciler's status writes) tell a cached
// object older than the write. Resource versions are opaque, but the API server's are increasing
// integers; anything else is treated as not older, so the cache is trusted.
func OlderVersion(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}
