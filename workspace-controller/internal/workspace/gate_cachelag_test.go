package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/release"
)

// TestPendingAdmissionOfAFailedWorkspaceHoldsGPUs: a workspace that failed before its cluster's GPUs
// appeared (GpuOfferingUnavailable) heals when they do. While that pass is admitting it, the cache
// still shows it Failed, and a Failed workspace's admission holds no GPUs; so another workspace gated
// in that moment took the same GPUs (seen in the e2e suite: the quick start's notebook and a 2 x 4 GPU
// notebook pinned to one 8-GPU node, its second replica Pending for good). The reservations must
// count the pending admission with the phase of the pass that made it.
//
// The suite's controllers are stopped for the test, so that nothing rewrites the Failed status the
// cache must show; the gate's reservations run on a real cache of the real API server.
func TestPendingAdmissionOfAFailedWorkspaceHoldsGPUs(t *testing.T) {
	ctx := withControllersStopped(t)
	ns := newNamespace(t)
	cd := types.NamespacedName{Namespace: ns, Name: "gpu"}
	res := oneGPUEach(1)

	healing := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "healing"},
		Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: "c-1-0-0",
			ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Namespace: ns, Name: cd.Name}}}
	must(t, k8s.Create(ctx, healing))
	healing.Status.Phase = workspacesv1.PhaseFailed
	healing.Status.ResolvedResources = res.DeepCopy()
	must(t, k8s.Status().Update(ctx, healing))

	cached, informers := gateCache(ctx, t)
	eventually(t, "the cache shows the workspace Failed", func() error {
		var got workspacesv1.WorkspaceDeployment
		if err := cached.Get(ctx, client.ObjectKeyFromObject(healing), &got); err != nil {
			return err
		}
		return contains(string(got.Status.Phase), string(workspacesv1.PhaseFailed))
	})

	// The child: one node with one GPU, free.
	node := oneGPUNode("n1")
	g := gate.New(cached, informers, snapshot{nodes: []corev1.Node{node}})
	noServiceSet := func(context.Context) (bool, error) { return false, nil }
	// The healing workspace's pass admits it onto n1 and goes on to make its ServiceSet: its
	// admission is pending, not written, and the cache still shows it Failed.
	healingNow := healing.DeepCopy()
	healingNow.Status.Admission = nil
	d, err := g.Admit(ctx, gate.Request{Workspace: healingNow, Previous: &healing.Status, Resources: res, Cluster: cd,
		HasServiceSet: noServiceSet, Now: time.Now()})
	must(t, err)
	if d.Outcome != gate.Admitted || d.Recorded {
		t.Fatalf("the healing workspace: %s (recorded %v), want admitted and pending", d.Outcome, d.Recorded)
	}

	other := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other",
		CreationTimestamp: metav1.Now()}}
	d, err = g.Admit(ctx, gate.Request{Workspace: other, Previous: &other.Status, Resources: res, Cluster: cd,
		HasServiceSet: noServiceSet, Now: time.Now()})
	must(t, err)
	if d.Outcome == gate.Waiting {
		return
	}
	t.Fatalf("the pending admission of the workspace the cache still shows Failed is not counted: the other workspace got %s: %s", d.Outcome, d.Message)
}

// snapshot is a child whose Nodes and Pods are given.
type snapshot struct {
	nodes []corev1.Node
	pods  []corev1.Pod
	// id is the child's identity; empty: not known.
	id types.UID
}

func (c snapshot) Snapshot(context.Context, types.NamespacedName) ([]corev1.Node, []corev1.Pod, error) {
	return c.nodes, c.pods, nil
}

func (c snapshot) Identity(context.Context, types.NamespacedName) types.UID { return c.id }

func (c snapshot) Peers(types.NamespacedName) []types.NamespacedName { return nil }

