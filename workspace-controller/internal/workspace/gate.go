package workspace

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// admissionCovers reports whether an admission on the cluster grants exactly what the resources ask
// of the gate: vendor, GPUs per replica, replicas and selector.
func admissionCovers(ad *workspacesv1.Admission, cluster string, r *workspacesv1.ResolvedResources) bool {
	if ad == nil || ad.Cluster != cluster || ad.Replicas != r.Replicas || ad.GPUsPerReplica != gpus(r) {
		return false
	}
	if gpus(r) == 0 {
		return true
	}
	sel := gpu.Selector(gpuRequest("", r))
	return ad.GPUVendor == r.PerReplica.GPUVendor && equality.Semantic.DeepEqual(nonEmpty(ad.Selector), nonEmpty(sel))
}

func nonEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// holdsGPUs reports whether a workspace's admission still holds GPUs: it is admitted and not Failed
// (phase is the one that goes with the admission, from admissions.state: the cached object's may be
// older), or its ServiceSet exists (the release may hold them, even while the workspace is deleted).
func holdsGPUs(o *workspacesv1.WorkspaceDeployment, ad *workspacesv1.Admission, phase workspacesv1.WorkspacePhase, hasServiceSet bool) bool {
	if ad == nil {
		return false
	}
	return hasServiceSet || (o.DeletionTimestamp.IsZero() && phase != workspacesv1.PhaseFailed)
}

// gate checks the GPU request live against the child (docs/RECONCILIATION.md, step 3). A workspace whose admission
// covers its current resources is not checked again: its own pods hold, or will hold, the GPUs. Before
// the gate's lock is released, an admission is either remembered for the pass's status write and
// carried by the ServiceSet the pass makes (a first admission), or written to the status at once (under
// a quota, or when a ServiceSet exists); so the next decision on the cluster, in this process or after
// a restart, counts it.
func (r *Reconciler) gate(ctx context.Context, s *scope) (stepResult, error) {
	s.ws.Status.ResolvedResources = s.resources.DeepCopy()
	cluster := s.cdKey.String()
	if s.ws.Status.Admission == nil {
		// A pass that made the ServiceSet ended before it wrote the status (a restart, a failed
		// write): the ServiceSet carries the admission, which others count already; take it back.
		if ad := owned.AnnotatedAdmission(s.claimed); admissionCovers(ad, cluster, s.resources) {
			s.ws.Status.Admission = ad
		}
	}
	if admissionCovers(s.ws.Status.Admission, cluster, s.resources) {
		return next, nil
	}
	// A CPU-only workspace reserves no GPUs: its decision needs neither the cluster's gate lock nor
	// the other workspaces' reservations, and its admission is written with the pass's status. Under a
	// WorkspaceQuota it still takes the namespace's quota lock (lockGate takes it when the namespace
	// has a quota) and records its admission before releasing it, so the next count sees it.
	cpuOnly := gpus(s.resources) == 0
	locked := []string{cluster}
	if cpuOnly {
		locked = nil
	}
	unlock := r.lockGate(ctx, s.ws.Namespace, locked...)
	defer unlock()

	if adopted, err := r.adoptEarlierAdmission(ctx, s); err != nil || adopted {
		return next, err
	}
	nodes, pods, err := r.Children.Snapshot(ctx, s.cdKey)
	if err != nil {
		gateDecisions.WithLabelValues("Unreachable").Inc()
		s.blocked(workspacesv1.PhasePending, workspacesv1.FeasibleCondition, workspacesv1.ReasonClusterUnreachable,
			fmt.Sprintf("cannot reach the child cluster of ClusterDeployment %s: %v", s.cdKey, err))
		return stopAfter(r.Options.UnreachableRetry), nil
	}
	d, others, err := r.decide(ctx, s, nodes, pods)
	if err != nil {
		return stop, err
	}
	fit := gpu.FitResources(d.Selector, perReplicaList(s.resources), s.resources.Replicas, nodes, others)
	gateDecisions.WithLabelValues(string(d.Outcome)).Inc()

	f := &workspacesv1.Feasibility{
		Feasible: d.Feasible(), Reason: d.Reason, Message: feasibilityMessage(d, fit, s.resources),
		Selector: d.Selector, MatchingNodes: d.MatchingNodes, FreeGPUs: d.FreeGPUs, FittingReplicas: d.FittingReplicas,
	}
	if len(f.Selector) == 0 {
		f.Selector = nil
	}
	if gpus(s.resources) == 0 {
		f.MatchingNodes, f.FittingReplicas = fit.MatchingNodes, fit.FittingReplicas
	}
	s.ws.Status.Feasibility = f
	switch d.Outcome {
	case gpu.Unavailable:
		s.failed(workspacesv1.FeasibleCondition, d.Reason, d.Message)
		return stop, r.releaseAdmission(ctx, s)
	case gpu.Wait:
		s.blocked(workspacesv1.PhaseWaiting, workspacesv1.FeasibleCondition, workspacesv1.ReasonWaitingForGpuCapacity, d.Message)
		return stop, r.releaseAdmission(ctx, s)
	}
	ad := newAdmission(cluster, s.resources, d, nodes, s.now)
	if blocked, err := r.quotaBlocks(ctx, s, ad); err != nil || blocked {
		return stop, err
	}
	if prev := s.ws.Status.Admission; prev != nil && prev.AdmittedAt != nil && equality.Semantic.DeepEqual(withoutTime(prev), withoutTime(ad)) {
		ad.AdmittedAt = prev.AdmittedAt
	}
	s.ws.Status.Admission = ad
	s.setTrue(workspacesv1.FeasibleCondition, d.Reason, f.Message)
	if p := s.prev.Phase; p == workspacesv1.PhaseFailed || p == workspacesv1.PhaseWaiting || p == workspacesv1.PhasePending || p == "" {
		// Admitted: no longer Failed or Waiting, also for the decisions that read the status before
		// this pass ends (a later step's verdict replaces this one).
		s.obs.verdict = verdict{kind: verdictDeploying, reason: d.Reason, message: "admitted by the GPU gate: " + d.Message}
	}
	underQuota := meta.IsStatusConditionTrue(s.ws.Status.Conditions, workspacesv1.WithinQuotaCondition)
	if cpuOnly && !underQuota {
		return next, nil
	}
	if !underQuota && s.claimed == nil {
		// A first GPU admission outside any quota is not written on its own: it travels on the
		// ServiceSet this pass makes (AnnotationAdmission) and reaches the status with the pass's
		// one status write. Until then this process counts it from memory; after a restart, the
		// ServiceSet holds it, and before the ServiceSet exists nothing does, and nothing needs to.
		// Under a quota the namespace's count reads statuses, so the admission is written at once;
		// so it is when a ServiceSet exists, whose release may still run on the old admission.
		r.admissionsFor().pend(s.key(), ad)
		return next, nil
	}
	if err := r.recordAdmission(ctx, s); err != nil {
		return stop, err
	}
	return next, nil
}

