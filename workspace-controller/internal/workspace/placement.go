package workspace

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// +kubebuilder:rbac:groups=infra.exalsius.ai,resources=colonies,verbs=get;list;watch

// placementRetry is how soon an unplaced workspace is looked at again without an event: the events
// that can make a cluster fit (child nodes and pods, workspaces releasing GPUs, ClusterDeployments,
// Colonies, quotas) wake it earlier.
const placementRetry = time.Minute

// placesItself reports whether the workspace names a Colony or a cluster selector, so that the
// controller picks its cluster.
func placesItself(ws *workspacesv1.WorkspaceDeployment) bool {
	return ws.Spec.ClusterDeploymentRef.Name == "" && (ws.Spec.ColonyRef != nil || ws.Spec.ClusterSelector != nil)
}

// placementMemory remembers the placements this process wrote until the cache shows them, so that a
// pass that reads an older copy of the workspace never places it a second time.
type placementMemory struct {
	mu      sync.Mutex
	written map[string]writtenPlacement
}

type writtenPlacement struct {
	placement       *workspacesv1.Placement
	resourceVersion string
}

func (m *placementMemory) wrote(key string, p *workspacesv1.Placement, resourceVersion string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.written == nil {
		m.written = map[string]writtenPlacement{}
	}
	m.written[key] = writtenPlacement{placement: p.DeepCopy(), resourceVersion: resourceVersion}
}

// current is the workspace's placement: the one this process wrote while the cached object is older
// than that write, else the object's own.
func (m *placementMemory) current(o *workspacesv1.WorkspaceDeployment) *workspacesv1.Placement {
	key := o.Namespace + "/" + o.Name
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.written[key]
	if !ok {
		return o.Status.Placement
	}
	if o.Status.Placement == nil && olderVersion(o.ResourceVersion, w.resourceVersion) {
		return w.placement.DeepCopy()
	}
	delete(m.written, key)
	return o.Status.Placement
}

func (m *placementMemory) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.written, key)
}

// lockGate takes the locks of one gate decision, in the one order every decision takes them, so that
// no two decisions deadlock: first the namespace's quota lock, when a WorkspaceQuota applies to the
// namespace (the quota is counted across clusters), then the clusters' gate locks sorted by key. The
// gate takes one cluster; placement takes every candidate, so that two workspaces never take the
// last GPUs of one cluster at once, whether they were placed or named it.
func (r *Reconciler) lockGate(ctx context.Context, namespace string, clusters ...string) func() {
	a := r.admissionsFor()
	var unlocks []func()
	if quotas, err := listQuotas(ctx, r.Client, namespace); err != nil || len(quotas) > 0 {
		// On a cache error the lock is taken: counting too carefully is safe.
		unlocks = append(unlocks, a.lock("quota:"+namespace))
	}
	keys := append([]string(nil), clusters...)
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 && keys[i-1] == k {
			continue
		}
		unlocks = append(unlocks, a.lock(k))
	}
	return func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}
}

// candidate is one cluster placement considered, with the gate's decision there.
type candidate struct {
	key   types.NamespacedName
	nodes []corev1.Node
	// decision is the gate's; unset when the cluster could not be asked.
	decision gpu.Decision
	// unreachable says why the cluster could not be asked; the cluster may fit later.
	unreachable string
}

// leftover is the matching GPUs a candidate keeps free after the workspace.
func (c *candidate) leftover(need int64) int64 { return c.decision.FreeGPUs - need }

// choosePlacement picks, among the candidates the gate admits, the tightest fit: the fewest matching
// GPUs left free after the workspace, then the first by namespace/name. It returns the index and the
// reason, or -1 when none is admitted. need is the workspace's GPUs (0 without GPUs: every admitted
// candidate ties, so the name decides).
func choosePlacement(cands []candidate, need int64) (int, string) {
	best, admitted := -1, 0
	for i := range cands {
		c := &cands[i]
		if c.unreachable != "" || c.decision.Outcome != gpu.Admit {
			continue
		}
		admitted++
		if best < 0 {
			best = i
			continue
		}
		b := &cands[best]
		if l, bl := c.leftover(need), b.leftover(need); l < bl || (l == bl && c.key.String() < b.key.String()) {
			best = i
		}
	}
	switch admitted {
	case 0:
		return -1, ""
	case 1:
		return best, workspacesv1.PlacementOnlyFit
	}
	return best, workspacesv1.PlacementTightestFit
}

