package gate

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/metrics"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// Snapshotter reads a child cluster's Nodes and Pods, and knows which ClusterDeployments reach one
// child cluster.
type Snapshotter interface {
	Snapshot(ctx context.Context, cd types.NamespacedName) ([]corev1.Node, []corev1.Pod, error)
	// Identity returns the identity of cd's child cluster (the UID of its kube-system namespace);
	// empty when not known (the child cannot be reached, or its identity could not be read). It may
	// connect to the child.
	Identity(ctx context.Context, cd types.NamespacedName) types.UID
	// Peers returns the other ClusterDeployments connected to the same child cluster now.
	Peers(cd types.NamespacedName) []types.NamespacedName
}

// Gate is the GPU gate of one process. Its zero value is not usable: use New.
type Gate struct {
	client    client.Client
	informers cache.Informers
	children  Snapshotter
	mem       *memory
}

// New returns a gate that reads workspaces, ServiceSets and quotas through c (the manager's cache),
// the workspaces and ServiceSets on a child through informers (the same cache, by its field indexes,
// without copying: index.go; nil lists them through c), and the children's Nodes and Pods through
// children.
func New(c client.Client, informers cache.Informers, children Snapshotter) *Gate {
	return &Gate{client: c, informers: informers, children: children, mem: newMemory()}
}

// Request asks the gate about one workspace.
type Request struct {
	// Workspace is the workspace as the pass sees it; the gate only reads it: its key, priority and
	// creation, and status.admission as the pass has it.
	Workspace *workspacesv1.WorkspaceDeployment
	// Previous is the status as the pass found it.
	Previous *workspacesv1.WorkspaceDeploymentStatus
	// Resources are the workspace's resolved resources.
	Resources *workspacesv1.ResolvedResources
	// Cluster is the cluster Admit decides on.
	Cluster types.NamespacedName
	// ClusterUID is the UID of Cluster's ClusterDeployment as the pass found it; an admission granted
	// on another UID (a ClusterDeployment re-created under the same name) is gated again. Empty when
	// not known.
	ClusterUID types.UID
	// Candidates are the clusters Place chooses from, sorted by name.
	Candidates []types.NamespacedName
	// ServiceSet is the workspace's own ServiceSet as the pass found it before the gate; nil when
	// there is none.
	ServiceSet *k0rdentv1beta1.ServiceSet
	// HasServiceSet reports whether the workspace's own ServiceSet exists now.
	HasServiceSet func(context.Context) (bool, error)
	// Now is the time of the pass.
	Now time.Time
	// Record writes the workspace's status with the decision in it, inside the gate's locks, and
	// returns the workspace as written. The gate calls it when an admission must be counted before
	// the next decision: under a WorkspaceQuota, when a ServiceSet exists, on placement, and for an
	// admission taken over from before admissions were recorded.
	Record func(context.Context, Decision) (*workspacesv1.WorkspaceDeployment, error)
}

func (r *Request) key() string { return r.Workspace.Namespace + "/" + r.Workspace.Name }

// Outcome is what the gate decided.
type Outcome string

const (
	// Covered means the workspace's admission covers its resources; nothing was decided. Admission is
	// set when it was taken back from the workspace's ServiceSet (a pass that ended before its status
	// write).
	Covered Outcome = "Covered"
	// Kept means a workspace admitted before admissions were recorded (Feasible for exactly its resources,
	// its ServiceSet made) keeps running; Admission records it, already written.
	Kept Outcome = "Kept"
	// Admitted means the resources fit; Admission, Feasibility and Quota say how.
	Admitted Outcome = "Admitted"
	// Waiting means the GPUs are taken now, or the matching nodes cannot take pods now (cordoned,
	// NotReady, GPUs not advertised yet); they may free up or come back.
	Waiting Outcome = "Wait"
	// Unavailable means the cluster can never hold the resources: no node that could hold a replica
	// exists there, not even a cordoned, NotReady or not yet advertised one.
	Unavailable Outcome = "Unavailable"
	// Unreachable means the child could not be read.
	Unreachable Outcome = "Unreachable"
	// OverQuota means the resources fit, but a WorkspaceQuota of the namespace is used up.
	OverQuota Outcome = "QuotaExceeded"
	// NoFitNow means no candidate cluster can hold the workspace now; one may later (Place only).
	NoFitNow Outcome = "NoClusterFitsNow"
	// NoFitEver means no candidate cluster can ever hold the workspace (Place only).
	NoFitEver Outcome = "NoClusterCanFit"
)

