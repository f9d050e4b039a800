package gate

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/text"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// holdsGPUs reports whether a workspace's admission still holds GPUs: it is admitted and not Failed
// (phase is the one that goes with the admission, from memory.state: the cached object's may be
// older), or its ServiceSet exists (the release may hold them, even while the workspace is deleted).
func holdsGPUs(o *workspacesv1.WorkspaceDeployment, ad *workspacesv1.Admission, phase workspacesv1.WorkspacePhase, hasServiceSet bool) bool {
	if ad == nil {
		return false
	}
	return hasServiceSet || (o.DeletionTimestamp.IsZero() && phase != workspacesv1.PhaseFailed)
}

// bindsNoMore reports whether an admitted workspace's replicas that are not bound yet will not be
// bound by its release any more: it is being deleted (its release is uninstalled), or the current
// rollout of its release (set: its ServiceSet) was never deployed and its deploy deadline passed
// (rolloutLapsed). Its bound pods still hold their GPUs, and the nodes show them as used; its unbound
// replicas no longer reserve GPUs or keep others off their nodes, so that a deletion waiting for
// k0rdent's uninstall, or a release whose pods can never bind (a chart that fails, a request no node
// can take), does not block the admissions on its nodes.
//
// A Failed workspace within its deploy deadline is not one of them: k0rdent retries a failed release
// with backoff, and a later Deployed heals the workspace, its pods bound onto the GPUs its admission
// counted. k0rdent fails the releases on a child whose API server cannot be reached until it is back;
// the replicas of those whose pods the child had not made yet counted as free, and the first decision
// after the outage admitted another workspace onto them (seen in make chaos: GPUs admitted twice
// after a child API outage). timeout is the deployTimeout of the workspace's class, 0 when not known
// (then the replicas keep reserving).
func bindsNoMore(o *workspacesv1.WorkspaceDeployment, set *k0rdentv1beta1.ServiceSet, timeout time.Duration, now time.Time) bool {
	return !o.DeletionTimestamp.IsZero() || rolloutLapsed(set, timeout, now)
}

// rolloutLapsed reports whether the current rollout of a release (set: its ServiceSet; nil when there
// is none) passed its deploy deadline, timeout after it started (owned.AnnotationRolloutStarted),
// without k0rdent and the child confirming it deployed (owned.AnnotationRolloutDeployed). A rollout
// that was deployed once stays counted: a replica that is not bound then is a pod being replaced, and
// its GPUs are its own. A ServiceSet without a rollout stamp, or an unknown timeout (0), never lapses.
func rolloutLapsed(set *k0rdentv1beta1.ServiceSet, timeout time.Duration, now time.Time) bool {
	started, ok := undeployedRollout(set)
	return ok && timeout > 0 && !now.Before(started.Add(timeout))
}

// undeployedRollout returns when the current rollout of set started, when it has a stamp and was not
// confirmed deployed.
func undeployedRollout(set *k0rdentv1beta1.ServiceSet) (time.Time, bool) {
	if set == nil {
		return time.Time{}, false
	}
	// Compared before parsing: most rollouts were deployed, and a decision asks for every ServiceSet
	// of the cluster.
	stamp := set.Annotations[owned.AnnotationRolloutStarted]
	if stamp == "" || set.Annotations[owned.AnnotationRolloutDeployed] == stamp {
		return time.Time{}, false
	}
	started, err := time.Parse(time.RFC3339, stamp)
	if err != nil {
		return time.Time{}, false
	}
	return started, true
}

// deployTimeouts reads the deployTimeout of workspaces' classes from the cache, once per class in
// one decision; only the workspaces whose rollout was not deployed ask (bindsNoMore).
type deployTimeouts struct {
	client  client.Client
	byClass map[string]time.Duration
}