// couldFitLater reports whether a candidate that does not fit now may fit once GPUs are freed or it
// can be reached: the gate says Wait, or the cluster could not be asked.
func couldFitLater(cands []candidate) bool {
	for i := range cands {
		if cands[i].unreachable != "" || cands[i].decision.Outcome == gpu.Wait {
			return true
		}
	}
	return false
}

// largestOffering names the node with the most GPUs of the vendor among the candidates, with its
// model: what the largest replica could ever get.
func largestOffering(cands []candidate, vendor workspacesv1.GPUVendor) string {
	res, ok := gpu.ResourceNameFor(vendor)
	if !ok {
		return ""
	}
	var best int64
	where := ""
	for i := range cands {
		for j := range cands[i].nodes {
			n := &cands[i].nodes[j]
			if !gpu.IsSchedulable(n) || !gpu.IsReady(n) {
				continue
			}
			if a := gpu.Allocatable(n, res); a > best {
				best = a
				model := n.Labels[gpu.LabelGPUModel]
				if model == "" {
					model = "unlabelled model"
				}
				where = fmt.Sprintf("%d %s (%s) on node %s of ClusterDeployment %s", a, res, model, n.Name, cands[i].key)
			}
		}
	}
	if where == "" {
		return fmt.Sprintf("no candidate cluster has a schedulable, Ready node with %s", res)
	}
	return "the largest offering is " + where
}

