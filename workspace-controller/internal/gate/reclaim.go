package gate

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// Reclaim by stop (docs/design/fair-sharing.md): a workspace that waits for GPUs within its
// namespace's guarantee, on a cluster where members of its cohort hold GPUs above theirs, stops those
// borrowers, after a notice, to get the GPUs back. This file chooses the borrowers.

// borrower is an admitted workspace of another cohort member that holds borrowed GPUs on the
// reclaimer's cluster: one a reclaim may stop.
type borrower struct {
	// key is the workspace's namespace/name; its admitted replicas not bound yet are the
	// reservations of that key.
	key string
	// namespace is the workspace's namespace, the cohort member its borrowing counts against.
	namespace string
	// releaseNamespace is the namespace of its pods on the child.
	releaseNamespace string
	// priority is its effective priority (its namespace's cap applied).
	priority int32
	// admittedAt is when it was admitted; the youngest is stopped first among equal priorities.
	admittedAt time.Time
	// gpus is what its admission holds: what its stop frees.
	gpus int64
}

// reclaimOrder sorts borrowers into the order a reclaim stops them: lowest priority first, then the
// youngest admission, then by key so that two passes choose alike.
func reclaimOrder(bs []borrower) {
	sort.SliceStable(bs, func(i, j int) bool {
		a, b := bs[i], bs[j]
		if a.priority != b.priority {
			return a.priority < b.priority
		}
		if !a.admittedAt.Equal(b.admittedAt) {
			return a.admittedAt.After(b.admittedAt)
		}
		return a.key < b.key
	})
}

// chooseBorrowers returns the borrowers a reclaim stops so that req fits on the cluster (nodes, the
// pods of the other workspaces, and the reservations counted against req), or nil when req fits
// already or stopping every candidate would not make it fit. Candidates are taken in reclaim order
// (reclaimOrder); a candidate is skipped once its namespace would no longer borrow (borrowing: what
// each member holds above its guarantees; a stop frees the whole of the borrower's admission, so a
// member is stopped no further than until it is within its guarantee). Once req fits, the earlier
// choices the later ones make unneeded are dropped (a borrower on a node the replicas do not need),
// last chosen first: the fewest stops, in the order the rules prefer.
func chooseBorrowers(req gpu.Request, nodes []corev1.Node, pods []corev1.Pod, reservations []gpu.Reservation,
	candidates []borrower, borrowing map[string]int64) []borrower {
	if gpu.Gate(req, nodes, pods, reservations).Outcome != gpu.Wait {
		return nil
	}
	order := append([]borrower(nil), candidates...)
	reclaimOrder(order)
	left := make(map[string]int64, len(borrowing))
	for ns, n := range borrowing {
		left[ns] = n
	}
	var chosen []borrower
	fits := false
	for _, b := range order {
		if left[b.namespace] <= 0 {
			continue
		}
		left[b.namespace] -= b.gpus
		chosen = append(chosen, b)
		if fitsWithout(req, nodes, pods, reservations, chosen) {
			fits = true
			break
		}
	}
	if !fits {
		return nil
	}
	for i := len(chosen) - 2; i >= 0; i-- {
		without := append(append([]borrower(nil), chosen[:i]...), chosen[i+1:]...)
		if fitsWithout(req, nodes, pods, reservations, without) {
			chosen = without
		}
	}
	return chosen
}

// fitsWithout reports whether req fits once the stopped borrowers' pods and reservations are gone.
func fitsWithout(req gpu.Request, nodes []corev1.Node, pods []corev1.Pod, reservations []gpu.Reservation, stopped []borrower) bool {
	gone := make(map[string]bool, len(stopped))
	goneNS := make(map[string]bool, len(stopped))
	for _, b := range stopped {
		gone[b.key] = true
		goneNS[b.releaseNamespace] = true
	}
	keptPods := make([]corev1.Pod, 0, len(pods))
	for i := range pods {
		if !goneNS[pods[i].Namespace] {
			keptPods = append(keptPods, pods[i])
		}
	}
	keptRes := make([]gpu.Reservation, 0, len(reservations))
	for _, r := range reservations {
		if !gone[r.Key] {
			keptRes = append(keptRes, r)
		}
	}
	return gpu.Gate(req, nodes, keptPods, keptRes).Outcome == gpu.Admit
}

// Reclaims returns the reclaim a workspace's status records while it waits in its cluster's queue
// (status.reclaiming), nil otherwise: the borrowers it names are stopped for it.
func Reclaims(ws *workspacesv1.WorkspaceDeployment) *workspacesv1.Reclaiming {
	if rc := ws.Status.Reclaiming; rc != nil && ws.DeletionTimestamp.IsZero() && !ws.Spec.Suspend && Queued(&ws.Status) {
		return rc
	}
	return nil
}

