package inventory

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/inventory-collector/internal/sharding"
)

const (
	labelModel   = gpu.LabelGPUModel
	labelProduct = gpu.LabelNVIDIAProduct
	h100Product  = "NVIDIA-H100-80GB-HBM3"
	a100Product  = "NVIDIA-A100-SXM4-80GB"
	mi300x       = "AMD-Instinct-MI300X"
)

var (
	fleetOnce sync.Once
	fleetKey  = types.NamespacedName{Namespace: mainNS, Name: "fleet"}
)

// fleet sets up, once, the nodes of the three children and the Colony "fleet" whose ClusterDeployments
// fleet-a, fleet-b and fleet-c reach child-0, child-1 and child-2:
//
//	child-0: H100 node with the canonical label, A100 node with the vendor label only, a node without
//	         GPUs, a cordoned H100 node and a NotReady H100 node;
//	child-1: an AMD MI300X node;
//	child-2: an L4 node.
func fleet(t *testing.T) {
	t.Helper()
	fleetOnce.Do(func() {
		ctx := context.Background()
		nodes := map[int][]childtest.Node{
			0: {
				{Name: "h100-1", Labels: map[string]string{labelModel: "H100", labelProduct: h100Product}, Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, 8)},
				{Name: "a100-1", Labels: map[string]string{labelProduct: a100Product, "nvidia.com/gpu.memory": "81920"}, Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, 4)},
				{Name: "cpu-1", Labels: map[string]string{"pool": "cpu"}, Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, 0)},
				{Name: "h100-cordoned", Labels: map[string]string{labelModel: "H100"}, Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, 8), Unschedulable: true},
				{Name: "h100-notready", Labels: map[string]string{labelModel: "H100"}, Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, 8), NotReady: true},
			},
			1: {{Name: "mi300x-1", Labels: map[string]string{gpu.LabelAMDProductName: mi300x}, Allocatable: childtest.GPUs(gpu.ResourceAMD, 8)}},
			2: {{Name: "l4-1", Labels: map[string]string{labelModel: "L4"}, Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, 2)}},
		}
		for i, ns := range nodes {
			for _, n := range ns {
				if err := childtest.CreateNode(ctx, children[i].Client, n); err != nil {
					t.Fatal(err)
				}
			}
		}
		colonyFixture(t, mainNS, "fleet", map[string]*testenv.Child{"a": children[0], "b": children[1], "c": children[2]})
	})
}

func expectedFleet() map[string][]infrav1.GPUOffering {
	return map[string][]infrav1.GPUOffering{
		"fleet-a": {
			{Vendor: "NVIDIA", Model: "H100", ResourceName: "nvidia.com/gpu", Selector: map[string]string{labelModel: "H100"},
				Total: 8, Nodes: 1, Labels: map[string]string{labelProduct: h100Product}},
			{Vendor: "NVIDIA", Model: a100Product, ResourceName: "nvidia.com/gpu", Selector: map[string]string{labelProduct: a100Product},
				Total: 4, Nodes: 1, Labels: map[string]string{labelProduct: a100Product, "nvidia.com/gpu.memory": "81920"}},
		},
		"fleet-b": {{Vendor: "AMD", Model: mi300x, ResourceName: "amd.com/gpu", Selector: map[string]string{gpu.LabelAMDProductName: mi300x},
			Total: 8, Nodes: 1, Labels: map[string]string{gpu.LabelAMDProductName: mi300x}}},
		"fleet-c": {{Vendor: "NVIDIA", Model: "L4", ResourceName: "nvidia.com/gpu", Selector: map[string]string{labelModel: "L4"}, Total: 2, Nodes: 1}},
	}
}

func offeringsEqual(a, b []infrav1.GPUOffering) bool {
	return bytes.Equal(mustJSON(a), mustJSON(b))
}