// candidatesSummary lists each candidate's verdict, for the placement's message.
func candidatesSummary(cands []candidate) string {
	parts := make([]string, 0, len(cands))
	for i := range cands {
		c := &cands[i]
		switch {
		case c.unreachable != "":
			parts = append(parts, fmt.Sprintf("%s: %s", c.key.Name, c.unreachable))
		case c.decision.Outcome == gpu.Admit:
			parts = append(parts, fmt.Sprintf("%s: fits (%d matching GPUs free)", c.key.Name, c.decision.FreeGPUs))
		default:
			parts = append(parts, fmt.Sprintf("%s: %s", c.key.Name, c.decision.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// place picks the cluster of a workspace that names a Colony or a cluster selector, once: the choice
// is recorded in status.placement with the admission of the gate on that cluster, in one write made
// under the candidates' gate locks, and never changes afterwards. A workspace that names its
// ClusterDeployment gets a placement with reason Named. See docs/placement.md.
func (r *Reconciler) place(ctx context.Context, s *scope) (stepResult, error) {
	if !placesItself(s.ws) {
		if s.ws.Status.Placement == nil || s.ws.Status.Placement.Reason != workspacesv1.PlacementNamed {
			key := owned.ClusterKey(s.ws)
			t := metav1.NewTime(s.now.UTC().Truncate(time.Second))
			s.ws.Status.Placement = &workspacesv1.Placement{Cluster: key.Name, Namespace: key.Namespace,
				Reason: workspacesv1.PlacementNamed, Message: "spec.clusterDeploymentRef", PlacedAt: &t}
			placements.WithLabelValues(workspacesv1.PlacementNamed).Inc()
		}
		return next, nil
	}
	if p := r.placed.current(s.ws); p != nil {
		s.ws.Status.Placement = p
		s.setTrue(workspacesv1.PlacedCondition, workspacesv1.ReasonPlaced, "placed on ClusterDeployment "+owned.PlacedKey(s.ws).String())
		return next, nil
	}
	keys, why, err := r.candidates(ctx, s)
	if err != nil || why != nil {
		return stopAfter(placementRetry), err
	}
	s.resources = MergeResources(s.class.Spec.DefaultResources, s.ws.Spec.Resources)
	s.ws.Status.ResolvedResources = s.resources.DeepCopy()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.String()
	}
	unlock := r.lockGate(ctx, s.ws.Namespace, names...)
	defer unlock()

	cands := make([]candidate, 0, len(keys))
	for _, k := range keys {
		c, err := r.evaluate(ctx, s, k)
		if err != nil {
			return stop, err
		}
		cands = append(cands, c)
	}
	s.cdKey = types.NamespacedName{}
	need := gpus(s.resources) * int64(s.resources.Replicas)
	i, reason := choosePlacement(cands, need)
	summary := candidatesSummary(cands)
	if i < 0 {
		if couldFitLater(cands) {
			s.blocked(workspacesv1.PhaseWaiting, workspacesv1.PlacedCondition, workspacesv1.ReasonNoClusterFitsNow,
				"no candidate cluster can hold the workspace now; waiting: "+summary)
			return stopAfter(placementRetry), nil
		}
		s.failed(workspacesv1.PlacedCondition, workspacesv1.ReasonNoClusterCanFit, fmt.Sprintf("no candidate cluster can ever hold %d replica(s) x %d GPUs (%s); %s: %s",
			s.resources.Replicas, gpus(s.resources), s.resources.PerReplica.GPUVendor, largestOffering(cands, s.resources.PerReplica.GPUVendor), summary))
		return stop, nil
	}
	c := &cands[i]
	s.cdKey = c.key
	ad := newAdmission(c.key.String(), s.resources, c.decision, c.nodes, s.now)
	if blocked, err := r.quotaBlocks(ctx, s, ad); err != nil || blocked {
		return stop, err
	}
	t := metav1.NewTime(s.now.UTC().Truncate(time.Second))
	s.ws.Status.Placement = &workspacesv1.Placement{Cluster: c.key.Name, Namespace: c.key.Namespace, Reason: reason,
		Message: summary, PlacedAt: &t}
	s.ws.Status.Admission = ad
	d := c.decision
	s.ws.Status.Feasibility = &workspacesv1.Feasibility{Feasible: true, Reason: d.Reason, Message: d.Message,
		Selector: nonEmpty(d.Selector), MatchingNodes: d.MatchingNodes, FreeGPUs: d.FreeGPUs, FittingReplicas: d.FittingReplicas}
	s.setTrue(workspacesv1.FeasibleCondition, d.Reason, d.Message)
	s.setTrue(workspacesv1.PlacedCondition, workspacesv1.ReasonPlaced, fmt.Sprintf("placed on ClusterDeployment %s (%s)", c.key, reason))
	s.obs.verdict = verdict{kind: verdictDeploying, reason: workspacesv1.ReasonPlaced,
		message: fmt.Sprintf("placed on ClusterDeployment %s (%s) and admitted by the GPU gate", c.key, reason)}
	if err := r.recordAdmission(ctx, s); err != nil {
		return stop, err
	}
	r.placed.wrote(s.key(), s.ws.Status.Placement, s.ws.ResourceVersion)
	placements.WithLabelValues(reason).Inc()
	return next, nil
}

// evaluate asks the gate about the workspace on one candidate cluster; the caller holds its lock.
func (r *Reconciler) evaluate(ctx context.Context, s *scope, key types.NamespacedName) (candidate, error) {
	c := candidate{key: key}
	nodes, pods, err := r.Children.Snapshot(ctx, key)
	if err != nil {
		c.unreachable = "cannot be reached: " + err.Error()
		return c, nil
	}
	s.cdKey = key
	d, _, err := r.decide(ctx, s, nodes, pods)
	if err != nil {
		return c, err
	}
	c.nodes, c.decision = nodes, d
	return c, nil
}

// candidates lists the ClusterDeployments a workspace may be placed on, sorted by name: those of its
// Colony (status.clusterDeploymentRefs) or those of its namespace its cluster selector matches, that
// exist, are not being deleted and have their kubeconfig Secret. When there are none, the workspace
// is blocked with the reason and why is set.
func (r *Reconciler) candidates(ctx context.Context, s *scope) ([]types.NamespacedName, *string, error) {
	ns := s.ws.Namespace
	var names []string
	var source string
	switch {
	case s.ws.Spec.ColonyRef != nil:
		source = "Colony " + s.ws.Spec.ColonyRef.Name
		colony := &infrav1.Colony{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: s.ws.Spec.ColonyRef.Name}, colony)
		if apierrors.IsNotFound(err) {
			msg := fmt.Sprintf("spec.colonyRef: Colony %s/%s not found; waiting for it", ns, s.ws.Spec.ColonyRef.Name)
			s.blocked(workspacesv1.PhasePending, workspacesv1.PlacedCondition, workspacesv1.ReasonColonyNotFound, msg)
			return nil, &msg, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading Colony %s/%s: %w", ns, s.ws.Spec.ColonyRef.Name, err)
		}
		for _, ref := range colony.Status.ClusterDeploymentRefs {
			if ref.Namespace == "" || ref.Namespace == ns {
				names = append(names, ref.Name)
			}
		}
	default:
		source = "spec.clusterSelector"
		sel, err := metav1.LabelSelectorAsSelector(s.ws.Spec.ClusterSelector)
		if err != nil {
			msg := "spec.clusterSelector: " + err.Error()
			s.failed(workspacesv1.PlacedCondition, workspacesv1.ReasonNoCandidateClusters, msg)
			return nil, &msg, nil
		}
		if sel.Empty() {
			sel = labels.Everything()
		}
		var list k0rdentv1beta1.ClusterDeploymentList
		if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, nil, fmt.Errorf("listing ClusterDeployments of %s: %w", ns, err)
		}
		for i := range list.Items {
			names = append(names, list.Items[i].Name)
		}
	}
	sort.Strings(names)
	var out []types.NamespacedName
	var skipped []string
	for i, n := range names {
		if i > 0 && names[i-1] == n {
			continue
		}
		key := types.NamespacedName{Namespace: ns, Name: n}
		why, err := r.notReady(ctx, key)
		if err != nil {
			return nil, nil, err
		}
		if why != "" {
			skipped = append(skipped, why)
			continue
		}
		out = append(out, key)
	}
	if len(out) == 0 {
		msg := source + " names no ClusterDeployment that is ready for workspaces yet"
		if len(skipped) > 0 {
			msg += ": " + strings.Join(skipped, "; ")
		}
		s.blocked(workspacesv1.PhasePending, workspacesv1.PlacedCondition, workspacesv1.ReasonNoCandidateClusters, msg)
		return nil, &msg, nil
	}
	return out, nil, nil
}

// notReady says why a ClusterDeployment cannot take workspaces now (missing, being deleted, no
// kubeconfig Secret), or "".
func (r *Reconciler) notReady(ctx context.Context, key types.NamespacedName) (string, error) {
	cd := &k0rdentv1beta1.ClusterDeployment{}
	err := r.Client.Get(ctx, key, cd)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("%s does not exist", key.Name), nil
	case err != nil:
		return "", fmt.Errorf("reading ClusterDeployment %s: %w", key, err)
	case !cd.DeletionTimestamp.IsZero():
		return fmt.Sprintf("%s is being deleted", key.Name), nil
	}
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: k0rdentv1beta1.KubeconfigSecretName(key.Name)}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("%s has no kubeconfig Secret yet", key.Name), nil
	case err != nil:
		return "", fmt.Errorf("reading kubeconfig Secret metadata of %s: %w", key, err)
	}
	return "", nil
}

// withRecentAdmissions adds to a cluster's workspaces those this process admitted there whose
// placement the cache does not show yet (the cluster index reads status.placement), so that the gate
// counts their GPUs.
func (r *Reconciler) withRecentAdmissions(ctx context.Context, cluster string, items []workspacesv1.WorkspaceDeployment) []workspacesv1.WorkspaceDeployment {
	seen := make(map[string]bool, len(items))
	for i := range items {
		seen[items[i].Namespace+"/"+items[i].Name] = true
	}
	for _, key := range r.admissionsFor().keysOn(cluster) {
		if seen[key] {
			continue
		}
		ns, name, _ := strings.Cut(key, "/")
		o := &workspacesv1.WorkspaceDeployment{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, o); err != nil {
			continue
		}
		items = append(items, *o)
	}
	return items
}

// keysOn lists the workspaces (namespace/name) whose admission on the cluster this process wrote and
// the cache may not show yet.
func (a *admissions) keysOn(cluster string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for k, w := range a.written {
		if w.admission != nil && w.admission.Cluster == cluster {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
