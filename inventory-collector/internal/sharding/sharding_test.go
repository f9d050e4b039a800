package sharding

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func keys(n int) []types.NamespacedName {
	out := make([]types.NamespacedName, n)
	for i := range out {
		out[i] = types.NamespacedName{Namespace: fmt.Sprintf("team-%d", i%7), Name: fmt.Sprintf("colony-cluster-%d", i)}
	}
	return out
}

func TestEveryClusterHasExactlyOneOwner(t *testing.T) {
	for _, count := range []int{1, 2, 3, 5, 8} {
		perShard := make([]int, count)
		for _, k := range keys(2000) {
			owners := 0
			for i := range count {
				if (Shard{Index: i, Count: count}).Owns(k) {
					owners++
					perShard[i]++
				}
			}
			if owners != 1 {
				t.Fatalf("count %d: %s has %d owners", count, k, owners)
			}
		}
		// Balance: no shard gets less than half or more than double its fair share.
		fair := 2000 / count
		for i, n := range perShard {
			if n < fair/2 || n > fair*2 {
				t.Fatalf("count %d: shard %d owns %d of 2000 (fair %d)", count, i, n, fair)
			}
		}
	}
}

func TestAddingAShardMovesFewClusters(t *testing.T) {
	ks := keys(3000)
	moved := 0
	for _, k := range ks {
		before, after := Owner(k, 4), Owner(k, 5)
		if before != after {
			if after != 4 {
				t.Fatalf("%s moved from %d to %d: only moves to the new shard are allowed", k, before, after)
			}
			moved++
		}
	}
	// About 1/5 move; a modulo would move about 4/5.
	if moved > len(ks)*2/5 {
		t.Fatalf("%d of %d clusters moved going from 4 to 5 shards", moved, len(ks))
	}
}

func TestStable(t *testing.T) {
	k := types.NamespacedName{Namespace: "a", Name: "b"}
	first := Owner(k, 7)
	for range 100 {
		if Owner(k, 7) != first {
			t.Fatal("owner must not change between calls")
		}
	}
}

func TestValidateAndPodName(t *testing.T) {
	if err := (Shard{Index: 3, Count: 3}).Validate(); err == nil {
		t.Fatal("index 3 of 3 must fail")
	}
	if err := (Shard{Index: 0, Count: -1}).Validate(); err == nil {
		t.Fatal("negative count must fail")
	}
	if err := (Shard{Index: 2, Count: 3}).Validate(); err != nil {
		t.Fatal(err)
	}
	if n, err := IndexFromPodName("inventory-collector-12"); err != nil || n != 12 {
		t.Fatalf("got %d, %v", n, err)
	}
	for _, bad := range []string{"nodash", "trailing-", "name-x"} {
		if _, err := IndexFromPodName(bad); err == nil {
			t.Fatalf("%q must fail", bad)
		}
	}
	t.Setenv("POD_NAME", "inventory-collector-4")
	if n, err := ResolveIndex(-1); err != nil || n != 4 {
		t.Fatalf("got %d, %v", n, err)
	}
	if n, _ := ResolveIndex(1); n != 1 {
		t.Fatal("an explicit index wins")
	}
}