// of returns the deployTimeout of o's class, or 0 when the class cannot be read (its replicas then
// keep reserving: the safe side).
func (d *deployTimeouts) of(ctx context.Context, o *workspacesv1.WorkspaceDeployment, set *k0rdentv1beta1.ServiceSet) time.Duration {
	if _, ok := undeployedRollout(set); !ok {
		return 0
	}
	name := o.Spec.WorkspaceClassRef
	if t, ok := d.byClass[name]; ok {
		return t
	}
	var class workspacesv1.WorkspaceClass
	var t time.Duration
	if err := d.client.Get(ctx, types.NamespacedName{Name: name}, &class); err == nil {
		t = class.Spec.DeployTimeoutOrDefault()
	}
	if d.byClass == nil {
		d.byClass = map[string]time.Duration{}
	}
	d.byClass[name] = t
	return t
}

// reservations returns the GPUs held by other workspaces on the site's child cluster (through its
// ClusterDeployment or any other that reaches the same child: site) that the child's pods do not
// show yet: the admissions that still hold GPUs (see holdsGPUs) and whose release may still bind
// replicas (see bindsNoMore: not being deleted, within the deploy deadline or deployed once), each replica charged to the node it was counted on, less the replicas
// bound there; then the workspaces waiting for the same GPUs that
// are ahead of this one in the cluster's queue (higher priority, then older; priority.go) and not
// suspended. A waiter that holds an admission too (a resize waiting for more GPUs, or an admission
// gated again) reserves what the admission cannot give it (growthReservations). want are the resources of ws, the workspace
// asking; nodes and pods are the child's.
func (g *Gate) reservations(ctx context.Context, ws *workspacesv1.WorkspaceDeployment, want *workspacesv1.ResolvedResources, st site,
	nodes []corev1.Node, pods []corev1.Pod, now time.Time) (heldGPUs, error) {
	list, err := g.workspacesOn(ctx, st)
	if err != nil {
		return heldGPUs{}, err
	}
	withSet, err := g.serviceSetsByWorkspace(ctx, list)
	if err != nil {
		return heldGPUs{}, err
	}
	unpinned := map[string]bool{}
	caps, err := g.priorityCaps(ctx)
	if err != nil {
		return heldGPUs{}, err
	}
	caps.sortOn(list, st)
	mySel := gpu.Selector(gpuRequest("", want))
	// queuedAhead returns the resources of o when it waits in the cluster's queue ahead of ws for the
	// same GPUs (vendor and selector), or reclaims GPUs there (its hold counts against every other
	// workspace of the vendor, whatever it selects: aheadOn), else nil: only those waiters reserve
	// GPUs against ws. A waiter
	// is one whose status says so, or one the gate has just told to wait whose status write the cache
	// does not show yet (memory.waiting).
	queuedAhead := func(o *workspacesv1.WorkspaceDeployment) *workspacesv1.ResolvedResources {
		res := o.Status.ResolvedResources
		waiting := waitingForGPUs(o)
		if decided := g.mem.waiting(o); decided != nil {
			res, waiting = decided, true
		}
		if waiting && o.DeletionTimestamp.IsZero() && !o.Spec.Suspend && res != nil && GPUs(res) > 0 &&
			caps.aheadOn(o, ws, st) && res.PerReplica.GPUVendor == want.PerReplica.GPUVendor &&
			(equality.Semantic.DeepEqual(gpu.Selector(gpuRequest("", res)), mySel) || reclaimingOn(o, st) != nil) {
			return res
		}
		return nil
	}
	bound := boundPodsByNamespace(pods, nodes)
	lost := newLostView(nodes, pods) // read once: asked for every admitted workspace ahead
	timeouts := deployTimeouts{client: g.client}
	var admitted, waiting []gpu.Reservation
	for _, o := range list {
		if o.Name == ws.Name && o.Namespace == ws.Namespace {
			continue
		}
		key := o.Namespace + "/" + o.Name
		set, hasSet := withSet[types.NamespacedName{Namespace: o.Namespace, Name: o.Name}]
		current, phase := g.mem.state(o)
		ad := owned.AdmissionOf(current, set)
		if !st.counts(ad) {
			ad = nil
		}
		switch {
		case holdsGPUs(o, ad, phase, hasSet) && !bindsNoMore(o, set, timeouts.of(ctx, o, set), now):
			admitted = append(admitted, admittedReservations(key, ad, bound[owned.ReleaseNamespace(o)])...)
			if !pinnedAdmission(ad) {
				unpinned[key] = true
			}
			// A workspace that holds an admission and waits keeps its place in the queue for what the
			// admission cannot give it: the GPUs its new request adds (it raised its request), or
			// whole replicas where its admitted node is gone or was replaced under its name (it was
			// gated again). A newer waiter must not take them first.
			if res := queuedAhead(o); res != nil {
				waiting = append(waiting, growthReservations(key, ad, res, nodes)...)
			} else if res := o.Status.ResolvedResources; res != nil && caps.ahead(o, ws) && lost.lost(ad, owned.ReleaseNamespace(o)) != "" {
				// Its admission is lost (its node gone or replaced, or unable to take its pods), and
				// its own pass, which gates it again ahead of ws, may not have come yet: it keeps its
				// place for the replicas it must find anew, as if it were already waiting, so that a
				// newer workspace does not take the GPUs of a node that replaced its own.
				waiting = append(waiting, growthReservations(key, ad, res, nodes)...)
			}
		case ad == nil && hasSet && o.Status.ResolvedResources != nil && GPUs(o.Status.ResolvedResources) > 0:
			// A ServiceSet made before admissions were recorded: its resources hold the GPUs.
			res := o.Status.ResolvedResources
			replicas := res.Replicas - boundGPUPods(bound[owned.ReleaseNamespace(o)], corev1.ResourceName(res.GPUResourceName), GPUs(res), "")
			unpinned[key] = true
			if replicas > 0 {
				admitted = append(admitted, gpu.Reservation{Key: key, Vendor: res.PerReplica.GPUVendor,
					Selector: gpu.Selector(gpuRequest(key, res)), GPUsPerReplica: GPUs(res), Replicas: replicas})
			}
		default:
			res := queuedAhead(o)
			if res == nil {
				continue
			}
			waiting = append(waiting, gpu.Reservation{Key: key, Vendor: res.PerReplica.GPUVendor,
				Selector: gpu.Selector(gpuRequest(key, res)), GPUsPerReplica: GPUs(res), Replicas: res.Replicas})
		}
	}
	return heldGPUs{admitted: admitted, waiting: waiting, unpinned: unpinned}, nil
}