// reclaimingOn is a workspace's reclaim on a site: its status.reclaiming while it waits, on the site's
// ClusterDeployment or on another one that reaches the same child, for GPUs its borrowers are to give
// back; nil otherwise. The hold is the child's GPUs, so it counts against the decisions of every
// ClusterDeployment of the child.
func reclaimingOn(ws *workspacesv1.WorkspaceDeployment, st site) *workspacesv1.Reclaiming {
	rc := ws.Status.Reclaiming
	if rc == nil || !Queued(&ws.Status) {
		return nil
	}
	for _, cd := range st.clusters() {
		if rc.Cluster == cd.String() {
			return rc
		}
	}
	return nil
}

// aheadOn reports whether a comes before b in the GPU queue of a site: a workspace reclaiming its
// guarantee there comes first (the earlier reclaim first), then priority and age (priorityCaps.ahead).
func (c priorityCaps) aheadOn(a, b *workspacesv1.WorkspaceDeployment, st site) bool {
	ra, rb := reclaimingOn(a, st), reclaimingOn(b, st)
	switch {
	case ra != nil && rb == nil:
		return true
	case ra == nil && rb != nil:
		return false
	case ra != nil && !ra.Since.Equal(&rb.Since):
		return ra.Since.Before(&rb.Since)
	}
	return c.ahead(a, b)
}

// sortOn sorts workspaces into the GPU queue of a site, as aheadOn orders them. Each workspace's
// reclaim and effective priority are read once rather than at each of the sort's comparisons: a
// decision sorts every workspace on its child, and at a thousand the comparisons were a fifth of the
// decision's CPU (make bench, class gpu).
func (c priorityCaps) sortOn(list []*workspacesv1.WorkspaceDeployment, st site) {
	type queued struct {
		o        *workspacesv1.WorkspaceDeployment
		reclaim  *workspacesv1.Reclaiming
		priority int32
	}
	q := make([]queued, len(list))
	for i, o := range list {
		q[i] = queued{o: o, reclaim: reclaimingOn(o, st), priority: c.effective(o)}
	}
	// slices.SortFunc rather than sort.Slice: no reflection in the swaps.
	slices.SortFunc(q, func(a, b queued) int {
		switch {
		case a.reclaim != nil && b.reclaim == nil:
			return -1
		case a.reclaim == nil && b.reclaim != nil:
			return 1
		case a.reclaim != nil && !a.reclaim.Since.Equal(&b.reclaim.Since):
			return a.reclaim.Since.Compare(b.reclaim.Since.Time)
		case a.priority != b.priority:
			return cmp.Compare(b.priority, a.priority)
		case owned.Older(a.o, b.o):
			return -1
		case owned.Older(b.o, a.o):
			return 1
		}
		return 0
	})
	for i := range q {
		list[i] = q[i].o
	}
}