// decide runs the gate's math for the workspace on the cluster s.cdKey, from the child's nodes and
// pods and the reservations of the other workspaces there; the caller holds the cluster's gate lock.
// It also returns the pods of the other workspaces. Placement (placement.go) runs it for each
// candidate cluster, so that a placement never disagrees with the admission.
func (r *Reconciler) decide(ctx context.Context, s *scope, nodes []corev1.Node, pods []corev1.Pod) (gpu.Decision, []corev1.Pod, error) {
	own := s.releaseNamespace()
	others := make([]corev1.Pod, 0, len(pods))
	for i := range pods {
		if pods[i].Namespace != own {
			others = append(others, pods[i])
		}
	}
	var held heldGPUs
	if gpus(s.resources) > 0 {
		var err error
		if held, err = r.reservations(ctx, s, pods); err != nil {
			return gpu.Decision{}, nil, err
		}
	}
	req := gpuRequest(s.key(), s.resources)
	d := gpu.Gate(req, nodes, others, append(held.admitted, held.waiting...))
	if d.Outcome == gpu.Admit && gpus(s.resources) > 0 {
		if why := unpinnedOverlap(d, nodes, held); why != "" {
			d.Outcome, d.Reason = gpu.Wait, workspacesv1.ReasonWaitingForGpuCapacity
			d.Message = why + "; " + d.Message
			d.Placement = nil
		}
	}
	return d, others, nil
}

