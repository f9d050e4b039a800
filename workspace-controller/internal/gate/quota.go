package gate

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/status"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/component"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/metrics"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// +kubebuilder:rbac:groups=workspaces.exalsius.ai,resources=workspacequotas,verbs=get;list;watch
// +kubebuilder:rbac:groups=workspaces.exalsius.ai,resources=workspacequotas/status,verbs=patch

// quotaCharge is what one workspace holds, or asks for, against a namespace's quotas: one workspace
// and its GPUs of a vendor, by model.
type quotaCharge struct {
	key    string
	vendor workspacesv1.GPUVendor
	models []modelGPUs
}

// modelGPUs is a number of GPUs of one model ("" when the nodes do not say).
type modelGPUs struct {
	model string
	gpus  int64
}

// chargeOf is what an admission holds: the GPUs on each admitted node, by the node's model (an
// admission spread over nodes of two models holds GPUs of both). A node without a recorded model
// (an admission recorded before nodes carried theirs) counts the admission's model.
func chargeOf(key string, ad *workspacesv1.Admission) quotaCharge {
	c := quotaCharge{key: key, vendor: ad.GPUVendor}
	if len(ad.Nodes) == 0 || ad.GPUsPerReplica <= 0 {
		if ad.GPUs > 0 {
			c.models = []modelGPUs{{model: ad.GPUModel, gpus: ad.GPUs}}
		}
		return c
	}
	for _, n := range ad.Nodes {
		m := n.GPUModel
		if m == "" {
			m = ad.GPUModel
		}
		c.add(m, ad.GPUsPerReplica*int64(n.Replicas))
	}
	return c
}

// add charges gpus of model.
func (c *quotaCharge) add(model string, gpus int64) {
	if gpus <= 0 {
		return
	}
	for i := range c.models {
		if c.models[i].model == model {
			c.models[i].gpus += gpus
			return
		}
	}
	c.models = append(c.models, modelGPUs{model: model, gpus: gpus})
}

// counted is the GPUs of a charge a GPU quota entry counts: of its vendor, and of its model when the
// entry names one.
func counted(e workspacesv1.GPUQuota, c quotaCharge) int64 {
	if c.vendor != e.Vendor {
		return 0
	}
	var n int64
	for _, m := range c.models {
		if e.Model == "" || e.Model == m.model {
			n += m.gpus
		}
	}
	return n
}

// quotaUse sums the charges for each entry of a quota.
func quotaUse(q *workspacesv1.WorkspaceQuota, held []quotaCharge) ([]workspacesv1.GPUUsage, int32) {
	out := make([]workspacesv1.GPUUsage, 0, len(q.Spec.GPUs))
	for _, e := range q.Spec.GPUs {
		u := workspacesv1.GPUUsage{Vendor: e.Vendor, Model: e.Model, Limit: e.Limit, Guaranteed: e.GuaranteedGPUs()}
		for _, c := range held {
			u.Used += counted(e, c)
		}
		out = append(out, u)
	}
	return out, int32(len(held))
}

// quotaScope is what a namespace's quota decision counts against: its WorkspaceQuotas and, when the
// namespace is in a cohort, the cohort's other members.
type quotaScope struct {
	quotas []workspacesv1.WorkspaceQuota
	cohort string
	others []cohortMember
}