// heldGPUs are the GPUs other workspaces hold on a cluster: the admitted replicas not bound yet, the
// requests of the waiters ahead (of a resize ahead: what it adds to its admission), and which admitted
// workspaces are not pinned to one node.
type heldGPUs struct {
	admitted, waiting []gpu.Reservation
	unpinned          map[string]bool
}

// pinnedAdmission reports whether an admission's replicas are pinned to one node (see scheduling.go).
func pinnedAdmission(ad *workspacesv1.Admission) bool {
	return ad.GPUsPerReplica > 0 && len(ad.Nodes) == 1 && ad.Nodes[0].Hostname != ""
}

// unpinnedOverlap keeps the scheduler from placing replicas on GPUs the gate counted for another
// workspace. Replicas pinned to one node can only go there; replicas that are not pinned (spread
// over several nodes, or on a node without a hostname label) can go to any node matching their
// selector. So a workspace that would not be pinned is admitted only when no other workspace's
// counted replicas are still unbound on the nodes matching its selector, and no workspace is
// admitted onto a node that an unpinned workspace's unbound replicas could still take. The wait
// ends when those pods are bound (a child event). It returns why to wait, or "", naming the other
// workspace only when it is in viewer, the asking workspace's namespace (text.WorkspaceKeySeenFrom).
func unpinnedOverlap(viewer string, d gpu.Decision, nodes []corev1.Node, held heldGPUs) string {
	byName := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	pinned := len(d.Placement) == 1
	if pinned {
		if n := byName[d.Placement[0].Node]; n == nil || n.Labels[corev1.LabelHostname] == "" {
			pinned = false
		}
	}
	for _, r := range held.admitted {
		if r.Replicas <= 0 {
			continue
		}
		if !pinned {
			for i := range nodes {
				n := &nodes[i]
				if (r.Node == "" || r.Node == n.Name) && gpu.MatchesSelector(n, d.Selector) && gpu.MatchesSelector(n, r.Selector) {
					return fmt.Sprintf("the replicas cannot be pinned to one node (they need several nodes, or the node has no %s label), and GPUs counted for %s on node %s are not bound yet", corev1.LabelHostname, text.WorkspaceKeySeenFrom(viewer, r.Key), n.Name)
				}
			}
			continue
		}
		if held.unpinned[r.Key] {
			if n := byName[d.Placement[0].Node]; n != nil && gpu.MatchesSelector(n, r.Selector) {
				return fmt.Sprintf("%s is spread over several nodes and its replicas are not bound yet; they could still take node %s", text.WorkspaceKeySeenFrom(viewer, r.Key), n.Name)
			}
		}
	}
	return ""
}