// TestAWaiterKeepsItsPlaceBeforeItsStatusIsCached: a workspace the gate has just told to wait writes
// its Waiting status after the gate's locks are released, and a first pass has no resolved resources
// in the cache either. A newer workspace gated in that moment, when GPUs have just appeared (a GPU
// node replaced or uncordoned during a rollout: seen in the chaos suite), must still find the older
// one ahead of it in the queue and wait, rather than take the GPUs the older one waits for.
func TestAWaiterKeepsItsPlaceBeforeItsStatusIsCached(t *testing.T) {
	ctx := withControllersStopped(t)
	ns := newNamespace(t)
	cd := types.NamespacedName{Namespace: ns, Name: "gpu"}
	res := oneGPUEach(1)
	wss := olderAndNewer(ctx, t, cd)
	cached, informers := gateCache(ctx, t)
	eventually(t, "the cache shows both workspaces", func() error {
		var list workspacesv1.WorkspaceDeploymentList
		if err := cached.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		return contains(fmt.Sprint(len(list.Items)), "2")
	})

	// The child's one GPU node is cordoned: the older workspace is told to wait (its status write is
	// never made here, as if the pass had not got to it yet).
	node := oneGPUNode("n1")
	node.Spec.Unschedulable = true
	child := &snapshot{nodes: []corev1.Node{node}}
	g := gate.New(cached, informers, child)
	admit := admitter(ctx, t, g, res, cd)
	if d := admit(wss[0]); d.Outcome != gate.Waiting {
		t.Fatalf("the older workspace on a cordoned node: %s: %s, want %s", d.Outcome, d.Message, gate.Waiting)
	}
	// The node is back; the newer workspace's pass comes first.
	child.nodes[0].Spec.Unschedulable = false
	if d := admit(wss[1]); d.Outcome != gate.Waiting || !strings.Contains(d.Message, "reserved") {
		t.Fatalf("the newer workspace took the GPU the older one waits for: %s: %s", d.Outcome, d.Message)
	}
	if d := admit(wss[0]); d.Outcome != gate.Admitted {
		t.Fatalf("the older workspace: %s: %s, want %s", d.Outcome, d.Message, gate.Admitted)
	}
}

// gateCache is a client reading through a cache of its own, made and indexed as the controller's
// (registerIndexes), which runs until ctx ends, and that cache.
func gateCache(ctx context.Context, t *testing.T) (client.Client, cache.Cache) {
	t.Helper()
	c, err := cache.New(mgmt.Config, cache.Options{Scheme: mgmt.Scheme, ByObject: release.CacheByObject()}) // as the binary's
	must(t, err)
	must(t, registerIndexes(ctx, c))
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not start")
	}
	cached, err := client.New(mgmt.Config, client.Options{Scheme: mgmt.Scheme, Cache: &client.CacheOptions{Reader: c}})
	must(t, err)
	return cached, c
}

// TestGateReadsTheCacheIndexes: the gate reads the workspaces and ServiceSets on a child from the
// cache's field indexes without copying them (internal/cacheread), by the names and keys the cache files
// them under; it must find there what a list through the cached client finds. Two GPUs of the child
// are held, one by a workspace admitted through another ClusterDeployment of the same child (found by
// the identity index only), one by a workspace whose admission only its ServiceSet carries (a pass
// that ended before its status write: found by the cluster index and the ServiceSet index). A third
// workspace asking one GPU must wait, whether the gate reads the indexes or lists.
func TestGateReadsTheCacheIndexes(t *testing.T) {
	ctx := withControllersStopped(t)
	ns := newNamespace(t)
	a, b := types.NamespacedName{Namespace: ns, Name: "gpu-a"}, types.NamespacedName{Namespace: ns, Name: "gpu-b"}
	const id = types.UID("child-1")
	res := oneGPUEach(1)
	// On n1, through gpu-a: Running, its admission in its status.
	byIdentity := newWorkspaceOn(ctx, t, ns, "a-by-identity", a)
	byIdentity.Status.Phase = workspacesv1.PhaseRunning
	byIdentity.Status.ResolvedResources = res.DeepCopy()
	byIdentity.Status.Admission = admittedOnNodes(a, "n1")
	byIdentity.Status.Admission.ClusterIdentity = id
	must(t, k8s.Status().Update(ctx, byIdentity))
	// On n2, through gpu-b: Deploying, its admission only on its ServiceSet.
	bySet := newWorkspaceOn(ctx, t, ns, "b-by-serviceset", b)
	carried := admittedOnNodes(b, "n2")
	carried.ClusterIdentity = id
	carryAdmission(ctx, t, bySet, res, b, carried)
	asking := newWorkspaceOn(ctx, t, ns, "c-asking", b)

	cached, informers := gateCache(ctx, t)
	eventually(t, "the cache shows the workspaces and the ServiceSet", func() error {
		var got workspacesv1.WorkspaceDeployment
		if err := cached.Get(ctx, client.ObjectKeyFromObject(byIdentity), &got); err != nil {
			return err
		}
		if err := contains(string(got.Status.Phase), string(workspacesv1.PhaseRunning)); err != nil {
			return err
		}
		var sets k0rdentv1beta1.ServiceSetList
		if err := cached.List(ctx, &sets, client.InNamespace(ns)); err != nil {
			return err
		}
		return contains(fmt.Sprint(len(sets.Items)), "1")
	})
	child := snapshot{nodes: []corev1.Node{oneGPUNode("n1"), oneGPUNode("n2")}, id: id}
	for _, tc := range []struct {
		name      string
		informers cache.Informers
	}{{"the cache's indexes", informers}, {"a list through the cached client", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			g := gate.New(cached, tc.informers, child)
			if d := admitter(ctx, t, g, res, b)(asking); d.Outcome != gate.Waiting {
				t.Fatalf("both GPUs of the child are held, yet the workspace asking one got %s: %s", d.Outcome, d.Message)
			}
		})
	}
}