// reclaim decides whether a workspace the gate told to wait on st reclaims GPUs its cohort borrows
// there: its request is within its namespace's guarantees (the quota check admits it without
// borrowing), and stopping borrowers of the other members (chooseBorrowers: admissions on the cluster
// with borrowed GPUs, not spec.preemptionPolicy Never, not stopped or being deleted) makes it fit on
// the cluster, counting what stays: the admitted reservations and the holds of earlier reclaims. It
// returns the reclaim to record in the workspace's status, with the borrowers named before keeping
// their time (a reclaim decided again never moves a borrower's stop), and the words of the decision;
// nil when it does not reclaim. The caller holds the cluster's lock and the cohort's.
func (g *Gate) reclaim(ctx context.Context, req Request, st site, cohort string, gd gpu.Decision,
	nodes []corev1.Node, others []corev1.Pod) (*workspacesv1.Reclaiming, string, error) {
	ws := req.Workspace
	if cohort == "" || !ws.DeletionTimestamp.IsZero() || ws.Spec.Suspend || GPUs(req.Resources) == 0 {
		return nil, "", nil
	}
	ad := newAdmission(req.Cluster.String(), req.Resources, gd, nil, req.Now)
	q, err := g.quotaCheck(ctx, ws, ad, cohort)
	if err != nil || !q.Applies || !q.Within || q.Borrowed > 0 {
		return nil, "", err
	}
	members, err := cohortMembers(ctx, g.cache(), cohort, ws.Namespace, g.mem.state)
	if err != nil {
		return nil, "", err
	}
	borrowing := map[string]int64{}
	for i := range members {
		m := &members[i]
		e, ok := m.entry(ad.GPUVendor, ad.GPUModel)
		if !ok {
			e, ok = m.entry(ad.GPUVendor, "")
		}
		if ok {
			borrowing[m.namespace] = max(0, m.used(e)-e.GuaranteedGPUs())
		}
	}
	list, err := g.workspacesOn(ctx, st)
	if err != nil {
		return nil, "", err
	}
	withSet, err := g.serviceSetsByWorkspace(ctx, list)
	if err != nil {
		return nil, "", err
	}
	caps, err := g.priorityCaps(ctx)
	if err != nil {
		return nil, "", err
	}
	self, cluster := req.key(), req.Cluster.String()
	var cands []borrower
	byKey := map[string]*workspacesv1.WorkspaceDeployment{}
	var resv []gpu.Reservation
	bound := boundPodsByNamespace(others, nodes)
	for _, o := range list {
		key := o.Namespace + "/" + o.Name
		if key == self {
			continue
		}
		// Its admission as the reservations count it: remembered or in its status, else carried by
		// its ServiceSet (a pass that made the ServiceSet ended before its status write).
		cur, _ := g.mem.state(o)
		cur = owned.AdmissionOf(cur, withSet[types.NamespacedName{Namespace: o.Namespace, Name: o.Name}])
		if cur != nil && st.counts(cur) && cur.GPUsPerReplica > 0 {
			// What stays whatever is stopped, unless it is a borrower chosen: every admission's
			// replicas not bound yet.
			resv = append(resv, admittedReservations(key, cur, bound[owned.ReleaseNamespace(o)])...)
		}
		if rc := reclaimingOn(o, st); rc != nil && caps.aheadOn(o, ws, st) && o.Status.ResolvedResources != nil {
			res := o.Status.ResolvedResources
			resv = append(resv, gpu.Reservation{Key: key, Vendor: res.PerReplica.GPUVendor,
				Selector: gpu.Selector(gpuRequest(key, res)), GPUsPerReplica: GPUs(res), Replicas: res.Replicas})
		}
		// A borrower being stopped (by this reclaim, or by its user) still holds its admission until
		// its pods are gone: it stays a candidate, so that deciding again while it stops keeps the
		// same choice and the hold (a borrower that gave its GPUs back has no admission).
		if borrowing[o.Namespace] <= 0 || cur == nil || cur.BorrowedGPUs <= 0 || !st.counts(cur) || cur.GPUVendor != ad.GPUVendor ||
			o.Spec.PreemptionPolicy == workspacesv1.PreemptionNever || !o.DeletionTimestamp.IsZero() {
			continue
		}
		at := time.Time{}
		if cur.AdmittedAt != nil {
			at = cur.AdmittedAt.Time
		}
		byKey[key] = o
		cands = append(cands, borrower{key: key, namespace: o.Namespace, releaseNamespace: owned.ReleaseNamespace(o),
			priority: caps.effective(o), admittedAt: at, gpus: cur.GPUs})
	}
	chosen := chooseBorrowers(gpuRequest(self, req.Resources), nodes, others, resv, cands, borrowing)
	if chosen == nil {
		return nil, noReclaim(cohort, borrowing, cands), nil
	}
	quotas, err := listQuotas(ctx, g.client, ws.Namespace)
	if err != nil {
		return nil, "", err
	}
	now := metav1.NewTime(req.Now.UTC().Truncate(time.Second))
	out := &workspacesv1.Reclaiming{Cluster: cluster, Since: now}
	named := map[types.UID]metav1.Time{}
	if prev := ws.Status.Reclaiming; prev != nil && prev.Cluster == cluster {
		out.Since = prev.Since
		for _, b := range prev.Borrowers {
			named[b.UID] = b.At
		}
	}
	grace := workspacesv1.ReclaimGracePeriodOf(quotas)
	var names []string
	for _, b := range chosen {
		o := byKey[b.key]
		at, ok := named[o.UID]
		if !ok {
			at = metav1.NewTime(now.Add(grace))
		}
		out.Borrowers = append(out.Borrowers, workspacesv1.ReclaimedWorkspace{Namespace: o.Namespace, Name: o.Name, UID: o.UID, GPUs: b.gpus, At: at})
		names = append(names, fmt.Sprintf("%s (%d GPUs, at %s)", b.key, b.gpus, at.UTC().Format(time.RFC3339)))
	}
	msg := fmt.Sprintf("the workspace is within its namespace's guarantee and the GPUs it needs are lent to cohort %s: stopping %s; the GPUs they free are held for it",
		cohort, strings.Join(names, ", "))
	return out, msg, nil
}

// noReclaim says why a workspace within its namespace's guarantee, waiting on its cluster, stops no
// borrower there although members of its cohort borrow (borrowing: what each holds above its
// guarantees; cands: the admissions on the cluster a reclaim could stop); "" when nobody borrows. It
// names no count, so that the cohort's other admissions do not rewrite the waiter's status.
func noReclaim(cohort string, borrowing map[string]int64, cands []borrower) string {
	var lent int64
	for _, n := range borrowing {
		lent += n
	}
	switch {
	case lent <= 0:
		return ""
	case len(cands) == 0:
		return fmt.Sprintf("the workspace is within its namespace's guarantee, but no admission on this cluster borrows from cohort %s (admissions within their own guarantee are never stopped): it waits here as any other, and would reclaim on a cluster where the cohort borrows",
			cohort)
	}
	return fmt.Sprintf("the workspace is within its namespace's guarantee, but stopping every admission on this cluster that borrows from cohort %s would not make room for it: it waits here as any other",
		cohort)
}
