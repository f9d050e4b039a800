package world

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Two syncs of the same nodes may overlap: the simulator brings a cluster's nodes in line with its
// ClusterDeployment (every second while a node's GPUs are not advertised) while a test replaces a
// node. Each sync lists the nodes and then creates the missing ones, so both can find a new node
// missing; the one whose create comes second must take the node that is there, not fail with
// AlreadyExists (a node replacement failed so in a clean-clone make test).
func TestOverlappingSyncsOfNewNodes(t *testing.T) {
	w := &World{RunDir: t.TempDir(), out: io.Discard, children: map[string]*ChildCluster{}, extra: map[string]string{}}
	defer func() { _ = w.Stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := w.StartChild(ctx, "overlap", ClusterConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		count := int32(round + 2)
		nodes, err := ClusterConfig{Nodes: []NodePool{{Name: "worker", CPU: "8", Memory: "32Gi"},
			{Name: fmt.Sprintf("added%d", round), CPU: "4", Memory: "8Gi", Count: &count}}}.BuildNodes()
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { errs[i] = c.SyncNodes(ctx, nodes) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, sync %d: %v", round, i, err)
			}
		}
		var got corev1.NodeList
		if err := c.Client().List(ctx, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for _, n := range nodes {
			want[n.Name] = true
		}
		if len(got.Items) != len(want) {
			t.Fatalf("round %d: %d nodes, want %d (%v)", round, len(got.Items), len(want), want)
		}
		for _, n := range got.Items {
			if !want[n.Name] {
				t.Errorf("round %d: node %s is not wanted", round, n.Name)
			}
		}
	}
}