// Decision is the gate's answer.
type Decision struct {
	Outcome Outcome
	// Reason and Message are the gate's words: the reason and message of the GPU decision, or of the
	// placement (Place).
	Reason, Message string
	// Admission is the admission granted (Admitted, Kept, and Covered when taken back).
	Admission *workspacesv1.Admission
	// Feasibility is the feasibility report of the decision on the cluster; nil when none was made.
	Feasibility *workspacesv1.Feasibility
	// Quota is what the namespace's quotas said; nil when they were not asked.
	Quota *QuotaResult
	// Placement is the placement chosen (Place only).
	Placement *workspacesv1.Placement
	// Cluster is the cluster decided on.
	Cluster types.NamespacedName
	// Recorded is true when Record wrote the status with this decision.
	Recorded bool
	// Lost says why the workspace's earlier admission no longer held and it was gated again (its
	// ClusterDeployment re-created, an admitted node gone, or unable to take the workspace's pods:
	// Lost); empty otherwise. Message and Feasibility start with it.
	Lost string
	// Reclaiming is set when the workspace waits for GPUs within its namespace's guarantee that
	// borrowers of its cohort hold (Waiting, reason WaitingForReclaim): the borrowers stopped for it,
	// written in its status before the gate's locks are released. Every other outcome clears it.
	Reclaiming *workspacesv1.Reclaiming
}

