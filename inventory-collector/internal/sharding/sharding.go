// Package sharding splits ClusterDeployments between inventory-collector replicas.
//
// Each replica runs one shard of a fixed number of shards (--shard-count) and is told its index
// (--shard-index, or the ordinal at the end of its StatefulSet pod name). A ClusterDeployment belongs
// to the shard with the highest rendezvous hash of (shard, namespace/name): every replica computes the
// same owner without talking to the others, and changing the shard count moves only the clusters that
// the new or removed shard wins or loses (about 1/n of them), not nearly all of them as a modulo would.
// docs/design/inventory-sharding.md argues the choice.
package sharding

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Shard is this replica's place among the shards.
type Shard struct {
	// Index is this replica's shard, in [0, Count).
	Index int
	// Count is the number of shards; 1 (or 0) means one replica watches every cluster.
	Count int
}

// Validate reports an out-of-range index or count, naming the flag.
func (s Shard) Validate() error {
	if s.Count < 0 {
		return fmt.Errorf("--shard-count: must be at least 1, got %d", s.Count)
	}
	if s.Count > 1 && (s.Index < 0 || s.Index >= s.Count) {
		return fmt.Errorf("--shard-index: must be in [0, %d), got %d", s.Count, s.Index)
	}
	return nil
}

// Sharded reports whether there is more than one shard.
func (s Shard) Sharded() bool { return s.Count > 1 }

// Owns reports whether the ClusterDeployment belongs to this shard.
func (s Shard) Owns(cd types.NamespacedName) bool {
	if s.Count <= 1 {
		return true
	}
	return Owner(cd, s.Count) == s.Index
}

// Owner returns the shard, in [0, count), that owns the ClusterDeployment: the one with the highest
// rendezvous weight.
func Owner(cd types.NamespacedName, count int) int {
	if count <= 1 {
		return 0
	}
	best, bestWeight := 0, uint64(0)
	for i := range count {
		if w := weight(i, cd); i == 0 || w > bestWeight {
			best, bestWeight = i, w
		}
	}
	return best
}

// weight hashes a shard index together with a ClusterDeployment's key, then mixes the result
// (splitmix64 finaliser) so that nearby inputs spread evenly.
func weight(shard int, cd types.NamespacedName) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(shard))
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte(cd.Namespace))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(cd.Name))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// IndexFromPodName returns the ordinal at the end of a StatefulSet pod name ("inventory-collector-2"
// gives 2).
func IndexFromPodName(name string) (int, error) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || i == len(name)-1 {
		return 0, fmt.Errorf("pod name %q has no ordinal suffix", name)
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 0 {
		return 0, fmt.Errorf("pod name %q has no ordinal suffix", name)
	}
	return n, nil
}

// ResolveIndex returns index when it is not negative; otherwise the ordinal of the pod name in the
// POD_NAME environment variable, or of the host name.
func ResolveIndex(index int) (int, error) {
	if index >= 0 {
		return index, nil
	}
	name := os.Getenv("POD_NAME")
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return 0, fmt.Errorf("--shard-index: not set and the host name is unknown: %w", err)
		}
		name = h
	}
	n, err := IndexFromPodName(name)
	if err != nil {
		return 0, fmt.Errorf("--shard-index: not set and %w", err)
	}
	return n, nil
}
