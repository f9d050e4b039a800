package gate

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/exalsius/exalsius-operator/common/gpu"
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