// adoptEarlierAdmission records the admission of a workspace admitted before admissions were
// recorded (Feasible for exactly its current resources, with its ServiceSet made): it is not gated
// again, so an upgrade never takes a running workspace back to Waiting.
func (r *Reconciler) adoptEarlierAdmission(ctx context.Context, s *scope) (bool, error) {
	if s.ws.Status.Admission != nil || s.prev.ResolvedResources == nil || s.prev.Phase == workspacesv1.PhaseFailed ||
		!meta.IsStatusConditionTrue(s.prev.Conditions, workspacesv1.FeasibleCondition) ||
		!equality.Semantic.DeepEqual(s.prev.ResolvedResources, s.resources) {
		return false, nil
	}
	exists, err := r.hasServiceSet(ctx, s)
	if err != nil || !exists {
		return false, err
	}
	d := gpu.Decision{Selector: s.resources.NodeSelector}
	if f := s.prev.Feasibility; f != nil {
		d.Selector = f.Selector
	}
	s.ws.Status.Admission = newAdmission(s.cdKey.String(), s.resources, d, nil, s.now)
	return true, r.recordAdmission(ctx, s)
}

func withoutTime(ad *workspacesv1.Admission) *workspacesv1.Admission {
	c := ad.DeepCopy()
	c.AdmittedAt = nil
	return c
}

// newAdmission records a gate decision that admitted the resources.
func newAdmission(cluster string, res *workspacesv1.ResolvedResources, d gpu.Decision, nodes []corev1.Node, now time.Time) *workspacesv1.Admission {
	hostnames := make(map[string]string, len(nodes))
	for i := range nodes {
		hostnames[nodes[i].Name] = nodes[i].Labels[corev1.LabelHostname]
	}
	t := metav1.NewTime(now.UTC().Truncate(time.Second))
	ad := &workspacesv1.Admission{Cluster: cluster, Replicas: res.Replicas, AdmittedAt: &t}
	if n := gpus(res); n > 0 {
		ad.GPUResourceName = res.GPUResourceName
		ad.GPUVendor = res.PerReplica.GPUVendor
		ad.GPUsPerReplica = n
		ad.GPUs = n * int64(res.Replicas)
		ad.Selector = nonEmpty(d.Selector)
		ad.GPUModel = admittedModel(d, nodes)
		for _, p := range d.Placement {
			ad.Nodes = append(ad.Nodes, workspacesv1.AdmittedNode{Name: p.Node, Replicas: p.Replicas, Hostname: hostnames[p.Node]})
		}
	}
	return ad
}

// recordAdmission writes the workspace's status with its admission now, inside the gate's lock and
// before anything is installed or changed, and remembers it until the cache shows it.
func (r *Reconciler) recordAdmission(ctx context.Context, s *scope) error {
	s.apply()
	if err := r.writeStatus(ctx, s.ws, &s.before.Status); err != nil {
		return fmt.Errorf("recording the admission: %w", err)
	}
	r.writes.wrote(s.key(), s.ws.ResourceVersion)
	s.before.Status = *s.ws.Status.DeepCopy()
	r.admissionsFor().wrote(s.key(), s.ws.Status.Admission, s.ws.ResourceVersion, s.ws.Status.Phase)
	return nil
}

// releaseAdmission drops the workspace's admission when nothing holds its GPUs any more: no
// ServiceSet exists for it. A ServiceSet that exists keeps the admission, because its release may
// hold the GPUs.
func (r *Reconciler) releaseAdmission(ctx context.Context, s *scope) error {
	if s.ws.Status.Admission == nil {
		return nil
	}
	exists, err := r.hasServiceSet(ctx, s)
	if err != nil || exists {
		return err
	}
	s.ws.Status.Admission = nil
	return nil
}

// hasServiceSet reports whether the workspace's own ServiceSet exists.
func (r *Reconciler) hasServiceSet(ctx context.Context, s *scope) (bool, error) {
	if s.svcSet != nil {
		return true, nil
	}
	name := s.ws.Status.ServiceSetName
	if name == "" {
		name = owned.ServiceSetName(s.ws)
	}
	ss := &k0rdentv1beta1.ServiceSet{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: owned.ClusterKey(s.ws).Namespace, Name: name}, ss)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading ServiceSet %s/%s: %w", owned.ClusterKey(s.ws).Namespace, name, err)
	}
	return owned.OwnedServiceSet(ss, s.ws), nil
}