// TestQuotaReadsTheCacheIndexes: a decision under a namespace's WorkspaceQuota counts the namespace's
// workspaces and their ServiceSets from the cache's namespace index and its index of ServiceSets by
// their workspace's namespace; it must find there what a list through the cached client finds. Of a
// quota of 2 GPUs, one is held by a workspace whose status carries its admission and one by a
// workspace whose admission only its ServiceSet carries (it lives in the ClusterDeployment's
// namespace, apart from its workspace's); a third workspace asking one GPU, with free GPUs on the
// child, must be refused by the quota whether the gate reads the indexes or lists.
func TestQuotaReadsTheCacheIndexes(t *testing.T) {
	ctx := withControllersStopped(t)
	ns, cdNS := newNamespace(t), newNamespace(t)
	cd := types.NamespacedName{Namespace: cdNS, Name: "gpu"}
	gpuQuota(ctx, t, ns, 2, nil)
	res := oneGPUEach(1)
	byStatus := newWorkspaceOn(ctx, t, ns, "a-by-status", cd)
	byStatus.Status.Phase = workspacesv1.PhaseRunning
	byStatus.Status.ResolvedResources = res.DeepCopy()
	byStatus.Status.Admission = admittedOnNodes(cd, "n1")
	must(t, k8s.Status().Update(ctx, byStatus))
	carryAdmission(ctx, t, newWorkspaceOn(ctx, t, ns, "b-by-serviceset", cd), res, cd, admittedOnNodes(cd, "n2"))
	asking := newWorkspaceOn(ctx, t, ns, "c-asking", cd)

	cached, informers := gateCache(ctx, t)
	eventually(t, "the cache shows the workspaces, the quota and the ServiceSet", func() error {
		var got workspacesv1.WorkspaceDeployment
		if err := cached.Get(ctx, client.ObjectKeyFromObject(byStatus), &got); err != nil {
			return err
		}
		if err := contains(string(got.Status.Phase), string(workspacesv1.PhaseRunning)); err != nil {
			return err
		}
		if err := cached.Get(ctx, client.ObjectKeyFromObject(asking), &got); err != nil {
			return err
		}
		var q workspacesv1.WorkspaceQuota
		if err := cached.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gpus"}, &q); err != nil {
			return err
		}
		var sets k0rdentv1beta1.ServiceSetList
		if err := cached.List(ctx, &sets, client.InNamespace(cdNS)); err != nil {
			return err
		}
		return contains(fmt.Sprint(len(sets.Items)), "1")
	})
	child := snapshot{nodes: []corev1.Node{oneGPUNode("n1"), oneGPUNode("n2"), oneGPUNode("n3"), oneGPUNode("n4")}}
	for _, tc := range []struct {
		name      string
		informers cache.Informers
	}{{"the cache's indexes", informers}, {"a list through the cached client", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			g := gate.New(cached, tc.informers, child)
			if d := admitter(ctx, t, g, res, cd)(asking); d.Outcome != gate.OverQuota {
				t.Fatalf("the quota's 2 GPUs are held, yet the workspace asking one got %s: %s", d.Outcome, d.Message)
			}
		})
	}
}