// quotaViolation says which quota the request would take the namespace over, with the limit and what
// is used, or "" when every quota leaves room; and how many of the requested GPUs are borrowed (above
// an entry's guarantee, from the unused guarantees of the cohort's other members) and above which
// guarantee. held are the charges of the namespace's admitted workspaces (and of the quota waiters
// ahead of the request); a request with preemption policy Never is never admitted above a guarantee.
func quotaViolation(sc quotaScope, held []quotaCharge, req quotaCharge, policy workspacesv1.PreemptionPolicy) (why string, borrowed int64, above string) {
	for i := range sc.quotas {
		q := &sc.quotas[i]
		use, n := quotaUse(q, held)
		if w := q.Spec.Workspaces; w != nil && n+1 > *w {
			return fmt.Sprintf("WorkspaceQuota %s: %d of %d workspaces are used; one more would exceed spec.workspaces", q.Name, n, *w), 0, ""
		}
		for j, e := range q.Spec.GPUs {
			n := counted(e, req)
			if n <= 0 {
				continue
			}
			used := use[j].Used
			what := string(e.Vendor)
			if e.Model != "" {
				what += " " + e.Model
			}
			if used+n > e.Limit {
				return fmt.Sprintf("WorkspaceQuota %s: %d of %d %s GPUs are used and the workspace asks for %d (spec.gpus[%d])",
					q.Name, used, e.Limit, what, n, j), 0, ""
			}
			g := e.GuaranteedGPUs()
			if used+n <= g {
				continue
			}
			// Above the guarantee: the request borrows what the namespace does not borrow already.
			borrow := min(n, used+n-g)
			head := fmt.Sprintf("WorkspaceQuota %s: %d of %d guaranteed %s GPUs are used and the workspace asks for %d (spec.gpus[%d].guaranteed)",
				q.Name, used, g, what, n, j)
			switch {
			case policy == workspacesv1.PreemptionNever:
				return head + "; with spec.preemptionPolicy Never it does not borrow", 0, ""
			case used+n > e.Ceiling():
				return fmt.Sprintf("%s; the namespace may borrow at most %d above it (spec.gpus[%d].borrowingLimit)", head, e.Ceiling()-g, j), 0, ""
			case sc.cohort == "":
				return fmt.Sprintf("%s; the namespace is in no cohort to borrow from (label %s on the namespace)", head, workspacesv1.CohortLabel), 0, ""
			}
			b := cohortBalance(sc.others, e.Vendor, e.Model)
			if satAdd(satAdd(b.borrowed, max(0, used-g)), borrow) > b.lendable {
				return fmt.Sprintf("%s; cohort %s leaves %d guaranteed %s GPUs unused and %d of them are borrowed already",
					head, sc.cohort, b.lendable, what, satAdd(b.borrowed, max(0, used-g))), 0, ""
			}
			if borrow > borrowed {
				borrowed = borrow
				above = fmt.Sprintf("WorkspaceQuota %s guarantees %d %s GPUs (spec.gpus[%d].guaranteed) and %d are used", q.Name, g, what, j, used)
			}
		}
	}
	return "", borrowed, above
}

// quotaSummary is a quota's use in one line.
func quotaSummary(q *workspacesv1.WorkspaceQuota, use []workspacesv1.GPUUsage, n int32) string {
	parts := make([]string, 0, len(use)+1)
	for _, u := range use {
		what := string(u.Vendor)
		if u.Model != "" {
			what += " " + u.Model
		}
		part := fmt.Sprintf("%s %d/%d", what, u.Used, u.Limit)
		var extra []string
		if u.Guaranteed < u.Limit {
			extra = append(extra, fmt.Sprintf("guaranteed %d", u.Guaranteed))
		}
		if u.Borrowed > 0 {
			extra = append(extra, fmt.Sprintf("borrowed %d", u.Borrowed))
		}
		if u.Lent > 0 {
			extra = append(extra, fmt.Sprintf("lent %d", u.Lent))
		}
		if len(extra) > 0 {
			part += " (" + strings.Join(extra, ", ") + ")"
		}
		parts = append(parts, part)
	}
	if w := q.Spec.Workspaces; w != nil {
		parts = append(parts, fmt.Sprintf("workspaces %d/%d", n, *w))
	} else {
		parts = append(parts, fmt.Sprintf("workspaces %d", n))
	}
	return strings.Join(parts, ", ")
}

// namespaceUse lists what the other workspaces of a namespace hold (admissions that still hold
// GPUs, see holdsGPUs) and the workspaces waiting for the namespace's quota. state returns a
// workspace's admission and the phase that goes with it.
func namespaceUse(ctx context.Context, rd cached, namespace, self string, state admissionState) ([]quotaCharge, []workspacesv1.WorkspaceDeployment, error) {
	// Read-only: the cache's own objects, not copies (a decision under a quota reads every workspace
	// and ServiceSet of the namespace, and in a cohort of every member: copies would cost in
	// proportion). Nothing here or in the callers writes to them; the waiters returned are shallow copies
	// that share the cache's maps and slices, and are only read.
	list, err := rd.workspacesIn(ctx, namespace)
	if err != nil {
		return nil, nil, err
	}
	sets, err := rd.serviceSetsOf(ctx, namespace)
	if err != nil {
		return nil, nil, err
	}
	withSet := make(map[string]*k0rdentv1beta1.ServiceSet, len(sets))
	for _, set := range sets {
		withSet[set.Labels[workspacesv1.WorkspaceLabel]] = set
	}
	var held []quotaCharge
	var waiting []workspacesv1.WorkspaceDeployment
	for _, o := range list {
		key := o.Namespace + "/" + o.Name
		if key == self {
			continue
		}
		set, hasSet := withSet[o.Name]
		current, phase := state(o)
		ad := owned.AdmissionOf(current, set)
		if holdsGPUs(o, ad, phase, hasSet) {
			held = append(held, chargeOf(key, ad))
			continue
		}
		if WaitingForQuota(o) && o.DeletionTimestamp.IsZero() && !o.Spec.Suspend {
			waiting = append(waiting, *o)
		}
	}
	return held, waiting, nil
}