func TestInventoryOfThreeChildren(t *testing.T) {
	fleet(t)
	want := expectedFleet()
	inv := waitInventory(t, fleetKey, "the three children's offerings", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		if len(inv) != len(want) {
			return false
		}
		for cd, offerings := range want {
			if e, ok := inv[cd]; !ok || !e.Reachable || !offeringsEqual(e.Offerings, offerings) {
				return false
			}
		}
		return true
	})
	for cd, e := range inv {
		if e.LastUpdated.IsZero() || e.Message != "" {
			t.Fatalf("%s: want lastUpdated and no message, got %+v", cd, e)
		}
	}
	if got := testutil.ToFloat64(gpusTotal.WithLabelValues(mainNS, "fleet", "fleet-a", "NVIDIA", "H100")); got != 8 {
		t.Fatalf("gpus_allocatable for fleet-a H100: want 8, got %v", got)
	}
	if got := testutil.ToFloat64(clusterReachable.WithLabelValues(mainNS, "fleet", "fleet-b")); got != 1 {
		t.Fatalf("cluster_reachable for fleet-b: want 1, got %v", got)
	}

	// status.gpus sums the offerings: 8 + 4 + 8 + 2 allocatable, none requested.
	colony := waitColony(t, fleetKey, "status.gpus of the three children", func(c *infrav1.Colony) bool {
		return c.Status.GPUs != nil && *c.Status.GPUs == infrav1.ColonyGPUs{Total: 22, Free: 22}
	})

	// The colony-controller's fields are untouched, and the inventory-collector's field manager owns
	// nothing but status.gpuInventory and status.gpus.
	st := colony.Status
	if st.Phase != infrav1.ColonyPhaseReady || st.ReadyClusters != 3 || st.TotalClusters != 3 || len(st.ClusterDeploymentRefs) != 3 ||
		st.KubeconfigSecretName != "fleet-kubeconfig" || len(st.Conditions) != 1 || st.Conditions[0].Message != "all ready" {
		t.Fatalf("colony-controller's status fields changed: %+v", st)
	}
	var ours, theirs string
	for _, mf := range colony.ManagedFields {
		if mf.Subresource != "status" || mf.FieldsV1 == nil {
			continue
		}
		switch mf.Manager {
		case FieldManager:
			ours = mf.FieldsV1.GetRawString()
		case "colony-controller":
			theirs = mf.FieldsV1.GetRawString()
		}
	}
	if !strings.Contains(ours, `"f:gpuInventory"`) || !strings.Contains(ours, `"f:gpus"`) || strings.Contains(ours, `"f:phase"`) || strings.Contains(ours, `"f:conditions"`) {
		t.Fatalf("inventory-collector must own only gpuInventory: %s", ours)
	}
	if !strings.Contains(theirs, `"f:phase"`) || !strings.Contains(theirs, `"f:clusterDeploymentRefs"`) || strings.Contains(theirs, "gpuInventory") ||
		strings.Contains(theirs, `"f:gpus"`) {
		t.Fatalf("colony-controller must keep its fields: %s", theirs)
	}
}

func TestLiveChanges(t *testing.T) {
	fleet(t)
	ctx := context.Background()
	c2 := children[2].Client
	l4 := func(total, allocated int64, nodes int32) func(map[string]infrav1.ClusterGPUInventory) bool {
		return func(inv map[string]infrav1.ClusterGPUInventory) bool {
			e := inv["fleet-c"]
			return e.Reachable && len(e.Offerings) == 1 && e.Offerings[0].Total == total && e.Offerings[0].Allocated == allocated && e.Offerings[0].Nodes == nodes
		}
	}
	waitInventory(t, fleetKey, "L4 baseline", l4(2, 0, 1))

	// A node added.
	if err := childtest.CreateNode(ctx, c2, childtest.Node{Name: "l4-2", Labels: map[string]string{labelModel: "L4"}, Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, 2)}); err != nil {
		t.Fatal(err)
	}
	waitInventory(t, fleetKey, "the added node counted", l4(4, 0, 2))

	// A pod bound.
	if err := childtest.CreatePod(ctx, c2, childtest.Pod{Namespace: "work", Name: "infer", Node: "l4-2", Requests: childtest.Requests(gpu.ResourceNVIDIA, 1)}); err != nil {
		t.Fatal(err)
	}
	waitInventory(t, fleetKey, "the bound pod allocated", l4(4, 1, 2))

	// The pod finished.
	if err := childtest.SetPodPhase(ctx, c2, "work", "infer", corev1.PodSucceeded); err != nil {
		t.Fatal(err)
	}
	waitInventory(t, fleetKey, "the finished pod released", l4(4, 0, 2))

	// A node removed.
	if err := childtest.DeleteNode(ctx, c2, "l4-2"); err != nil {
		t.Fatal(err)
	}
	waitInventory(t, fleetKey, "the removed node gone", l4(2, 0, 1))
}