// Admit decides whether the workspace's resources may start on req.Cluster now. A workspace whose
// admission covers its current resources is not gated again while the admission holds: its own pods
// hold, or will hold, the GPUs. It no longer holds when it was granted on an earlier ClusterDeployment
// of the name (ClusterRecreated) or an admitted node is lost (Lost); the workspace is then gated again
// as if it had none, and Decision.Lost says why. An admission without a cluster UID (recorded before
// it was) is given the current one without gating again. Before the gate's locks are released an
// admission is either remembered until the pass's status write (a first GPU admission, which also
// travels on the ServiceSet the pass makes), or written at once through req.Record (a CPU-only
// admission under a quota, or any admission when a ServiceSet exists); so the next decision on the
// cluster or under the namespace's quotas, in this process or after a restart, counts it.
func (g *Gate) Admit(ctx context.Context, req Request) (Decision, error) {
	cluster := req.Cluster.String()
	d := Decision{Outcome: Covered, Cluster: req.Cluster}
	current := req.Workspace.Status.Admission
	if current == nil {
		// A pass that made the ServiceSet ended before it wrote the status (a restart, a failed
		// write): the ServiceSet carries the admission, which others count already; take it back.
		if ad := owned.AnnotatedAdmission(req.ServiceSet); Covers(ad, cluster, req.Resources) {
			d.Admission, current = ad, ad
		}
	}
	lost := ""
	st := site{cd: req.Cluster}
	if Covers(current, cluster, req.Resources) {
		// The child's identity is asked for (which may connect to it) only when the admission holds
		// GPUs there, or has no identity recorded yet; its peers are not needed to keep an admission.
		if current.GPUsPerReplica > 0 || current.ClusterIdentity == "" {
			st.id = g.children.Identity(ctx, req.Cluster)
		}
		if lost = g.lost(ctx, req, st, current); lost == "" {
			if (current.ClusterUID == "" && req.ClusterUID != "") || (current.ClusterIdentity == "" && st.id != "") {
				d.Admission = current.DeepCopy()
				if d.Admission.ClusterUID == "" {
					d.Admission.ClusterUID = req.ClusterUID
				}
				if d.Admission.ClusterIdentity == "" {
					d.Admission.ClusterIdentity = st.id
				}
			}
			return d, nil
		}
	}
	// A CPU-only workspace reserves no GPUs: its decision needs neither the cluster's gate lock nor
	// the other workspaces' reservations, and its admission is written with the pass's status. Under a
	// WorkspaceQuota it still takes the namespace's quota lock (lock takes it when the namespace has a
	// quota) and records its admission before releasing it, so the next count sees it.
	cpuOnly := GPUs(req.Resources) == 0
	st = g.site(ctx, req.Cluster)
	locked := st.lockKeys()
	if cpuOnly {
		locked = nil
	}
	unlock, cohort := g.lock(ctx, req.Workspace.Namespace, locked...)
	defer unlock()

	if kept, ok, err := g.keepEarlierAdmission(ctx, req); err != nil || ok {
		return kept, err
	}
	nodes, pods, err := g.children.Snapshot(ctx, req.Cluster)
	if err != nil {
		metrics.GateDecisions.WithLabelValues("Unreachable").Inc()
		return Decision{Outcome: Unreachable, Cluster: req.Cluster, Reason: workspacesv1.ReasonClusterUnreachable,
			Message: fmt.Sprintf("cannot reach the child cluster of ClusterDeployment %s: %v", req.Cluster, err)}, nil
	}
	gd, others, err := g.decide(ctx, req.Workspace, req.Resources, st, nodes, pods, req.Now)
	if err != nil {
		return Decision{}, err
	}
	fit := gpu.FitResources(gd.Selector, perReplicaList(req.Resources), req.Resources.Replicas, nodes, others)
	metrics.GateDecisions.WithLabelValues(string(gd.Outcome)).Inc()

	f := &workspacesv1.Feasibility{
		Feasible: gd.Feasible(), Reason: gd.Reason, Message: feasibilityMessage(gd, fit, req.Resources),
		Selector: gd.Selector, MatchingNodes: gd.MatchingNodes, FreeGPUs: gd.FreeGPUs, FittingReplicas: gd.FittingReplicas,
	}
	if len(f.Selector) == 0 {
		f.Selector = nil
	}
	if cpuOnly {
		f.MatchingNodes, f.FittingReplicas = fit.MatchingNodes, fit.FittingReplicas
	}
	d = Decision{Cluster: req.Cluster, Outcome: outcomeOf(gd), Reason: gd.Reason, Message: gd.Message, Feasibility: f}
	// Told to wait, the workspace holds its place for the decisions that follow before its status
	// write reaches the cache (memory.decided).
	g.mem.decided(req.key(), req.Workspace.ResourceVersion, req.Resources, d.Outcome == Waiting)
	if lost != "" {
		d.Lost = lost
		d.Message = "gated again: " + lost + "; " + d.Message
		f.Message = "gated again: " + lost + "; " + f.Message
	}
	if d.Outcome == Waiting && !cpuOnly {
		return g.waitOrReclaim(ctx, req, st, cohort, gd, nodes, others, d)
	}
	if d.Outcome != Admitted {
		return d, nil
	}
	ad := newAdmission(cluster, req.Resources, gd, nodes, req.Now)
	ad.ClusterUID, ad.ClusterIdentity = req.ClusterUID, st.id
	q, err := g.checkQuota(ctx, req.Workspace, ad, cohort)
	if err != nil {
		return Decision{}, err
	}
	d.Quota = &q
	if q.Applies && !q.Within {
		d.Outcome = OverQuota
		return d, nil
	}
	if prev := req.Workspace.Status.Admission; prev != nil && prev.AdmittedAt != nil && equality.Semantic.DeepEqual(withoutTime(prev), withoutTime(ad)) {
		ad.AdmittedAt = prev.AdmittedAt
	}
	d.Outcome, d.Admission = Admitted, ad
	if cpuOnly && !q.Applies {
		return d, nil
	}
	if !cpuOnly && req.ServiceSet == nil {
		// A first GPU admission is not written on its own: it travels on the ServiceSet this pass
		// makes (owned.AnnotationAdmission) and reaches the status with the pass's one status write.
		// Until then this process counts it from memory (memory.state); after a restart, the
		// ServiceSet holds it, and before the ServiceSet exists nothing does, and nothing needs to.
		// The gate's counts read both, under a quota and in a cohort too: the cluster's reservations,
		// the namespace's and the cohort's quota use (namespaceUse) and the borrowers a reclaim weighs
		// (reclaim); a WorkspaceQuota's status counts the ServiceSet's. A CPU-only admission under a
		// quota is written at once (a ServiceSet carries GPU admissions only), and so is any admission
		// when a ServiceSet exists, whose release may still run on the old admission.
		g.mem.pend(req.key(), ad)
		return d, nil
	}
	d, _, err = g.record(ctx, req, d)
	return d, err
}