// reservations returns the GPUs held by other workspaces on the cluster that the child's pods do not
// show yet: the admissions that still hold GPUs (see holdsGPUs), each replica charged to the node it
// was counted on, less the replicas bound there; then the workspaces waiting for the same GPUs that
// are ahead of this one in the cluster's queue (higher priority, then older; priority.go) and not
// suspended.
func (r *Reconciler) reservations(ctx context.Context, s *scope, pods []corev1.Pod) (heldGPUs, error) {
	var list workspacesv1.WorkspaceDeploymentList
	// Read-only: the cached objects are not copied (the slice is, so sorting it is safe).
	if err := r.Client.List(ctx, &list, client.MatchingFields{owned.IndexCluster: s.cdKey.String()}, client.UnsafeDisableDeepCopy); err != nil {
		return heldGPUs{}, fmt.Errorf("listing workspaces of %s: %w", s.cdKey, err)
	}
	list.Items = r.withRecentAdmissions(ctx, s.cdKey.String(), list.Items)
	withSet, err := r.workspacesWithServiceSets(ctx, s.cdKey)
	if err != nil {
		return heldGPUs{}, err
	}
	unpinned := map[string]bool{}
	caps, err := r.priorityCaps(ctx)
	if err != nil {
		return heldGPUs{}, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return caps.ahead(&list.Items[i], &list.Items[j]) })
	mySel := gpu.Selector(gpuRequest("", s.resources))
	bound := boundPodsByNamespace(pods)
	var admitted, waiting []gpu.Reservation
	for i := range list.Items {
		o := &list.Items[i]
		key := o.Namespace + "/" + o.Name
		if key == s.key() {
			continue
		}
		set, hasSet := withSet[key]
		current, phase := r.admissionsFor().state(o)
		ad := owned.AdmissionOf(current, set)
		if ad != nil && ad.Cluster != s.cdKey.String() {
			ad = nil
		}
		switch {
		case holdsGPUs(o, ad, phase, hasSet):
			admitted = append(admitted, admittedReservations(key, ad, bound[owned.ReleaseNamespace(o.Name)])...)
			if !pinnedAdmission(ad) {
				unpinned[key] = true
			}
		case ad == nil && hasSet && o.Status.ResolvedResources != nil && gpus(o.Status.ResolvedResources) > 0:
			// A ServiceSet made before admissions were recorded: its resources hold the GPUs.
			res := o.Status.ResolvedResources
			replicas := res.Replicas - boundGPUPods(bound[owned.ReleaseNamespace(o.Name)], corev1.ResourceName(res.GPUResourceName), "")
			unpinned[key] = true
			if replicas > 0 {
				admitted = append(admitted, gpu.Reservation{Key: key, Vendor: res.PerReplica.GPUVendor,
					Selector: gpu.Selector(gpuRequest(key, res)), GPUsPerReplica: gpus(res), Replicas: replicas})
			}
		case waitingForGPUs(o) && o.DeletionTimestamp.IsZero() && !o.Spec.Suspend &&
			o.Status.ResolvedResources != nil && gpus(o.Status.ResolvedResources) > 0 && caps.ahead(o, s.ws):
			res := o.Status.ResolvedResources
			sel := gpu.Selector(gpuRequest(key, res))
			if res.PerReplica.GPUVendor != s.resources.PerReplica.GPUVendor || !equality.Semantic.DeepEqual(sel, mySel) {
				continue
			}
			waiting = append(waiting, gpu.Reservation{Key: key, Vendor: res.PerReplica.GPUVendor, Selector: sel,
				GPUsPerReplica: gpus(res), Replicas: res.Replicas})
		}
	}
	return heldGPUs{admitted: admitted, waiting: waiting, unpinned: unpinned}, nil
}

// heldGPUs are the GPUs other workspaces hold on a cluster: the admitted replicas not bound yet, the
// older waiters' requests, and which admitted workspaces are not pinned to one node.
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
// ends when those pods are bound (a child event). It returns why to wait, or "".
func unpinnedOverlap(d gpu.Decision, nodes []corev1.Node, held heldGPUs) string {
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
					return fmt.Sprintf("the replicas cannot be pinned to one node (they need several nodes, or the node has no %s label), and GPUs counted for workspace %s on node %s are not bound yet", corev1.LabelHostname, r.Key, n.Name)
				}
			}
			continue
		}
		if held.unpinned[r.Key] {
			if n := byName[d.Placement[0].Node]; n != nil && gpu.MatchesSelector(n, r.Selector) {
				return fmt.Sprintf("workspace %s is spread over several nodes and its replicas are not bound yet; they could still take node %s", r.Key, n.Name)
			}
		}
	}
	return ""
}