func TestWritesOnlyOnChangeAndDebounced(t *testing.T) {
	fleet(t)
	ctx := context.Background()
	c0 := children[0].Client
	waitInventory(t, fleetKey, "fleet-a reachable", func(inv map[string]infrav1.ClusterGPUInventory) bool { return inv["fleet-a"].Reachable })
	before := getColony(t, fleetKey).Status.GPUInventory
	writes := testutil.ToFloat64(statusWrites.WithLabelValues("success"))

	// A change that moves no offering: a CPU-only pod on the node without GPUs.
	if err := childtest.CreatePod(ctx, c0, childtest.Pod{Namespace: "work", Name: "web", Node: "cpu-1", Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}); err != nil {
		t.Fatal(err)
	}
	// Then a burst of GPU pods on the H100 node: one offering change after another.
	const burst = 10
	// Whatever happens below, the burst's pods finish, so that no other test counts their GPUs.
	t.Cleanup(func() {
		for i := range burst {
			_ = childtest.SetPodPhase(ctx, c0, "work", fmt.Sprintf("train-%d", i), corev1.PodSucceeded) // a pod never made needs nothing
		}
		waitInventory(t, fleetKey, "the burst released", func(inv map[string]infrav1.ClusterGPUInventory) bool {
			e := inv["fleet-a"]
			return len(e.Offerings) == 2 && e.Offerings[0].Allocated == 0
		})
	})
	start := time.Now()
	for i := range burst {
		if err := childtest.CreatePod(ctx, c0, childtest.Pod{Namespace: "work", Name: fmt.Sprintf("train-%d", i), Node: "h100-1", Requests: childtest.Requests(gpu.ResourceNVIDIA, 1)}); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	inv := waitInventory(t, fleetKey, "the burst allocated", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		e := inv["fleet-a"]
		return len(e.Offerings) == 2 && e.Offerings[0].Allocated == burst
	})
	// The controller counts its write once the API server answered it: the status can be read a
	// moment before the counter moves.
	var got float64
	deadline := time.Now().Add(wait)
	for got = testutil.ToFloat64(statusWrites.WithLabelValues("success")) - writes; got < 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		got = testutil.ToFloat64(statusWrites.WithLabelValues("success")) - writes
	}
	// Each debounce window gives at most one notification, and a notification at most one write; the
	// burst spans took/debounce windows, plus one that may straddle its start.
	bound := float64(int(took/debounce) + 2)
	if got < 1 || got > bound || got >= burst {
		t.Fatalf("a burst of %d pod bindings over %s gave %v status writes; want between 1 and %v (debounce %s)", burst, took, got, bound, debounce)
	}
	t.Logf("%d pod bindings over %s: %v status writes", burst, took.Round(time.Millisecond), got)
	// The other children's entries did not move, lastUpdated included.
	for _, cd := range []string{"fleet-b", "fleet-c"} {
		if !inventoriesEqual(map[string]infrav1.ClusterGPUInventory{cd: before[cd]}, map[string]infrav1.ClusterGPUInventory{cd: inv[cd]}) {
			t.Fatalf("%s changed: %+v -> %+v", cd, before[cd], inv[cd])
		}
	}
}