// waitOrReclaim completes a decision to wait: a workspace within its guarantee whose GPUs its cohort
// borrows reclaims them (reclaim), and the reclaim, new or changed, is written at once through
// req.Record, so that the next decision on the cluster, here or after a restart, holds the GPUs the
// borrowers free for it (aheadOn).
func (g *Gate) waitOrReclaim(ctx context.Context, req Request, st site, cohort string, gd gpu.Decision,
	nodes []corev1.Node, others []corev1.Pod, d Decision) (Decision, error) {
	rc, msg, err := g.reclaim(ctx, req, st, cohort, gd, nodes, others)
	if err != nil {
		return d, err
	}
	if rc == nil {
		if msg != "" {
			d.Message = msg + "; " + d.Message
		}
		return d, nil
	}
	d.Reclaiming, d.Reason = rc, workspacesv1.ReasonWaitingForReclaim
	d.Message = msg + "; " + d.Message
	if equality.Semantic.DeepEqual(rc, req.Workspace.Status.Reclaiming) {
		return d, nil
	}
	d, _, err = g.record(ctx, req, d)
	return d, err
}

// lost says why an admission that covers the request no longer holds, or "": it was granted on an
// earlier ClusterDeployment of the name, or on another child cluster behind it (ChildReplaced), or an
// admitted node is lost (Lost), read from the child's cached Nodes and Pods (no request to the
// child). A child that cannot be read says nothing about its nodes: the admission holds.
func (g *Gate) lost(ctx context.Context, req Request, st site, ad *workspacesv1.Admission) string {
	if ClusterRecreated(ad, req.ClusterUID) {
		return fmt.Sprintf("ClusterDeployment %s was deleted and created again (uid %s, admitted on uid %s)", req.Cluster, req.ClusterUID, ad.ClusterUID)
	}
	if ChildReplaced(ad, st.id) {
		return fmt.Sprintf("the child cluster of ClusterDeployment %s is another cluster now (kube-system namespace uid %s, admitted on %s)", req.Cluster, st.id, ad.ClusterIdentity)
	}
	if ad.GPUsPerReplica == 0 || len(ad.Nodes) == 0 {
		return ""
	}
	nodes, pods, err := g.children.Snapshot(ctx, req.Cluster)
	if err != nil {
		return ""
	}
	return Lost(ad, owned.ReleaseNamespace(req.Workspace), nodes, pods)
}

// outcomeOf is the gate's outcome for the arithmetic's decision on one cluster: Unavailable only when
// no node that could ever hold a replica exists; Waiting while GPUs are taken or the matching nodes
// cannot take pods now (cordoned, NotReady, GPUs not advertised yet: gpu.ReasonWaitingForGpuNodes),
// so that a drain or a kubelet restart keeps a waiter in the queue, in its place.
func outcomeOf(gd gpu.Decision) Outcome {
	switch gd.Outcome {
	case gpu.Unavailable:
		return Unavailable
	case gpu.Wait:
		return Waiting
	}
	return Admitted
}