// admittedReservations charges an admission's replicas that are not bound yet to the nodes they were
// counted on; pods are the bound pods of the workspace's release namespace. A replica is bound when a
// pod asking at least the admission's GPUs per replica is (boundGPUPods): after a resize to more GPUs
// per replica the release's old pods still run on the old request until its rollout replaces them,
// and the nodes show only their GPUs as taken, so the admission still reserves its replicas whole.
func admittedReservations(key string, ad *workspacesv1.Admission, pods []*corev1.Pod) []gpu.Reservation {
	if ad.GPUsPerReplica <= 0 {
		return nil
	}
	res := corev1.ResourceName(ad.GPUResourceName)
	// Replicas pinned to one node are bound only there: a pod of the release still running elsewhere
	// (on the node of an earlier admission, until the rollout replaces it) holds GPUs there, not here.
	on := ""
	if pinnedAdmission(ad) {
		on = ad.Nodes[0].Name
	}
	unbound := ad.Replicas - boundGPUPods(pods, res, ad.GPUsPerReplica, on)
	var out []gpu.Reservation
	for _, n := range ad.Nodes {
		if unbound <= 0 {
			break
		}
		left := min(max(n.Replicas-boundGPUPods(pods, res, ad.GPUsPerReplica, n.Name), 0), unbound)
		if left == 0 {
			continue
		}
		out = append(out, gpu.Reservation{Key: key, Vendor: ad.GPUVendor, Selector: ad.Selector, Node: n.Name,
			GPUsPerReplica: ad.GPUsPerReplica, Replicas: left})
		unbound -= left
	}
	if unbound > 0 {
		// Replicas not placed on named nodes (none were recorded): charged by first fit.
		out = append(out, gpu.Reservation{Key: key, Vendor: ad.GPUVendor, Selector: ad.Selector,
			GPUsPerReplica: ad.GPUsPerReplica, Replicas: unbound})
	}
	return out
}