func TestUnreachableChildKeepsItsInventory(t *testing.T) {
	fleet(t)
	want := expectedFleet()["fleet-c"]
	before := waitInventory(t, fleetKey, "fleet-c reachable", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		return inv["fleet-c"].Reachable && offeringsEqual(inv["fleet-c"].Offerings, want)
	})["fleet-c"]

	// Events from before the pause are not this test's: under load, fleet-c's first connect may have
	// failed (first sight, no Event) and a later one succeeded (a ClusterReachable).
	pausedAt := time.Now()
	if err := children[2].Pause(); err != nil {
		t.Fatalf("pausing child-2: %v", err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = children[2].Resume()
		}
	}()
	away := waitInventory(t, fleetKey, "fleet-c unreachable", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		return !inv["fleet-c"].Reachable
	})["fleet-c"]
	if away.Message == "" || !offeringsEqual(away.Offerings, want) || !away.LastUpdated.Equal(&before.LastUpdated) {
		t.Fatalf("an unreachable child keeps its offerings and their lastUpdated, with a message: before %+v, now %+v", before, away)
	}
	if got := testutil.ToFloat64(clusterReachable.WithLabelValues(mainNS, "fleet", "fleet-c")); got != 0 {
		t.Fatalf("cluster_reachable: want 0, got %v", got)
	}
	// status.gpus leaves out the unreachable child's 2 L4 GPUs.
	waitColony(t, fleetKey, "status.gpus without fleet-c", func(c *infrav1.Colony) bool {
		return c.Status.GPUs != nil && c.Status.GPUs.Total == 20 && c.Status.GPUs.Free == 20
	})
	if err := children[2].Resume(); err != nil {
		t.Fatalf("resuming child-2: %v", err)
	}
	resumed = true
	waitInventory(t, fleetKey, "fleet-c recovered", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		e := inv["fleet-c"]
		return e.Reachable && e.Message == "" && offeringsEqual(e.Offerings, want)
	})
	// One Event per transition, on the Colony and related to fleet-c's ClusterDeployment. A resumed
	// child may flap (a request sent while it was paused can fail after it answered again), so the
	// Events must alternate, from unreachable to reachable, rather than number exactly two.
	waitTransitions(t, "fleet", "fleet-c", pausedAt)
}

// waitTransitions waits until the reachability Events of a Colony's child since a time alternate,
// starting with ClusterUnreachable and ending with ClusterReachable, one Event per transition: none
// folded into a series, none missing.
func waitTransitions(t *testing.T, colony, cd string, since time.Time) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		var list eventsv1.EventList
		if err := mgmt.Client.List(context.Background(), &list, client.InNamespace(mainNS)); err != nil {
			t.Fatal(err)
		}
		var mine []eventsv1.Event
		for _, ev := range list.Items {
			if ev.EventTime.Time.After(since) && ev.Regarding.Name == colony && ev.Related != nil && ev.Related.Kind == "ClusterDeployment" && ev.Related.Name == cd &&
				(ev.Reason == EventClusterUnreachable || ev.Reason == EventClusterReachable) {
				mine = append(mine, ev)
			}
		}
		sort.Slice(mine, func(i, j int) bool { return mine[i].EventTime.Before(&mine[j].EventTime) })
		var seq []string
		ok := len(mine) > 0
		for i, ev := range mine {
			seq = append(seq, ev.Reason)
			if ev.Series != nil {
				seq[len(seq)-1] += fmt.Sprintf("x%d", ev.Series.Count)
				ok = false
			}
			want := EventClusterUnreachable
			if i%2 == 1 {
				want = EventClusterReachable
			}
			if ev.Reason != want || !strings.Contains(ev.Note, cd) {
				ok = false
			}
		}
		if ok && len(mine)%2 == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("want one Event per transition of %s, alternating from %s to %s; got %v", cd, EventClusterUnreachable, EventClusterReachable, seq)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Two children that become unreachable in the same status write get an Event each, through the
