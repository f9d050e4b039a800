package gate

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// A cohort is the namespaces that carry the same workspacesv1.CohortLabel: each lends the others the
// GPUs its WorkspaceQuotas guarantee and its workspaces do not use. Every number a cohort decision
// reads is counted from the members' admissions, under the cohort's one lock (lockKey), so two
// namespaces never borrow the same unused guarantee.

// cohortOf is the cohort of a namespace, "" when it is in none (or is gone).
func cohortOf(ctx context.Context, c client.Reader, namespace string) (string, error) {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	return ns.Labels[workspacesv1.CohortLabel], nil
}

// quotaLockKey is the lock a namespace's quota decisions take: its cohort's when it is in one (the
// members count one another's use), else its own.
func quotaLockKey(cohort, namespace string) string {
	if cohort != "" {
		return "cohort:" + cohort
	}
	return "quota:" + namespace
}

// cohortMember is one namespace of a cohort: its WorkspaceQuotas, what its workspaces hold, and its
// workspaces waiting for its quota.
type cohortMember struct {
	namespace string
	quotas    []workspacesv1.WorkspaceQuota
	held      []quotaCharge
	waiting   []workspacesv1.WorkspaceDeployment
}

// entry is the member's GPU quota entry of a vendor and model (model "" is the vendor-wide entry):
// of several quotas' entries, the one with the lowest guarantee.
func (m *cohortMember) entry(vendor workspacesv1.GPUVendor, model string) (workspacesv1.GPUQuota, bool) {
	var out workspacesv1.GPUQuota
	found := false
	for i := range m.quotas {
		for _, e := range m.quotas[i].Spec.GPUs {
			if e.Vendor == vendor && e.Model == model && (!found || e.GuaranteedGPUs() < out.GuaranteedGPUs()) {
				out, found = e, true
			}
		}
	}
	return out, found
}

// used is what the member's workspaces hold of an entry.
func (m *cohortMember) used(e workspacesv1.GPUQuota) int64 {
	var n int64
	for _, c := range m.held {
		n += counted(e, c)
	}
	return n
}

// balance is one entry's standing in the cohort: of the members' guarantees, what their own
// workspaces leave unused (lendable), and what the members hold above their guarantees (borrowed).
type balance struct {
	lendable, borrowed int64
}

// cohortBalance sums, over members, the entries of a vendor and model.
func cohortBalance(members []cohortMember, vendor workspacesv1.GPUVendor, model string) balance {
	var b balance
	for i := range members {
		e, ok := members[i].entry(vendor, model)
		if !ok {
			continue
		}
		g, u := e.GuaranteedGPUs(), members[i].used(e)
		b.lendable = satAdd(b.lendable, max(0, g-u))
		b.borrowed = satAdd(b.borrowed, max(0, u-g))
	}
	return b
}

// admissionState returns a workspace's admission and the phase that goes with it: the gate's memory
// (Gate.mem.state) or, for a status writer, the workspace's status.
type admissionState func(*workspacesv1.WorkspaceDeployment) (*workspacesv1.Admission, workspacesv1.WorkspacePhase)

// statusState reads a workspace's admission from its status.
func statusState(o *workspacesv1.WorkspaceDeployment) (*workspacesv1.Admission, workspacesv1.WorkspacePhase) {
	return o.Status.Admission, o.Status.Phase
}

// cohortNamespaces lists the namespaces of a cohort, by name.
func cohortNamespaces(ctx context.Context, c client.Reader, cohort string) ([]string, error) {
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss, client.MatchingLabels{workspacesv1.CohortLabel: cohort}); err != nil {
		return nil, fmt.Errorf("listing the namespaces of cohort %s: %w", cohort, err)
	}
	out := make([]string, 0, len(nss.Items))
	for i := range nss.Items {
		out = append(out, nss.Items[i].Name)
	}
	sort.Strings(out)
	return out, nil
}

// cohortMembers lists the namespaces of a cohort other than self that have WorkspaceQuotas, with what
// their workspaces hold (as namespaceUse counts it, through state).
func cohortMembers(ctx context.Context, rd cached, cohort, self string, state admissionState) ([]cohortMember, error) {
	names, err := cohortNamespaces(ctx, rd.client, cohort)
	if err != nil {
		return nil, err
	}
	var out []cohortMember
	for _, ns := range names {
		if ns == self {
			continue
		}
		quotas, err := listQuotas(ctx, rd.client, ns)
		if err != nil {
			return nil, err
		}
		if len(quotas) == 0 {
			continue
		}
		held, waiting, err := namespaceUse(ctx, rd, ns, "", state)
		if err != nil {
			return nil, err
		}
		out = append(out, cohortMember{namespace: ns, quotas: quotas, held: held, waiting: waiting})
	}
	return out, nil
}