// growthReservations are the GPUs that a workspace holding an admission needs beyond it for the
// request it waits for (res): a larger request (a resize), or the same one whose admitted node is
// gone or was replaced under its name (gated again: the replica moves, whole). They are reserved
// against the waiters behind it, so that it keeps its place in the queue for what the admission
// cannot give it.
//
// What the admission holds is counted already (its bound pods, its replicas not bound yet), and the
// workspace's own decision counts those GPUs as its own: a replica that grows where it runs needs
// only the added GPUs there. So, up to the replicas asked:
//   - an admitted replica reserves the added GPUs per replica on the node it was counted on, when the
//     node is still there under its hostname, matches the new request and could hold the grown
//     replica at all;
//   - an admitted replica whose node the admission does not record reserves them by first fit;
//   - a replica whose node cannot hold it grown, or is gone, and every replica added reserve the
//     whole new replica by first fit, as a waiter's do; so does every replica when the admission
//     holds no GPUs of the new request's resource.
//
// Reserving the whole new request instead would not do: where only the GPUs beside a replica's own
// make it fit (one node), the others' count finds no room for it, and a reservation that fits nowhere
// takes nothing. Like a waiter's, the reservation guesses where the workspace will go: its own
// decision may place it elsewhere.
func growthReservations(key string, ad *workspacesv1.Admission, res *workspacesv1.ResolvedResources, nodes []corev1.Node) []gpu.Reservation {
	per := GPUs(res)
	if per <= 0 {
		return nil
	}
	sel := gpu.Selector(gpuRequest(key, res))
	vendor := res.PerReplica.GPUVendor
	resName, _ := gpu.ResourceNameFor(vendor)
	left := res.Replicas
	var out []gpu.Reservation
	if held, _ := gpu.ResourceNameFor(ad.GPUVendor); ad.GPUsPerReplica > 0 && held == resName {
		byName := make(map[string]*corev1.Node, len(nodes))
		for i := range nodes {
			byName[nodes[i].Name] = &nodes[i]
		}
		added := per - ad.GPUsPerReplica
		var moved, recorded int32
		for _, an := range ad.Nodes {
			k := min(an.Replicas, left)
			if k <= 0 {
				break
			}
			recorded += an.Replicas
			left -= k
			var inPlace int32
			if n := byName[an.Name]; n != nil && gpu.MatchesSelector(n, sel) && (an.Hostname == "" || n.Labels[corev1.LabelHostname] == an.Hostname) {
				inPlace = int32(min(int64(k), gpu.Allocatable(n, resName)/per))
			}
			moved += k - inPlace
			if added > 0 && inPlace > 0 {
				out = append(out, gpu.Reservation{Key: key, Vendor: vendor, Selector: sel, Node: an.Name, GPUsPerReplica: added, Replicas: inPlace})
			}
		}
		if k := min(max(ad.Replicas-recorded, 0), left); k > 0 {
			left -= k
			if added > 0 {
				out = append(out, gpu.Reservation{Key: key, Vendor: vendor, Selector: sel, GPUsPerReplica: added, Replicas: k})
			}
		}
		left += moved
	}
	if left > 0 {
		out = append(out, gpu.Reservation{Key: key, Vendor: vendor, Selector: sel, GPUsPerReplica: per, Replicas: left})
	}
	return out
}

// workspacesOn lists the workspaces that may hold or wait for GPUs of the site's child cluster: those
// of its ClusterDeployment and of its peers (by the cluster index), those admitted on the same child
// by identity (the identity index: a peer not connected since a restart is not known as a peer, but
// its admissions are counted), and those this process admitted there that the cache does not show
// yet. Each once. They are the cache's own objects, not copied: read only (the slice is the caller's,
// so sorting it is safe).
func (g *Gate) workspacesOn(ctx context.Context, st site) ([]*workspacesv1.WorkspaceDeployment, error) {
	var items []*workspacesv1.WorkspaceDeployment
	var seen map[types.NamespacedName]bool
	lists := 0
	add := func(index, value string) error {
		got, err := g.workspacesBy(ctx, index, value)
		if err != nil {
			return fmt.Errorf("listing workspaces of %s: %w", value, err)
		}
		lists++
		if lists == 1 {
			items = got
			return nil
		}
		if seen == nil {
			seen = make(map[types.NamespacedName]bool, len(items)+len(got))
			for _, o := range items {
				seen[types.NamespacedName{Namespace: o.Namespace, Name: o.Name}] = true
			}
		}
		for _, o := range got {
			if k := (types.NamespacedName{Namespace: o.Namespace, Name: o.Name}); !seen[k] {
				seen[k] = true
				items = append(items, o)
			}
		}
		return nil
	}
	for _, cd := range st.clusters() {
		if err := add(owned.IndexCluster, cd.String()); err != nil {
			return nil, err
		}
	}
	if st.id != "" {
		if err := add(owned.IndexClusterIdentity, string(st.id)); err != nil {
			return nil, err
		}
	}
	return g.withRecentAdmissions(ctx, st, items), nil
}