// record writes the decision through req.Record and remembers the written admission until the cache
// shows it.
func (g *Gate) record(ctx context.Context, req Request, d Decision) (Decision, *workspacesv1.WorkspaceDeployment, error) {
	ws, err := req.Record(ctx, d)
	if err != nil {
		return Decision{}, nil, fmt.Errorf("recording the admission: %w", err)
	}
	d.Recorded = true
	g.mem.wrote(req.key(), ws.Status.Admission, ws.ResourceVersion, ws.Status.Phase)
	return d, ws, nil
}

// keepEarlierAdmission records the admission of a workspace admitted before admissions were
// recorded (Feasible for exactly its current resources, with its ServiceSet made): it is not gated
// again, so an upgrade never takes a running workspace back to Waiting.
func (g *Gate) keepEarlierAdmission(ctx context.Context, req Request) (Decision, bool, error) {
	prev := req.Previous
	if req.Workspace.Status.Admission != nil || prev == nil || prev.ResolvedResources == nil || prev.Phase == workspacesv1.PhaseFailed ||
		!meta.IsStatusConditionTrue(prev.Conditions, workspacesv1.FeasibleCondition) ||
		!equality.Semantic.DeepEqual(prev.ResolvedResources, req.Resources) {
		return Decision{}, false, nil
	}
	exists, err := req.HasServiceSet(ctx)
	if err != nil || !exists {
		return Decision{}, false, err
	}
	gd := gpu.Decision{Selector: req.Resources.NodeSelector}
	if f := prev.Feasibility; f != nil {
		gd.Selector = f.Selector
	}
	d := Decision{Outcome: Kept, Cluster: req.Cluster, Admission: newAdmission(req.Cluster.String(), req.Resources, gd, nil, req.Now)}
	d.Admission.ClusterUID = req.ClusterUID
	d, _, err = g.record(ctx, req, d)
	return d, true, err
}

// decide runs the gate's math for the workspace on the cluster, from the child's nodes and pods and
// the reservations of the other workspaces there at now; the caller holds the cluster's gate lock. It also
// returns the pods of the other workspaces. Place runs it for each candidate cluster, so that a
// placement never disagrees with the admission.
func (g *Gate) decide(ctx context.Context, ws *workspacesv1.WorkspaceDeployment, res *workspacesv1.ResolvedResources,
	st site, nodes []corev1.Node, pods []corev1.Pod, now time.Time) (gpu.Decision, []corev1.Pod, error) {
	own := owned.ReleaseNamespaceOn(ws, st.cd)
	others := make([]corev1.Pod, 0, len(pods))
	for i := range pods {
		if pods[i].Namespace != own {
			others = append(others, pods[i])
		}
	}
	var held heldGPUs
	if GPUs(res) > 0 {
		var err error
		if held, err = g.reservations(ctx, ws, res, st, nodes, pods, now); err != nil {
			return gpu.Decision{}, nil, err
		}
	}
	d := gpu.Gate(gpuRequest(ws.Namespace+"/"+ws.Name, res), nodes, others, append(held.admitted, held.waiting...))
	if d.Outcome == gpu.Admit && GPUs(res) > 0 {
		if why := unpinnedOverlap(ws.Namespace, d, nodes, held); why != "" {
			d.Outcome, d.Reason = gpu.Wait, workspacesv1.ReasonWaitingForGpuCapacity
			d.Message = why + "; " + d.Message
			d.Placement = nil
		}
	}
	return d, others, nil
}

// site is the cluster a decision is made on: the ClusterDeployment asked about, the identity of its
// child cluster, and the other ClusterDeployments known to reach that child (Snapshotter.Identity).
// One child cluster is one gate, however many ClusterDeployments reach it: its lock and its
// reservations are shared by all of them. Without an identity the ClusterDeployment stands alone.
type site struct {
	cd    types.NamespacedName
	id    types.UID
	peers []types.NamespacedName
}