// waiterCharge is what a quota waiter asks for, from its resolved resources.
func waiterCharge(o *workspacesv1.WorkspaceDeployment) (quotaCharge, bool) {
	res := o.Status.ResolvedResources
	if res == nil {
		return quotaCharge{}, false
	}
	c := quotaCharge{key: o.Namespace + "/" + o.Name, vendor: res.PerReplica.GPUVendor}
	c.add(res.PerReplica.GPUType, GPUs(res)*int64(res.Replicas))
	return c, true
}

// QuotaResult is what the namespace's WorkspaceQuotas say of an admission.
type QuotaResult struct {
	// Applies is false when the namespace has no WorkspaceQuota.
	Applies bool
	// Within is true when every quota leaves room; Message says so, or which quota is exceeded.
	Within  bool
	Message string
	// Borrowed is how many of the admitted GPUs are borrowed from the namespace's cohort.
	Borrowed int64
}

// checkQuota checks the admission the gate is about to grant against the namespace's
// WorkspaceQuotas and, in a cohort, against the cohort's unused guarantees; the caller holds the
// namespace's quota lock, or the cohort's (lock, which says which cohort). The quota waiters ahead of the
// workspace (higher priority, then older), of its namespace and of the cohort's other members, that
// the quotas could admit now count first, so that freed quota goes to the next in line
// (chargeWaitersAhead).
func (g *Gate) checkQuota(ctx context.Context, ws *workspacesv1.WorkspaceDeployment, ad *workspacesv1.Admission, cohort string) (QuotaResult, error) {
	q, err := g.quotaCheck(ctx, ws, ad, cohort)
	switch {
	case err != nil || !q.Applies:
	case !q.Within:
		metrics.QuotaDecisions.WithLabelValues("Exceeded").Inc()
	case q.Borrowed > 0:
		metrics.QuotaDecisions.WithLabelValues("Borrowed").Inc()
	default:
		metrics.QuotaDecisions.WithLabelValues("Within").Inc()
	}
	return q, err
}

// quotaCheck is checkQuota without its count in the metrics: reclaim asks it of a workspace that
// waits, to learn whether its request is within its guarantee. It sets ad.BorrowedGPUs.
func (g *Gate) quotaCheck(ctx context.Context, ws *workspacesv1.WorkspaceDeployment, ad *workspacesv1.Admission, cohort string) (QuotaResult, error) {
	quotas, err := listQuotas(ctx, g.client, ws.Namespace)
	if err != nil {
		return QuotaResult{}, err
	}
	if len(quotas) == 0 {
		return QuotaResult{}, nil
	}
	// The cohort is the one whose lock the caller holds (lock); a label changed since counts from the
	// next decision on.
	sc := quotaScope{quotas: quotas, cohort: cohort}
	if sc.cohort != "" {
		if sc.others, err = cohortMembers(ctx, g.cache(), sc.cohort, ws.Namespace, g.mem.state); err != nil {
			return QuotaResult{}, err
		}
	}
	self := ws.Namespace + "/" + ws.Name
	held, waiting, err := namespaceUse(ctx, g.cache(), ws.Namespace, self, g.mem.state)
	if err != nil {
		return QuotaResult{}, err
	}
	members := append([]cohortMember{{namespace: ws.Namespace, quotas: quotas, held: held, waiting: waiting}}, sc.others...)
	chargeWaitersAhead(members, sc.cohort, ws)
	held, sc.others = members[0].held, members[1:]
	req := chargeOf(self, ad)
	why, borrowed, above := quotaViolation(sc, held, req, ws.Spec.PreemptionPolicy)
	if why != "" {
		return QuotaResult{Applies: true, Message: why}, nil
	}
	ad.BorrowedGPUs = borrowed
	if borrowed > 0 {
		return QuotaResult{Applies: true, Within: true, Borrowed: borrowed,
			Message: fmt.Sprintf("the workspace borrows %d GPUs above its namespace's guarantee (%s), from the unused guarantees of cohort %s", borrowed, above, sc.cohort)}, nil
	}
	return QuotaResult{Applies: true, Within: true,
		Message: fmt.Sprintf("the namespace's %d WorkspaceQuota(s) leave room for the workspace", len(quotas))}, nil
}