// client-go event recorder and the management API server: the recorder folds Events with the same
// reason about the same object version into one series unless their related objects differ.
func TestTransitionsOfTwoChildrenInOneWrite(t *testing.T) {
	cs, err := kubernetes.NewForConfig(mgmt.Config)
	if err != nil {
		t.Fatal(err)
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	r := &Reconciler{Recorder: b.NewRecorder(mgmt.Scheme, "inventory-collector-test")}
	colony := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Name: "pair", Namespace: mainNS, UID: "pair-uid", ResourceVersion: "7"},
		Status: infrav1.ColonyStatus{GPUInventory: map[string]infrav1.ClusterGPUInventory{
			"pair-a": {Reachable: false}, "pair-b": {Reachable: false},
		}}}
	// Both reachable again in one write, then both unreachable in the next.
	r.recordTransitions(colony, map[string]infrav1.ClusterGPUInventory{"pair-a": {Reachable: true}, "pair-b": {Reachable: true}})
	colony.ResourceVersion = "8"
	colony.Status.GPUInventory = map[string]infrav1.ClusterGPUInventory{"pair-a": {Reachable: true}, "pair-b": {Reachable: true}}
	r.recordTransitions(colony, map[string]infrav1.ClusterGPUInventory{"pair-a": {Reachable: false, Message: "gone"}, "pair-b": {Reachable: false, Message: "gone"}})

	deadline := time.Now().Add(wait)
	for {
		var list eventsv1.EventList
		if err := mgmt.Client.List(ctx, &list, client.InNamespace(mainNS)); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, ev := range list.Items {
			if ev.Regarding.Name != "pair" {
				continue
			}
			for _, cd := range []string{"pair-a", "pair-b"} {
				if !strings.Contains(ev.Note, cd) {
					continue
				}
				got[ev.Reason+"/"+cd]++
				if ev.Related == nil || ev.Related.Kind != "ClusterDeployment" || ev.Related.Name != cd || ev.Related.Namespace != mainNS {
					got["unrelated/"+cd]++
				}
			}
		}
		want := map[string]int{
			EventClusterReachable + "/pair-a": 1, EventClusterReachable + "/pair-b": 1,
			EventClusterUnreachable + "/pair-a": 1, EventClusterUnreachable + "/pair-b": 1,
		}
		if reflect.DeepEqual(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("want one Event per child and transition, related to its ClusterDeployment; got %v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestKubeconfigRotation(t *testing.T) {
	fleet(t)
	ctx := context.Background()
	wantB, wantC := expectedFleet()["fleet-b"], expectedFleet()["fleet-c"]
	waitInventory(t, fleetKey, "fleet-b reachable", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		return inv["fleet-b"].Reachable && offeringsEqual(inv["fleet-b"].Offerings, wantB)
	})
	first, err := collector.Clusters.Get(ctx, mainNS, "fleet-b")
	if err != nil {
		t.Fatal(err)
	}

	// New credentials for the same child: a new connection, the same inventory.
	user, err := children[1].Env.AddUser(envtest.User{Name: "rotated-b", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := mgmt.WriteKubeconfigSecret(ctx, mainNS, "fleet-b", rotated); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for {
		cl, err := collector.Clusters.Get(ctx, mainNS, "fleet-b")
		if err == nil && cl != first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotated kubeconfig was not picked up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The Secret now points at another cluster: the inventory follows.
	if err := mgmt.WriteKubeconfigSecret(ctx, mainNS, "fleet-b", children[2].Kubeconfig); err != nil {
		t.Fatal(err)
	}
	waitInventory(t, fleetKey, "fleet-b shows child-2's GPUs", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		return inv["fleet-b"].Reachable && offeringsEqual(inv["fleet-b"].Offerings, wantC)
	})
	if err := mgmt.WriteKubeconfigSecret(ctx, mainNS, "fleet-b", children[1].Kubeconfig); err != nil {
		t.Fatal(err)
	}
	waitInventory(t, fleetKey, "fleet-b back on child-1", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		return inv["fleet-b"].Reachable && offeringsEqual(inv["fleet-b"].Offerings, wantB)
	})
}

func TestMissingKubeconfigIsUnreachable(t *testing.T) {
	ctx := context.Background()
	colony := &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: mainNS, Name: "pending"}}
	if err := mgmt.Client.Create(ctx, colony); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgmt.Client.Delete(context.Background(), colony) })
	createClusterDeployment(t, colony, "pending-a")
	key := types.NamespacedName{Namespace: mainNS, Name: "pending"}
	e := waitInventory(t, key, "an entry for the provisioning cluster", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		_, ok := inv["pending-a"]
		return ok
	})["pending-a"]
	if e.Reachable || !strings.Contains(e.Message, childcluster.ReasonKubeconfigMissing) {
		t.Fatalf("want unreachable with KubeconfigMissing, got %+v", e)
	}
	// The Secret appears: the Secret watch brings the cluster in without waiting for a requeue.
	if err := mgmt.WriteKubeconfigSecret(ctx, mainNS, "pending-a", children[2].Kubeconfig); err != nil {
		t.Fatal(err)
	}
	waitInventory(t, key, "reachable once the Secret exists", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		return inv["pending-a"].Reachable
	})
}