// chargeWaitersAhead charges to their members, as if admitted, the quota waiters ahead of ws that
// their quotas (and, in a cohort, what the cohort leaves unused) admit now, in the order of one queue
// over all members: higher effective priority first (each namespace's cap applies), then older. So
// freed quota, and in a cohort freed guarantees, go to the next in line whichever member it is in: a
// younger borrower never takes the GPUs an older one of another member waits for. members[0] is ws's
// namespace; the others are the cohort's other members (none outside a cohort).
func chargeWaitersAhead(members []cohortMember, cohort string, ws *workspacesv1.WorkspaceDeployment) {
	var quotas []workspacesv1.WorkspaceQuota
	type waiter struct {
		member int
		ws     *workspacesv1.WorkspaceDeployment
	}
	var queue []waiter
	for i := range members {
		quotas = append(quotas, members[i].quotas...)
		for j := range members[i].waiting {
			queue = append(queue, waiter{member: i, ws: &members[i].waiting[j]})
		}
	}
	caps := capsOf(quotas)
	sort.SliceStable(queue, func(i, j int) bool { return caps.ahead(queue[i].ws, queue[j].ws) })
	others := make([]cohortMember, 0, len(members))
	for _, w := range queue {
		if !caps.ahead(w.ws, ws) {
			break
		}
		c, ok := waiterCharge(w.ws)
		if !ok {
			continue
		}
		others = others[:0]
		for k := range members {
			if k != w.member {
				others = append(others, members[k])
			}
		}
		m := &members[w.member]
		if why, _, _ := quotaViolation(quotaScope{quotas: m.quotas, cohort: cohort, others: others}, m.held, c, w.ws.Spec.PreemptionPolicy); why == "" {
			m.held = append(m.held, c)
		}
	}
}

// cohortUse fills the guaranteed, borrowed and lent GPUs of a quota's entries (use, as quotaUse
// counted it): borrowed is what the namespace holds above an entry's guarantee; lent is the
// namespace's share (lentShares) of what the cohort's members borrow of the entry's vendor and model.
func cohortUse(q *workspacesv1.WorkspaceQuota, use []workspacesv1.GPUUsage, cohort string, others []cohortMember) {
	for j, e := range q.Spec.GPUs {
		g := e.GuaranteedGPUs()
		u := &use[j]
		u.Guaranteed, u.Borrowed = g, max(0, u.Used-g)
		if cohort == "" {
			continue
		}
		unused := []int64{max(0, g-u.Used)}
		borrowed := u.Borrowed
		for i := range others {
			oe, ok := others[i].entry(e.Vendor, e.Model)
			if !ok {
				continue
			}
			og, ou := oe.GuaranteedGPUs(), others[i].used(oe)
			unused = append(unused, max(0, og-ou))
			borrowed = satAdd(borrowed, max(0, ou-og))
		}
		u.Lent = lentShares(unused, borrowed)[0]
	}
}

// lentShares shares the GPUs a cohort borrows among its lenders, in proportion to what each leaves
// unused (largest remainder first, then the earlier lender): what each lender has lent. No lender
// lends more than it leaves unused, and the shares sum to min(borrowed, sum of unused).
func lentShares(unused []int64, borrowed int64) []int64 {
	out := make([]int64, len(unused))
	var total int64
	for _, u := range unused {
		total = satAdd(total, max(0, u))
	}
	if total == 0 || borrowed <= 0 {
		return out
	}
	borrowed = min(borrowed, total)
	type rem struct {
		i int
		r int64
	}
	rems := make([]rem, 0, len(unused))
	var given int64
	for i, u := range unused {
		if u <= 0 {
			continue
		}
		// borrowed*u in 128 bits; borrowed <= total keeps the quotient below total.
		hi, lo := bits.Mul64(uint64(borrowed), uint64(u))
		q, r := bits.Div64(hi, lo, uint64(total))
		out[i] = min(int64(q), borrowed-given) // only a saturated total could make it more
		given += out[i]
		rems = append(rems, rem{i, int64(r)})
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for k := 0; given < borrowed && k < len(rems); k++ {
		out[rems[k].i]++
		given++
	}
	return out
}

// satAdd adds two non-negative numbers, stopping at the largest int64: quotas are written by people,
// and no sum of them may wrap round.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// CohortPeers lists the other namespaces of a namespace's cohort, none when it is in none (or its
// cohort cannot be read): what one member holds changes what the others may borrow, so a release in
// one brings back the quota waiters of the others.
func CohortPeers(ctx context.Context, c client.Reader, namespace string) []string {
	cohort, err := cohortOf(ctx, c, namespace)
	if err != nil {
		return nil
	}
	return CohortMembersBut(ctx, c, cohort, namespace)
}

// CohortMembersBut lists the namespaces of a cohort other than namespace, none for no cohort ("") or
// when they cannot be listed.
func CohortMembersBut(ctx context.Context, c client.Reader, cohort, namespace string) []string {
	if cohort == "" {
		return nil
	}
	names, err := cohortNamespaces(ctx, c, cohort)
	if err != nil {
		return nil
	}
	out := names[:0]
	for _, n := range names {
		if n != namespace {
			out = append(out, n)
		}
	}
	return out
}