// admittedReservations charges an admission's replicas that are not bound yet to the nodes they were
// counted on; pods are the bound pods of the workspace's release namespace.
func admittedReservations(key string, ad *workspacesv1.Admission, pods []*corev1.Pod) []gpu.Reservation {
	if ad.GPUsPerReplica <= 0 {
		return nil
	}
	res := corev1.ResourceName(ad.GPUResourceName)
	unbound := ad.Replicas - boundGPUPods(pods, res, "")
	var out []gpu.Reservation
	for _, n := range ad.Nodes {
		if unbound <= 0 {
			break
		}
		left := min(max(n.Replicas-boundGPUPods(pods, res, n.Name), 0), unbound)
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

// workspacesWithServiceSets returns the ServiceSets on the cluster by workspace (namespace/name),
// from their labels, leaving out those of stopped workspaces. The ServiceSets are the cache's own
// objects: they are only read.
func (r *Reconciler) workspacesWithServiceSets(ctx context.Context, cd types.NamespacedName) (map[string]*k0rdentv1beta1.ServiceSet, error) {
	var list k0rdentv1beta1.ServiceSetList
	// Read-only: the cached ServiceSets (with their values) are not copied on every GPU decision.
	if err := r.Client.List(ctx, &list, client.InNamespace(cd.Namespace), client.UnsafeDisableDeepCopy,
		client.MatchingLabels{workspacesv1.ClusterDeploymentLabel: cd.Name}, client.HasLabels{workspacesv1.WorkspaceLabel}); err != nil {
		return nil, fmt.Errorf("listing ServiceSets of %s: %w", cd, err)
	}
	out := make(map[string]*k0rdentv1beta1.ServiceSet, len(list.Items))
	for i := range list.Items {
		l := list.Items[i].Labels
		if l[owned.LabelStopped] == "true" {
			continue // scaled to zero: its release holds no GPU (stop.go)
		}
		out[l[workspacesv1.WorkspaceNamespaceLabel]+"/"+l[workspacesv1.WorkspaceLabel]] = &list.Items[i]
	}
	return out, nil
}

// boundPodsByNamespace indexes the pods that are bound to a node and not terminal by namespace, once
// per decision: counting each workspace's bound replicas over every pod of the cluster made a
// decision O(workspaces x pods).
func boundPodsByNamespace(pods []corev1.Pod) map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != "" && !gpu.IsTerminal(p) {
			out[p.Namespace] = append(out[p.Namespace], p)
		}
	}
	return out
}

// boundGPUPods counts the pods (bound and not terminal, of one namespace: boundPodsByNamespace) that
// request the GPU resource, on one node when node is set: the replicas whose GPUs the nodes already
// show as taken.
func boundGPUPods(pods []*corev1.Pod, res corev1.ResourceName, node string) int32 {
	if res == "" {
		return 0
	}
	var n int32
	for _, p := range pods {
		if (node == "" || p.Spec.NodeName == node) && gpu.PodRequest(p, res) > 0 {
			n++
		}
	}
	return n
}

// perReplicaList is the per-replica request the feasibility report checks: cpu, memory and GPUs.
// Storage is a persistent volume, not a node resource, so it is reported but not fitted.
func perReplicaList(r *workspacesv1.ResolvedResources) corev1.ResourceList {
	out := corev1.ResourceList{}
	if r.PerReplica.CPU != nil {
		out[corev1.ResourceCPU] = *r.PerReplica.CPU
	}
	if r.PerReplica.Memory != nil {
		out[corev1.ResourceMemory] = *r.PerReplica.Memory
	}
	if n := gpus(r); n > 0 && r.GPUResourceName != "" {
		out[corev1.ResourceName(r.GPUResourceName)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return out
}

func feasibilityMessage(d gpu.Decision, fit gpu.Fit, r *workspacesv1.ResolvedResources) string {
	msg := d.Message
	if len(perReplicaList(r)) > 0 {
		msg += "; cpu/memory/GPUs now: " + fit.Message
		if d.Feasible() && !fit.Fits(r.Replicas) {
			msg += " (pods may stay Pending until cpu or memory frees up)"
		}
	}
	if r.PerReplica.Storage != nil {
		msg += fmt.Sprintf("; storage %s per replica is claimed from persistent volumes, not checked against nodes", r.PerReplica.Storage.String())
	}
	return msg
}