func TestColonyDeletionStopsWatches(t *testing.T) {
	fleet(t)
	ctx := context.Background()
	waitInventory(t, fleetKey, "fleet settled", func(inv map[string]infrav1.ClusterGPUInventory) bool { return len(inv) == 3 })
	runtime.GC()
	before := runtime.NumGoroutine()

	colony := colonyFixture(t, mainNS, "short", map[string]*testenv.Child{"x": children[0], "y": children[1]})
	key := types.NamespacedName{Namespace: mainNS, Name: "short"}
	waitInventory(t, key, "short's two clusters", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		return len(inv) == 2 && inv["short-x"].Reachable && inv["short-y"].Reachable
	})
	cds := []types.NamespacedName{{Namespace: mainNS, Name: "short-x"}, {Namespace: mainNS, Name: "short-y"}}
	for _, cd := range cds {
		if !slices.Contains(collector.Watched(), cd) {
			t.Fatalf("%s is not watched", cd)
		}
	}
	during := runtime.NumGoroutine()

	// A ClusterDeployment that goes takes its watch and its entry with it.
	cdY := &k0rdentv1beta1.ClusterDeployment{}
	if err := mgmt.Client.Get(ctx, cds[1], cdY); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.Client.Delete(ctx, cdY); err != nil {
		t.Fatal(err)
	}
	waitInventory(t, key, "short-y's entry gone", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		_, ok := inv["short-y"]
		return len(inv) == 1 && !ok
	})
	for deadline := time.Now().Add(wait); slices.Contains(collector.Clusters.Keys(), cds[1]); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the deleted ClusterDeployment's watch still runs")
		}
	}

	if err := mgmt.Client.Delete(ctx, colony); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for {
		watched, cached := collector.Watched(), collector.Clusters.Keys()
		if !slices.Contains(watched, cds[0]) && !slices.Contains(watched, cds[1]) && !slices.Contains(cached, cds[0]) && !slices.Contains(cached, cds[1]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watches of the deleted Colony still running: watched %v, cached %v", watched, cached)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := seriesOf(t, "short"); n != 0 {
		t.Fatalf("the deleted Colony still has %d metric series", n)
	}
	const slack = 5
	for runtime.NumGoroutine() > before+slack && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before+slack {
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
		t.Fatalf("goroutines: %d before the Colony, %d while watched, %d after deletion (slack %d)\n%s", before, during, after, slack, buf.String())
	}
	t.Logf("goroutines: %d before the Colony, %d while watched, %d after deletion", before, during, runtime.NumGoroutine())
}