// QuotaReconciler writes the use of each WorkspaceQuota into its status.
type QuotaReconciler struct {
	Client client.Client
	// Cache is the manager's cache, read by its indexes (nil: the counts list through Client).
	Cache cache.Informers
}

// Reconcile counts the namespace's admitted workspaces and quota waiters into the quota's status.
func (q *QuotaReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	quota := &workspacesv1.WorkspaceQuota{}
	if err := q.Client.Get(ctx, req.NamespacedName, quota); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	rd := cached{client: q.Client, informers: q.Cache}
	held, waiting, err := namespaceUse(ctx, rd, quota.Namespace, "", statusState)
	if err != nil {
		return reconcile.Result{}, err
	}
	cohort, err := cohortOf(ctx, q.Client, quota.Namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	var others []cohortMember
	if cohort != "" {
		if others, err = cohortMembers(ctx, rd, cohort, quota.Namespace, statusState); err != nil {
			return reconcile.Result{}, err
		}
	}
	ports, err := portsHeld(ctx, rd, quota.Namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	use, n := quotaUse(quota, held)
	cohortUse(quota, use, cohort, others)
	st := workspacesv1.WorkspaceQuotaStatus{ObservedGeneration: quota.Generation, Cohort: cohort, GPUs: use, Workspaces: n,
		TCPEndpoints: ports, Waiting: int32(len(waiting)), Summary: quotaSummary(quota, use, n)}
	if l := quota.Spec.TCPEndpoints; l != nil {
		st.Summary += fmt.Sprintf(", tcp endpoints %d/%d", ports, *l)
	}
	if len(st.GPUs) == 0 {
		st.GPUs = nil
	}
	if equality.Semantic.DeepEqual(quota.Status, st) {
		return reconcile.Result{}, nil
	}
	quota.Status = st
	if err := status.Apply(ctx, q.Client, quota, component.Name); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("writing WorkspaceQuota status: %w", err)
	}
	return reconcile.Result{}, nil
}

// portsHeld counts the SSH and TCP endpoints of the namespace's workspaces that hold a port: their
// status.access entries with a URL.
func portsHeld(ctx context.Context, rd cached, namespace string) (int32, error) {
	// Read-only: the cache's own objects (a copy of every workspace of the namespace on each count
	// of its quota would cost in proportion to the namespace).
	list, err := rd.workspacesIn(ctx, namespace)
	if err != nil {
		return 0, err
	}
	var n int32
	for _, o := range list {
		for _, a := range o.Status.Access {
			if (a.Protocol == workspacesv1.EndpointProtocolSSH || a.Protocol == workspacesv1.EndpointProtocolTCP) && a.URL != "" {
				n++
			}
		}
	}
	return n, nil
}

// SetupWithManager watches the quotas, the workspaces of their namespaces and the namespaces' cohort
// labels: a workspace of one cohort member changes what the others have lent.
//
// A quota is counted again when its spec changes, not when its status does: the event of each status
// write counted the quota again at once, bypassing quotaCountDelay, so that in a burst every write was
// followed by another (make bench, class cohort: 0.17 to 0.29 status writes per admission, against
// 0.04 with the writes' events ignored, about once a second per quota). A spec
// change (and a quota made or deleted) also counts the other quotas of its namespace and of its
// cohort's members: the guarantees of each decide what the others lend and borrow.
func (q *QuotaReconciler) SetupWithManager(mgr manager.Manager) error {
	specOnly := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	return builder.ControllerManagedBy(mgr).
		Named("workspacequota").
		For(&workspacesv1.WorkspaceQuota{}, specOnly).
		Watches(&workspacesv1.WorkspaceQuota{}, handler.EnqueueRequestsFromMapFunc(q.forQuota), specOnly).
		Watches(&workspacesv1.WorkspaceDeployment{}, countLater(q.forWorkspace)).
		Watches(&k0rdentv1beta1.ServiceSet{}, countLater(q.forWorkspace),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				_, ok := o.GetLabels()[workspacesv1.WorkspaceNamespaceLabel]
				return ok
			}))).
		Watches(&corev1.Namespace{}, handler.Funcs{
			// A namespace that joins or leaves a cohort changes its own quotas' status and the
			// statuses of both cohorts' members.
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, wq workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				was, is := e.ObjectOld.GetLabels()[workspacesv1.CohortLabel], e.ObjectNew.GetLabels()[workspacesv1.CohortLabel]
				if was == is {
					return
				}
				for _, r := range q.forCohorts(ctx, e.ObjectNew.GetName(), was, is) {
					wq.Add(r)
				}
			},
		}).
		Complete(q)
}