// serviceSetsByWorkspace returns the ServiceSets not scaled to zero of the listed workspaces, by
// workspace, read by the cluster index once for each cluster they are on.
func (g *Gate) serviceSetsByWorkspace(ctx context.Context, list []*workspacesv1.WorkspaceDeployment) (map[types.NamespacedName]*k0rdentv1beta1.ServiceSet, error) {
	withSet := map[types.NamespacedName]*k0rdentv1beta1.ServiceSet{}
	listed := map[types.NamespacedName]bool{}
	for _, o := range list {
		cd := owned.ClusterKey(o)
		if listed[cd] {
			continue
		}
		listed[cd] = true
		if err := g.workspacesWithServiceSets(ctx, cd, withSet); err != nil {
			return nil, err
		}
	}
	return withSet, nil
}

// workspacesWithServiceSets adds the ServiceSets on the cluster to out by workspace,
// from their labels, leaving out those of stopped workspaces. The ServiceSets are the cache's own
// objects: they are only read.
func (g *Gate) workspacesWithServiceSets(ctx context.Context, cd types.NamespacedName, out map[types.NamespacedName]*k0rdentv1beta1.ServiceSet) error {
	// By the cluster index: a label selector alone would read every ServiceSet of the namespace.
	sets, err := g.serviceSetsBy(ctx, owned.IndexServiceSetCluster, cd.String())
	if err != nil {
		return fmt.Errorf("listing ServiceSets of %s: %w", cd, err)
	}
	for _, set := range sets {
		l := set.Labels
		if l[owned.LabelStopped] == "true" {
			continue // scaled to zero: its release holds no GPU (stop.go)
		}
		out[types.NamespacedName{Namespace: l[workspacesv1.WorkspaceNamespaceLabel], Name: l[workspacesv1.WorkspaceLabel]}] = set
	}
	return nil
}

// boundPodsByNamespace indexes the pods that are bound to a node that exists and are not terminal by
// namespace, once per decision: counting each workspace's bound replicas over every pod of the
// cluster made a decision O(workspaces x pods). A pod bound to a node that is gone (replaced: its pods
// stay until they are collected) holds no GPU the gate counts, so it is no replica that does.
func boundPodsByNamespace(pods []corev1.Pod, nodes []corev1.Node) map[string][]*corev1.Pod {
	exists := make(map[string]bool, len(nodes))
	for i := range nodes {
		exists[nodes[i].Name] = true
	}
	out := map[string][]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != "" && exists[p.Spec.NodeName] && !gpu.IsTerminal(p) {
			out[p.Namespace] = append(out[p.Namespace], p)
		}
	}
	return out
}

// boundGPUPods counts the pods (bound and not terminal, of one namespace: boundPodsByNamespace) that
// request at least perReplica of the GPU resource (and at least one), on one node when node is set:
// the replicas whose GPUs the nodes already show as taken. A pod that asks fewer GPUs holds only
// those: it is not a replica of a request that grew.
func boundGPUPods(pods []*corev1.Pod, res corev1.ResourceName, perReplica int64, node string) int32 {
	if res == "" {
		return 0
	}
	perReplica = max(perReplica, 1)
	var n int32
	for _, p := range pods {
		if (node == "" || p.Spec.NodeName == node) && gpu.PodRequest(p, res) >= perReplica {
			n++
		}
	}
	return n
}

// withRecentAdmissions adds to a site's workspaces those this process admitted there whose
// placement the cache does not show yet (the cluster index reads status.placement), so that the gate
// counts their GPUs.
func (g *Gate) withRecentAdmissions(ctx context.Context, st site, items []*workspacesv1.WorkspaceDeployment) []*workspacesv1.WorkspaceDeployment {
	keys := g.mem.keysOn(st.counts)
	if len(keys) == 0 {
		return items
	}
	seen := make(map[types.NamespacedName]bool, len(items))
	for _, o := range items {
		seen[types.NamespacedName{Namespace: o.Namespace, Name: o.Name}] = true
	}
	for _, key := range keys {
		ns, name, _ := strings.Cut(key, "/")
		k := types.NamespacedName{Namespace: ns, Name: name}
		if seen[k] {
			continue
		}
		o := &workspacesv1.WorkspaceDeployment{}
		if err := g.client.Get(ctx, k, o); err != nil {
			continue
		}
		items = append(items, o)
	}
	return items
}