// TestALostAdmissionKeepsItsPlaceBeforeItsPassComes: when a GPU node is replaced under a new name, the
// workspaces admitted on it have lost their admission, but until their own passes gate them again the
// cache still shows them Running there. A newer workspace gated first, onto the new node, must count
// an older one's replicas as still to be placed, ahead of it, and wait (seen in the chaos suite:
// newer workspaces admitted onto the replacement while older ones then waited).
func TestALostAdmissionKeepsItsPlaceBeforeItsPassComes(t *testing.T) {
	ctx := withControllersStopped(t)
	ns := newNamespace(t)
	cd := types.NamespacedName{Namespace: ns, Name: "gpu"}
	res := oneGPUEach(1)
	wss := olderAndNewer(ctx, t, cd)
	// The older one runs, admitted on node n1.
	older := wss[0]
	older.Status.Phase = workspacesv1.PhaseRunning
	older.Status.ResolvedResources = res.DeepCopy()
	older.Status.Admission = admittedOnNodes(cd, "n1")
	must(t, k8s.Status().Update(ctx, older))
	cached, informers := gateCache(ctx, t)
	eventually(t, "the cache shows the older workspace Running", func() error {
		var got workspacesv1.WorkspaceDeployment
		if err := cached.Get(ctx, client.ObjectKeyFromObject(older), &got); err != nil {
			return err
		}
		return contains(string(got.Status.Phase), string(workspacesv1.PhaseRunning))
	})

	// n1 was replaced by n1-r1 (one GPU, free); the newer workspace's pass comes first.
	node := oneGPUNode("n1-r1")
	g := gate.New(cached, informers, snapshot{nodes: []corev1.Node{node}})
	admit := admitter(ctx, t, g, res, cd)
	if d := admit(wss[1]); d.Outcome != gate.Waiting {
		t.Fatalf("the newer workspace took the GPU of the node that replaced the older one's: %s: %s", d.Outcome, d.Message)
	}
	if d := admit(older); d.Outcome != gate.Admitted || d.Lost == "" {
		t.Fatalf("the older workspace: %s (lost %q): %s, want admitted again", d.Outcome, d.Lost, d.Message)
	}
}

// TestASpreadWorkspaceDoesNotWaitOnItself: a workspace admitted over two nodes (not pinned to one),
// whose replicas are not bound yet, asks for a third replica. Its own unbound replicas are not
// another workspace's GPUs: the count of the cluster leaves the asking workspace out, or it would wait
// for itself ("GPUs counted for workspace a-older on node n1 are not bound yet") for good.
func TestASpreadWorkspaceDoesNotWaitOnItself(t *testing.T) {
	ctx := withControllersStopped(t)
	ns := newNamespace(t)
	cd := types.NamespacedName{Namespace: ns, Name: "gpu"}
	res := oneGPUEach(2)
	spread := olderAndNewer(ctx, t, cd)[0]
	spread.Status.Phase = workspacesv1.PhaseDeploying
	spread.Status.ResolvedResources = res.DeepCopy()
	spread.Status.Admission = admittedOnNodes(cd, "n1", "n2")
	must(t, k8s.Status().Update(ctx, spread))
	cached, informers := gateCache(ctx, t)
	eventually(t, "the cache shows the spread admission", func() error {
		var got workspacesv1.WorkspaceDeployment
		if err := cached.Get(ctx, client.ObjectKeyFromObject(spread), &got); err != nil {
			return err
		}
		if got.Status.Admission == nil {
			return fmt.Errorf("no admission yet")
		}
		return nil
	})

	// Two nodes of two GPUs each, no pod bound: three replicas fit only spread over both.
	var nodes []corev1.Node
	for _, name := range []string{"n1", "n2"} {
		n := oneGPUNode(name)
		n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("2")
		nodes = append(nodes, n)
	}
	g := gate.New(cached, informers, snapshot{nodes: nodes})
	grown := res.DeepCopy()
	grown.Replicas = 3
	if d := admitter(ctx, t, g, grown, cd)(spread); d.Outcome != gate.Admitted {
		t.Fatalf("a spread workspace asking for a third replica: %s: %s, want admitted (it waited on its own replicas)", d.Outcome, d.Message)
	}
}

// olderAndNewer creates the workspaces a-older and b-newer on cd, in that order: a-older is ahead in
// the cluster's queue (a tie of creation seconds is broken by name).
func olderAndNewer(ctx context.Context, t *testing.T, cd types.NamespacedName) []*workspacesv1.WorkspaceDeployment {
	t.Helper()
	var wss []*workspacesv1.WorkspaceDeployment
	for _, name := range []string{"a-older", "b-newer"} {
		ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: cd.Namespace, Name: name},
			Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: "c-1-0-0",
				ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Namespace: cd.Namespace, Name: cd.Name}}}
		must(t, k8s.Create(ctx, ws))
		wss = append(wss, ws)
	}
	return wss
}