// quotaCountDelay is how long a change of a workspace or of its ServiceSet waits before the quotas
// it maps to are counted again: a burst of admissions changes each workspace several times, and its
// namespace's quotas (in a cohort, every member's) are counted once per delay instead of once per
// change; each count reads every workspace of the namespace, so counting on every change made a burst
// quadratic, and wrote the quota's status about once and a half per workspace (make bench, class
// cohort). A quota's status trails its namespace by at most this much; the gate's decisions never read
// it, they count the workspaces themselves. A change of the quota itself is counted at once.
const quotaCountDelay = time.Second

// countLater is an event handler that enqueues the quotas fn maps an object to after quotaCountDelay:
// the queue keeps one entry per quota, however many events name it meanwhile. An update maps the old
// object and the new one, as handler.EnqueueRequestsFromMapFunc does.
func countLater(fn handler.MapFunc) handler.EventHandler {
	add := func(ctx context.Context, o client.Object, wq workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, r := range fn(ctx, o) {
			wq.AddAfter(r, quotaCountDelay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, wq workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, wq)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, wq workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.ObjectOld, wq)
			add(ctx, e.ObjectNew, wq)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, wq workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, wq)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, wq workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, wq)
		},
	}
}

// forWorkspace maps a workspace (or its ServiceSet) to the quotas of its namespace and of the other
// namespaces of its cohort.
func (q *QuotaReconciler) forWorkspace(ctx context.Context, o client.Object) []reconcile.Request {
	ns := o.GetNamespace()
	if v := o.GetLabels()[workspacesv1.WorkspaceNamespaceLabel]; v != "" {
		ns = v
	}
	return q.forNamespace(ctx, ns)
}

// forQuota maps a quota to the quotas of its namespace and of the other namespaces of its cohort.
func (q *QuotaReconciler) forQuota(ctx context.Context, o client.Object) []reconcile.Request {
	return q.forNamespace(ctx, o.GetNamespace())
}

// forNamespace maps a namespace to its quotas and those of the other namespaces of its cohort.
func (q *QuotaReconciler) forNamespace(ctx context.Context, ns string) []reconcile.Request {
	cohort, err := cohortOf(ctx, q.Client, ns)
	if err != nil {
		return nil
	}
	return q.forCohorts(ctx, ns, cohort)
}

// forCohorts maps a namespace and cohorts to the quotas of the namespace and of the cohorts' members.
func (q *QuotaReconciler) forCohorts(ctx context.Context, namespace string, cohorts ...string) []reconcile.Request {
	names := []string{namespace}
	for _, c := range cohorts {
		if c == "" {
			continue
		}
		members, err := cohortNamespaces(ctx, q.Client, c)
		if err != nil {
			continue
		}
		names = append(names, members...)
	}
	seen := map[string]bool{}
	var out []reconcile.Request
	for _, ns := range names {
		if seen[ns] {
			continue
		}
		seen[ns] = true
		quotas, err := listQuotas(ctx, q.Client, ns)
		if err != nil {
			continue
		}
		for i := range quotas {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&quotas[i])})
		}
	}
	return out
}
