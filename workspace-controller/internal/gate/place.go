package gate

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/metrics"
)

// PlacesItself reports whether the workspace names a Colony or a cluster selector, so that the
// controller picks its cluster.
func PlacesItself(ws *workspacesv1.WorkspaceDeployment) bool {
	return ws.Spec.ClusterDeploymentRef.Name == "" && (ws.Spec.ColonyRef != nil || ws.Spec.ClusterSelector != nil)
}

// Unplaced reports whether a workspace waits to be placed: it names a Colony or a cluster selector,
// has no placement and is not being deleted.
func Unplaced(ws *workspacesv1.WorkspaceDeployment) bool {
	return PlacesItself(ws) && ws.Status.Placement == nil && ws.DeletionTimestamp.IsZero()
}

// Placement is the workspace's placement: the one this process wrote while the cached object is
// older than that write, else the object's own.
func (g *Gate) Placement(ws *workspacesv1.WorkspaceDeployment) *workspacesv1.Placement {
	return g.mem.placement(ws)
}

// Place picks the cluster of a workspace that names a Colony or a cluster selector, among
// req.Candidates: the gate decides on each under all their locks, the tightest fit that the
// namespace's quotas allow is chosen, and the placement is written through req.Record with its
// admission before the locks are released. A placement never changes afterwards.
func (g *Gate) Place(ctx context.Context, req Request) (Decision, error) {
	sites := make([]site, len(req.Candidates))
	var keys []string
	for i, k := range req.Candidates {
		sites[i] = g.site(ctx, k)
		keys = append(keys, sites[i].lockKeys()...)
	}
	unlock, cohort := g.lock(ctx, req.Workspace.Namespace, keys...)
	defer unlock()

	cands := make([]candidate, 0, len(req.Candidates))
	for _, st := range sites {
		c, err := g.evaluate(ctx, req, st)
		if err != nil {
			return Decision{}, err
		}
		cands = append(cands, c)
	}
	res := req.Resources
	need := GPUs(res) * int64(res.Replicas)
	i, reason := choosePlacement(cands, need)
	summary := candidatesSummary(cands)
	if i < 0 {
		if couldFitLater(cands) {
			return Decision{Outcome: NoFitNow, Reason: workspacesv1.ReasonNoClusterFitsNow,
				Message: "no candidate cluster can hold the workspace now; waiting: " + summary}, nil
		}
		return Decision{Outcome: NoFitEver, Reason: workspacesv1.ReasonNoClusterCanFit,
			Message: fmt.Sprintf("no candidate cluster can ever hold %d replica(s) x %d GPUs (%s); %s: %s",
				res.Replicas, GPUs(res), res.PerReplica.GPUVendor, largestOffering(cands, res.PerReplica.GPUVendor), summary)}, nil
	}
	c := &cands[i]
	ad := newAdmission(c.key.String(), res, c.decision, c.nodes, req.Now)
	ad.ClusterIdentity = c.identity
	q, err := g.checkQuota(ctx, req.Workspace, ad, cohort)
	if err != nil {
		return Decision{}, err
	}
	gd := c.decision
	d := Decision{Cluster: c.key, Quota: &q, Reason: reason}
	if q.Applies && !q.Within {
		d.Outcome = OverQuota
		return d, nil
	}
	t := metav1.NewTime(req.Now.UTC().Truncate(time.Second))
	d.Outcome = Admitted
	d.Message = fmt.Sprintf("placed on ClusterDeployment %s (%s)", c.key, reason)
	d.Placement = &workspacesv1.Placement{Cluster: c.key.Name, Namespace: c.key.Namespace, Reason: reason, Message: summary, PlacedAt: &t}
	d.Admission = ad
	d.Feasibility = &workspacesv1.Feasibility{Feasible: true, Reason: gd.Reason, Message: gd.Message,
		Selector: nonEmpty(gd.Selector), MatchingNodes: gd.MatchingNodes, FreeGPUs: gd.FreeGPUs, FittingReplicas: gd.FittingReplicas}
	d, ws, err := g.record(ctx, req, d)
	if err != nil {
		return Decision{}, err
	}
	g.mem.wrotePlacement(req.key(), d.Placement, ws.ResourceVersion)
	metrics.Placements.WithLabelValues(reason).Inc()
	return d, nil
}

// evaluate asks the gate about the workspace on one candidate cluster; the caller holds its lock.
func (g *Gate) evaluate(ctx context.Context, req Request, st site) (candidate, error) {
	c := candidate{key: st.cd, identity: st.id}
	nodes, pods, err := g.children.Snapshot(ctx, st.cd)
	if err != nil {
		c.unreachable = "cannot be reached: " + err.Error()
		return c, nil
	}
	d, _, err := g.decide(ctx, req.Workspace, req.Resources, st, nodes, pods, req.Now)
	if err != nil {
		return c, err
	}
	c.nodes, c.decision = nodes, d
	return c, nil
}

// candidate is one cluster placement considered, with the gate's decision there.
type candidate struct {
	key types.NamespacedName
	// identity is the identity of its child cluster, when known.
	identity types.UID
	nodes    []corev1.Node
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