func (g *Gate) site(ctx context.Context, cd types.NamespacedName) site {
	st := site{cd: cd, id: g.children.Identity(ctx, cd)}
	if st.id != "" {
		st.peers = g.children.Peers(cd)
	}
	return st
}

// lockKeys are the keys of the site's gate locks: its ClusterDeployment's, always, and the child
// cluster's identity when known. The ClusterDeployment's is taken even when the identity is known: a
// connection whose identity read failed (a child API server slow after a restart) knows the cluster
// only by its ClusterDeployment, and two decisions on one ClusterDeployment, one made with the
// identity and one without, must still exclude each other (seen in make chaos: GPUs admitted twice
// while a child came back).
func (s site) lockKeys() []string {
	keys := []string{s.cd.String()}
	if s.id != "" {
		keys = append(keys, "child:"+string(s.id))
	}
	return keys
}

// clusters are the ClusterDeployments of the site: its own, then its peers.
func (s site) clusters() []types.NamespacedName {
	return append([]types.NamespacedName{s.cd}, s.peers...)
}

// counts reports whether an admission holds GPUs of the site's child: it was granted on the
// ClusterDeployment or a peer, or on the same child cluster by identity.
func (s site) counts(ad *workspacesv1.Admission) bool {
	if ad == nil {
		return false
	}
	if ad.Cluster == s.cd.String() || (s.id != "" && ad.ClusterIdentity == s.id) {
		return true
	}
	for _, p := range s.peers {
		if ad.Cluster == p.String() {
			return true
		}
	}
	return false
}

// lock takes the locks of one gate decision, in the one order every decision takes them, so that no
// two decisions deadlock: first the namespace's quota lock, when a WorkspaceQuota applies to the
// namespace (the quota is counted across clusters; the cohort's lock when the namespace is in one),
// then the clusters' gate locks (site.lockKeys)
// sorted by key.
// It returns the cohort whose lock it took ("" when none): the quota check counts that cohort, so
// that a label changed in between cannot move a decision out from under its lock.
// Admit takes one cluster; Place takes every candidate, so that two workspaces never take the last
// GPUs of one cluster at once, whether they were placed or named it.
func (g *Gate) lock(ctx context.Context, namespace string, clusters ...string) (func(), string) {
	var unlocks []func()
	cohort := ""
	if quotas, err := listQuotas(ctx, g.client, namespace); err != nil || len(quotas) > 0 {
		// On a cache error the lock is taken: counting too carefully is safe. A namespace in a cohort
		// takes the cohort's lock, since its members count one another's use; a namespace the cache
		// cannot read takes its own and counts as in no cohort (it borrows nothing).
		cohort, _ = cohortOf(ctx, g.client, namespace)
		unlocks = append(unlocks, g.mem.lock(quotaLockKey(cohort, namespace)))
	}
	keys := append([]string(nil), clusters...)
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 && keys[i-1] == k {
			continue
		}
		unlocks = append(unlocks, g.mem.lock(k))
	}
	return func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}, cohort
}

// Settle tells the gate that the pass wrote the workspace's status (ad is the admission in it,
// resourceVersion and phase the write's): an admission pending since Admit is now counted from the
// status.
func (g *Gate) Settle(key string, ad *workspacesv1.Admission, resourceVersion string, phase workspacesv1.WorkspacePhase) {
	g.mem.settle(key, ad, resourceVersion, phase)
}

// Forget drops what the gate remembers of a workspace that is gone.
func (g *Gate) Forget(key string) { g.mem.forget(key) }

// Current returns a workspace's admission as the gate counts it: pending or recently written by
// this process, else the object's own.
func (g *Gate) Current(o *workspacesv1.WorkspaceDeployment) *workspacesv1.Admission {
	ad, _ := g.mem.state(o)
	return ad
}