// admitter asks g whether a workspace (its status as it is, no ServiceSet) may start res on cd now.
func admitter(ctx context.Context, t *testing.T, g *gate.Gate, res *workspacesv1.ResolvedResources, cd types.NamespacedName) func(*workspacesv1.WorkspaceDeployment) gate.Decision {
	return func(ws *workspacesv1.WorkspaceDeployment) gate.Decision {
		t.Helper()
		d, err := g.Admit(ctx, gate.Request{Workspace: ws, Previous: ws.Status.DeepCopy(), Resources: res, Cluster: cd,
			HasServiceSet: func(context.Context) (bool, error) { return false, nil }, Now: time.Now()})
		must(t, err)
		return d
	}
}

// oneGPUNode is a Ready child node with one NVIDIA GPU, its hostname label its name: the gate's view of
// a child in the tests that hand it a snapshot.
func oneGPUNode(name string) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

// withControllersStopped stops the suite's controllers for the test, so that nothing rewrites the
// statuses the gate's cache must show, and returns the test's context.
func withControllersStopped(t *testing.T) context.Context {
	t.Helper()
	must(t, stopControllers())
	t.Cleanup(func() { must(t, startControllers()) })
	ctx, cancel := context.WithCancel(ctxT(t))
	t.Cleanup(cancel)
	return ctx
}

// oneGPUEach is replicas of one NVIDIA GPU each.
func oneGPUEach(replicas int32) *workspacesv1.ResolvedResources {
	one := int32(1)
	return &workspacesv1.ResolvedResources{Replicas: replicas, GPUResourceName: "nvidia.com/gpu",
		PerReplica: workspacesv1.PerReplicaResources{GPUVendor: workspacesv1.GPUVendorNVIDIA, GPUCount: &one}}
}

// admittedOnNodes is an admission on cd of one replica of one NVIDIA GPU on each node named.
func admittedOnNodes(cd types.NamespacedName, nodes ...string) *workspacesv1.Admission {
	ad := &workspacesv1.Admission{Cluster: cd.String(), GPUResourceName: "nvidia.com/gpu", GPUVendor: workspacesv1.GPUVendorNVIDIA,
		GPUsPerReplica: 1, GPUs: int64(len(nodes)), Replicas: int32(len(nodes))}
	for _, n := range nodes {
		ad.Nodes = append(ad.Nodes, workspacesv1.AdmittedNode{Name: n, Hostname: n, Replicas: 1})
	}
	return ad
}

// newWorkspaceOn creates the workspace ns/name on the ClusterDeployment cd.
func newWorkspaceOn(ctx context.Context, t *testing.T, ns, name string, cd types.NamespacedName) *workspacesv1.WorkspaceDeployment {
	t.Helper()
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: "c-1-0-0",
			ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Namespace: cd.Namespace, Name: cd.Name}}}
	must(t, k8s.Create(ctx, ws))
	return ws
}

// carryAdmission makes ws a workspace whose admission only its ServiceSet carries, as a pass leaves it
// that made the ServiceSet and ended before its status write: Deploying with res resolved and no
// admission in its status, and its ServiceSet on cd (in cd's namespace) carrying ad.
func carryAdmission(ctx context.Context, t *testing.T, ws *workspacesv1.WorkspaceDeployment, res *workspacesv1.ResolvedResources,
	cd types.NamespacedName, ad *workspacesv1.Admission) {
	t.Helper()
	ws.Status.Phase = workspacesv1.PhaseDeploying
	ws.Status.ResolvedResources = res.DeepCopy()
	must(t, k8s.Status().Update(ctx, ws))
	carried, err := json.Marshal(ad)
	must(t, err)
	must(t, k8s.Create(ctx, &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: cd.Namespace, Name: ws.Namespace + "-" + ws.Name,
			Labels: map[string]string{workspacesv1.ClusterDeploymentLabel: cd.Name, workspacesv1.WorkspaceLabel: ws.Name,
				workspacesv1.WorkspaceNamespaceLabel: ws.Namespace},
			Annotations: map[string]string{owned.AnnotationAdmission: string(carried)}},
		Spec: k0rdentv1beta1.ServiceSetSpec{Cluster: cd.Name,
			Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: []k0rdentv1beta1.ServiceWithValues{{Name: ws.Name, Namespace: "ws-" + ws.Name, Template: "t"}}},
	}))
}

// gpuQuota creates the WorkspaceQuota ns/gpus of limit NVIDIA GPUs, guaranteed of them (nil: all).
func gpuQuota(ctx context.Context, t *testing.T, ns string, limit int64, guaranteed *int64) {
	t.Helper()
	must(t, k8s.Create(ctx, &workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpus"},
		Spec: workspacesv1.WorkspaceQuotaSpec{GPUs: []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: limit, Guaranteed: guaranteed}}}}))
}