func TestShardsSplitClusters(t *testing.T) {
	fleet(t)
	var shards []*Reconciler
	for i := range 2 {
		r, stop, err := startCollector([]string{shardNS}, sharding.Shard{Index: i, Count: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		shards = append(shards, r)
	}
	clusters := map[string]*testenv.Child{}
	for i := range 6 {
		clusters[fmt.Sprintf("s%d", i)] = children[i%3]
	}
	colonyFixture(t, shardNS, "split", clusters)
	key := types.NamespacedName{Namespace: shardNS, Name: "split"}
	inv := waitInventory(t, key, "all six clusters, written by two shards", func(inv map[string]infrav1.ClusterGPUInventory) bool {
		if len(inv) != 6 {
			return false
		}
		for _, e := range inv {
			if !e.Reachable {
				return false
			}
		}
		return true
	})
	if !offeringsEqual(inv["split-s1"].Offerings, expectedFleet()["fleet-b"]) {
		t.Fatalf("split-s1 (child-1) offerings: %+v", inv["split-s1"].Offerings)
	}
	var all []types.NamespacedName
	for i, r := range shards {
		for _, cd := range r.Watched() {
			if sharding.Owner(cd, 2) != i {
				t.Fatalf("shard %d watches %s, which shard %d owns", i, cd, sharding.Owner(cd, 2))
			}
			all = append(all, cd)
		}
	}
	if len(all) != 6 {
		t.Fatalf("the two shards watch %d clusters together, want 6: %v", len(all), all)
	}
	if len(shards[0].Watched()) == 0 || len(shards[1].Watched()) == 0 {
		t.Logf("note: one shard owns no cluster of this Colony: %v / %v", shards[0].Watched(), shards[1].Watched())
	}
}

func TestDesiredInventoryDropsGoneClusters(t *testing.T) {
	colony := &infrav1.Colony{Status: infrav1.ColonyStatus{GPUInventory: map[string]infrav1.ClusterGPUInventory{
		"kept": {Reachable: true}, "other-shard": {Reachable: false, Message: "x"}, "gone": {Reachable: true},
	}}}
	all := []types.NamespacedName{{Name: "kept"}, {Name: "other-shard"}, {Name: "new-elsewhere"}}
	got := desiredInventory(colony, all, map[string]infrav1.ClusterGPUInventory{"kept": {Reachable: true, Message: ""}})
	want := map[string]infrav1.ClusterGPUInventory{"kept": {Reachable: true}, "other-shard": {Reachable: false, Message: "x"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// seriesOf counts the gauge series labelled with the Colony's name.
func seriesOf(t *testing.T, colony string) int {
	t.Helper()
	n := 0
	for _, vec := range []*prometheus.GaugeVec{gpusTotal, gpusAllocated, clusterReachable} {
		ch := make(chan prometheus.Metric, 1000)
		vec.Collect(ch)
		close(ch)
		for m := range ch {
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				t.Fatal(err)
			}
			for _, l := range pb.GetLabel() {
				if l.GetName() == "colony" && l.GetValue() == colony {
					n++
				}
			}
		}
	}
	return n
}

// TestGPUTotals: status.gpus sums the reachable clusters' offerings; an offering whose pods request
// more than it has (a node shrank) adds no free GPUs and takes none from another offering.
func TestGPUTotals(t *testing.T) {
	inv := map[string]infrav1.ClusterGPUInventory{
		"a": {Reachable: true, Offerings: []infrav1.GPUOffering{{Total: 8, Allocated: 3}, {Total: 2, Allocated: 4}}},
		"b": {Reachable: false, Offerings: []infrav1.GPUOffering{{Total: 16}}},
		"c": {Reachable: true},
	}
	want := infrav1.ColonyGPUs{Total: 10, Allocated: 7, Free: 5}
	if got := gpuTotals(inv); *got != want {
		t.Fatalf("gpuTotals = %+v, want %+v", *got, want)
	}
	if got := gpuTotals(nil); *got != (infrav1.ColonyGPUs{}) {
		t.Fatalf("gpuTotals(nil) = %+v, want zeros", *got)
	}
	if sameTotals(nil, &want) || !sameTotals(&infrav1.ColonyGPUs{Total: 10, Allocated: 7, Free: 5}, &want) {
		t.Fatal("sameTotals: a missing status.gpus differs, equal totals are the same")
	}
}
