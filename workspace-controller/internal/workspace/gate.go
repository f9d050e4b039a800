package workspace

import (
	"context"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/common/gpu"
)

// admissions remembers, in this process, the workspaces the gate admitted, so that a second gate
// decision on the same cluster sees the first one before its status reaches the cache. Decisions on
// one cluster are serialised by a per-cluster lock; decisions on different clusters run in parallel.
type admissions struct {
	mu       sync.Mutex
	locks    map[string]*sync.Mutex
	admitted map[string]admission
}

type admission struct {
	cluster   string
	resources workspacesv1.ResolvedResources
}

func newAdmissions() *admissions {
	return &admissions{locks: map[string]*sync.Mutex{}, admitted: map[string]admission{}}
}

// lock takes the cluster's gate lock and returns its unlock.
func (a *admissions) lock(cluster string) func() {
	a.mu.Lock()
	l := a.locks[cluster]
	if l == nil {
		l = &sync.Mutex{}
		a.locks[cluster] = l
	}
	a.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (a *admissions) admit(key, cluster string, r *workspacesv1.ResolvedResources) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.admitted[key] = admission{cluster: cluster, resources: *r.DeepCopy()}
}

func (a *admissions) forget(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.admitted, key)
}

func (a *admissions) get(key string) (admission, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ad, ok := a.admitted[key]
	return ad, ok
}

// admittedPhases are the phases of a workspace that passed the gate and whose pods may not be bound
// yet.
var admittedPhases = map[workspacesv1.WorkspacePhase]bool{
	workspacesv1.PhaseInstallingPrerequisites: true,
	workspacesv1.PhaseDeploying:               true,
	workspacesv1.PhaseRunning:                 true,
}

// isAdmitted reports whether the workspace passed the gate for exactly these resources.
func isAdmitted(ws *workspacesv1.WorkspaceDeployment, r *workspacesv1.ResolvedResources) bool {
	return conditions.IsTrue(ws.Status.Conditions, workspacesv1.FeasibleCondition) &&
		ws.Status.ResolvedResources != nil && equality.Semantic.DeepEqual(ws.Status.ResolvedResources, r)
}

// gate checks the GPU request live against the child (docs/RECONCILIATION.md, step 3). A workspace
// admitted for its current resources is not checked again: its own pods now hold the GPUs.
func (r *Reconciler) gate(ctx context.Context, s *scope) (stepResult, error) {
	if isAdmitted(s.ws, s.resources) {
		return next, nil
	}
	s.ws.Status.ResolvedResources = s.resources.DeepCopy()
	cluster := s.cdKey.String()
	unlock := r.admissionsFor().lock(cluster)
	defer unlock()

	nodes, pods, err := r.Children.Snapshot(ctx, s.cdKey)
	if err != nil {
		gateDecisions.WithLabelValues("Unreachable").Inc()
		s.blocked(workspacesv1.PhasePending, workspacesv1.FeasibleCondition, workspacesv1.ReasonClusterUnreachable,
			fmt.Sprintf("cannot reach the child cluster of ClusterDeployment %s: %v", s.cdKey, err))
		return stopAfter(r.Options.UnreachableRetry), nil
	}
	own := s.releaseNamespace()
	others := make([]corev1.Pod, 0, len(pods))
	for i := range pods {
		if pods[i].Namespace != own {
			others = append(others, pods[i])
		}
	}
	reservations, err := r.reservations(ctx, s, pods)
	if err != nil {
		return stop, err
	}
	req := gpuRequest(s.key(), s.resources)
	d := gpu.Gate(req, nodes, others, reservations)
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
		r.admissionsFor().forget(s.key())
		s.failed(workspacesv1.FeasibleCondition, workspacesv1.ReasonGpuOfferingUnavailable, d.Message)
		return stop, nil
	case gpu.Wait:
		r.admissionsFor().forget(s.key())
		s.blocked(workspacesv1.PhaseWaiting, workspacesv1.FeasibleCondition, workspacesv1.ReasonWaitingForGpuCapacity, d.Message)
		return stop, nil
	}
	r.admissionsFor().admit(s.key(), cluster, s.resources)
	s.setTrue(workspacesv1.FeasibleCondition, d.Reason, f.Message)
	return next, nil
}

// reservations returns the GPUs held by other workspaces on the cluster that the child's pods do not
// show yet: admitted workspaces whose GPU pods are not all bound, then, first come first served, the
// workspaces waiting for the same GPUs that are older than this one.
func (r *Reconciler) reservations(ctx context.Context, s *scope, pods []corev1.Pod) ([]gpu.Reservation, error) {
	var list workspacesv1.WorkspaceDeploymentList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexCluster: s.cdKey.String()}); err != nil {
		return nil, fmt.Errorf("listing workspaces of %s: %w", s.cdKey, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return older(&list.Items[i], &list.Items[j]) })
	mySel := gpu.Selector(gpuRequest("", s.resources))
	var admitted, waiting []gpu.Reservation
	for i := range list.Items {
		o := &list.Items[i]
		key := o.Namespace + "/" + o.Name
		if key == s.key() || !o.DeletionTimestamp.IsZero() {
			continue
		}
		var res *workspacesv1.ResolvedResources
		isWaiting := false
		if ad, ok := r.admissionsFor().get(key); ok {
			res = &ad.resources
		} else if o.Status.ResolvedResources != nil && admittedPhases[o.Status.Phase] &&
			conditions.IsTrue(o.Status.Conditions, workspacesv1.FeasibleCondition) {
			res = o.Status.ResolvedResources
		} else if o.Status.Phase == workspacesv1.PhaseWaiting && o.Status.ResolvedResources != nil && older(o, s.ws) {
			res, isWaiting = o.Status.ResolvedResources, true
		}
		if res == nil || gpus(res) == 0 {
			continue
		}
		rv := gpuRequest(key, res)
		sel := gpu.Selector(rv)
		if isWaiting && (res.PerReplica.GPUVendor != s.resources.PerReplica.GPUVendor || !equality.Semantic.DeepEqual(sel, mySel)) {
			continue
		}
		replicas := res.Replicas
		if !isWaiting {
			replicas -= boundGPUPods(pods, ReleaseNamespace(o.Name), corev1.ResourceName(res.GPUResourceName))
		}
		if replicas <= 0 {
			continue
		}
		resv := gpu.Reservation{Key: key, Vendor: res.PerReplica.GPUVendor, Selector: sel, GPUsPerReplica: gpus(res), Replicas: replicas}
		if isWaiting {
			waiting = append(waiting, resv)
		} else {
			admitted = append(admitted, resv)
		}
	}
	return append(admitted, waiting...), nil
}

// boundGPUPods counts the non-terminal pods of a namespace that are bound to a node and request the
// GPU resource: the replicas whose GPUs the nodes already show as taken.
func boundGPUPods(pods []corev1.Pod, namespace string, res corev1.ResourceName) int32 {
	if res == "" {
		return 0
	}
	var n int32
	for i := range pods {
		p := &pods[i]
		if p.Namespace == namespace && p.Spec.NodeName != "" && !gpu.IsTerminal(p) && gpu.PodRequest(p, res) > 0 {
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
