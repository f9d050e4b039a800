// Package metrics holds the workspace-controller's Prometheus metrics: the counters the gate, the
// placement and the reconciler increment, and the collectors that count, at scrape time from the
// manager's cache, workspaces and their GPUs by namespace, the queues and the quotas. Every metric is
// named with bootstrap.MetricName and the component word (exalsius_workspace_controller_<name>);
// docs/operations.md lists them.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/cacheread"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/component"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// The workspace-controller's counters and histograms, incremented where the event happens.
var (
	// GateDecisions counts the GPU gate's decisions by outcome.
	GateDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: bootstrap.MetricName(component.Name, "gate_decisions_total"),
		Help: "GPU gate decisions by outcome: Admit, Wait, Unavailable, Unreachable.",
	}, []string{"outcome"})

	// TimeToRunning observes creation to first Running.
	TimeToRunning = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    bootstrap.MetricName(component.Name, "creation_to_running_seconds"),
		Help:    "Seconds from a WorkspaceDeployment's creation to its first Running phase.",
		Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
	})

	// Placements counts placements by reason.
	Placements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: bootstrap.MetricName(component.Name, "placements_total"),
		Help: "Workspaces placed on a cluster, by reason: Named, OnlyFit, TightestFit.",
	}, []string{"reason"})

	// QuotaDecisions counts WorkspaceQuota checks by result.
	QuotaDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: bootstrap.MetricName(component.Name, "quota_decisions_total"),
		Help: "WorkspaceQuota checks by result: Within, Borrowed (admitted above the namespace's guarantee, from its cohort), Exceeded.",
	}, []string{"result"})

	// WaitSeconds observes the time a workspace spent Waiting.
	WaitSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    bootstrap.MetricName(component.Name, "wait_seconds"),
		Help:    "Seconds a workspace spent Waiting (for GPUs, placement or quota), observed when it leaves Waiting; cluster is empty for an unplaced workspace.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400},
	}, []string{"cluster", "namespace"})

	// StopsAfterIdle counts the workspaces stopped because spec.stopAfter passed.
	StopsAfterIdle = prometheus.NewCounter(prometheus.CounterOpts{
		Name: bootstrap.MetricName(component.Name, "stops_after_idle_total"),
		Help: "Workspaces stopped because spec.stopAfter passed without a spec change.",
	})

	// Reclaims counts the borrowing workspaces stopped to give GPUs back, by reason: Guarantee (a
	// workspace of a cohort member needed them within its guarantee).
	Reclaims = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: bootstrap.MetricName(component.Name, "reclaims_total"),
		Help: "Borrowing workspaces stopped to give their GPUs back to a cohort member, by reason.",
	}, []string{"reason"})
)

// Register registers the workspace-controller's metrics with controller-runtime's registry: the
// counters, and the collectors that read, at scrape time, the manager's cache (reader, and its
// informers for the workspaces, read without copying: nil lists them through reader) and the number of
// child clients (childClients). A later Register (a new manager in the same process) replaces the
// collectors, so the latest cache is the one read.
func Register(reader client.Reader, informers cache.Informers, childClients func() int) error {
	workspaces := cachedWorkspaces(reader, informers)
	collectors := []prometheus.Collector{
		newWorkspaceCollector(workspaces),
		newQueueCollector(reader, workspaces, time.Now),
		newGPUSecondsCollector(workspaces, time.Now),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: bootstrap.MetricName(component.Name, "child_clients"),
			Help: "Child-cluster clients held in the cache.",
		}, func() float64 { return float64(childClients()) }),
	}
	for _, c := range collectors {
		ctrlmetrics.Registry.Unregister(c) // matched by its descriptors: the previous manager's
	}
	return bootstrap.RegisterMetrics(append(collectors, GateDecisions, TimeToRunning, Placements, QuotaDecisions, WaitSeconds, StopsAfterIdle, Reclaims)...)
}

// listWorkspaces lists the WorkspaceDeployments a collector counts: read only.
type listWorkspaces func(ctx context.Context) ([]*workspacesv1.WorkspaceDeployment, error)

// cachedWorkspaces lists the workspaces from the manager's cache: the informer's own objects
// (internal/cacheread), read only. A list through the reader, even without a deep copy, copies every
// workspace's struct, and at 10,000 workspaces the three collectors' copies were a quarter of the
// controller's CPU under frequent scrapes (make bench-envelope); reader is what is left when the
// informers cannot be read so.
func cachedWorkspaces(reader client.Reader, informers cache.Informers) listWorkspaces {
	return func(ctx context.Context) ([]*workspacesv1.WorkspaceDeployment, error) {
		if items, ok, err := cacheread.All[workspacesv1.WorkspaceDeployment](ctx, informers); ok || err != nil {
			return items, err
		}
		var list workspacesv1.WorkspaceDeploymentList
		if err := reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		items := make([]*workspacesv1.WorkspaceDeployment, len(list.Items))
		for i := range list.Items {
			items[i] = &list.Items[i]
		}
		return items, nil
	}
}

// phases are every workspace phase, each reported (0 when none) for a namespace that has workspaces.
var phases = []workspacesv1.WorkspacePhase{
	workspacesv1.PhasePending, workspacesv1.PhaseInstallingPrerequisites, workspacesv1.PhaseWaiting,
	workspacesv1.PhaseDeploying, workspacesv1.PhaseRunning, workspacesv1.PhaseStopped, workspacesv1.PhaseFailed, workspacesv1.PhaseDeleting,
}

// workspaceCollector reports, at scrape time, the workspaces of each namespace by phase and the GPUs
// they ask for and hold, so the gauges are never stale, need no bookkeeping, and a namespace without
// workspaces has no series. The labels stay bounded: namespace, a phase of the enum, and a GPU vendor
// and model of the fleet.
type workspaceCollector struct {
	list                            listWorkspaces
	workspaces, requested, admitted *prometheus.Desc
}

func newWorkspaceCollector(list listWorkspaces) *workspaceCollector {
	return &workspaceCollector{list: list,
		workspaces: prometheus.NewDesc(bootstrap.MetricName(component.Name, "workspaces"),
			"WorkspaceDeployments by namespace and phase; every phase is present (0 when none) for a namespace that has workspaces.",
			[]string{"namespace", "phase"}, nil),
		requested: prometheus.NewDesc(bootstrap.MetricName(component.Name, "gpus_requested"),
			"GPUs the namespace's workspaces ask for (gpuCount x replicas), of those neither stopped, Failed nor being deleted; model is the gpuType asked for, empty for any.",
			[]string{"namespace", "vendor", "model"}, nil),
		admitted: prometheus.NewDesc(bootstrap.MetricName(component.Name, "gpus_admitted"),
			"GPUs the GPU gate has admitted to the namespace's workspaces and reserves for them; model is the admitted nodes' GPU model.",
			[]string{"namespace", "vendor", "model"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *workspaceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.workspaces
	ch <- c.requested
	ch <- c.admitted
}

// Collect implements prometheus.Collector.
func (c *workspaceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	items, err := c.list(ctx)
	if err != nil {
		return
	}
	type phaseKey struct {
		namespace string
		phase     workspacesv1.WorkspacePhase
	}
	counts, namespaces := map[phaseKey]int{}, map[string]bool{}
	requested, admitted := map[gpuKey]int64{}, map[gpuKey]int64{}
	for _, w := range items {
		p := w.Status.Phase
		if p == "" {
			p = workspacesv1.PhasePending
		}
		namespaces[w.Namespace] = true
		counts[phaseKey{w.Namespace, p}]++
		if n, k := requestedGPUs(w); n > 0 {
			requested[k] += n
		}
		addAdmitted(admitted, w.Namespace, w.Status.Admission)
	}
	for ns := range namespaces {
		for _, p := range phases {
			ch <- prometheus.MustNewConstMetric(c.workspaces, prometheus.GaugeValue, float64(counts[phaseKey{ns, p}]), ns, string(p))
		}
	}
	for k, n := range requested {
		ch <- prometheus.MustNewConstMetric(c.requested, prometheus.GaugeValue, float64(n), k.namespace, k.vendor, k.model)
	}
	for k, n := range admitted {
		ch <- prometheus.MustNewConstMetric(c.admitted, prometheus.GaugeValue, float64(n), k.namespace, k.vendor, k.model)
	}
}

// gpuKey is the labels of a GPU gauge.
type gpuKey struct{ namespace, vendor, model string }

// requestedGPUs is what a workspace asks for, from its resolved resources: gpuCount x replicas of its
// vendor and gpuType; none for a workspace that is stopped, Failed or being deleted (it asks for no
// GPU now, or a human must act first) or not resolved yet.
func requestedGPUs(w *workspacesv1.WorkspaceDeployment) (int64, gpuKey) {
	res := w.Status.ResolvedResources
	if res == nil || res.PerReplica.GPUCount == nil || w.Spec.Stopped || !w.DeletionTimestamp.IsZero() ||
		w.Status.Phase == workspacesv1.PhaseFailed || w.Status.Phase == workspacesv1.PhaseStopped {
		return 0, gpuKey{}
	}
	return int64(*res.PerReplica.GPUCount) * int64(res.Replicas),
		gpuKey{w.Namespace, string(res.PerReplica.GPUVendor), res.PerReplica.GPUType}
}

// addAdmitted adds what an admission holds, by the model of each admitted node (an admission spread
// over nodes of two models holds GPUs of both; a node without a recorded model counts the
// admission's), as the gate's quota counts it.
func addAdmitted(into map[gpuKey]int64, namespace string, ad *workspacesv1.Admission) {
	if ad == nil {
		return
	}
	if len(ad.Nodes) == 0 || ad.GPUsPerReplica <= 0 {
		if ad.GPUs > 0 {
			into[gpuKey{namespace, string(ad.GPUVendor), ad.GPUModel}] += ad.GPUs
		}
		return
	}
	for _, n := range ad.Nodes {
		model := n.GPUModel
		if model == "" {
			model = ad.GPUModel
		}
		if g := ad.GPUsPerReplica * int64(n.Replicas); g > 0 {
			into[gpuKey{namespace, string(ad.GPUVendor), model}] += g
		}
	}
}

// ObservePhase records the creation-to-Running time when a workspace of its first generation
// reaches Running for the first time.
func ObservePhase(before, after *workspacesv1.WorkspaceDeployment, now time.Time) {
	observeWait(before, after, now)
	if after.Status.Phase != workspacesv1.PhaseRunning || before.Status.Phase == workspacesv1.PhaseRunning {
		return
	}
	if before.Status.ObservedGeneration > 1 || after.Generation > 1 {
		return
	}
	TimeToRunning.Observe(now.Sub(after.CreationTimestamp.Time).Seconds())
}

// queueCollector reports at scrape time, from the manager's cache, the Waiting workspaces and the
// age of the oldest per cluster, namespace and reason (WaitingReason), and each WorkspaceQuota's use
// and limits.
type queueCollector struct {
	reader client.Reader
	list   listWorkspaces
	now    func() time.Time

	waiting, oldest, used, limit, guaranteed, borrowed, lent *prometheus.Desc
}

func newQueueCollector(reader client.Reader, list listWorkspaces, now func() time.Time) *queueCollector {
	return &queueCollector{
		reader: reader,
		list:   list,
		now:    now,
		waiting: prometheus.NewDesc(bootstrap.MetricName(component.Name, "queue_length"),
			"Waiting WorkspaceDeployments by cluster (namespace/name, empty while unplaced), namespace and reason (QuotaExceeded for a quota wait, else what the GPUs wait for).",
			[]string{"cluster", "namespace", "reason"}, nil),
		oldest: prometheus.NewDesc(bootstrap.MetricName(component.Name, "queue_oldest_wait_seconds"),
			"Seconds the longest-waiting WorkspaceDeployment has waited, by cluster, namespace and reason.", []string{"cluster", "namespace", "reason"}, nil),
		used: prometheus.NewDesc(bootstrap.MetricName(component.Name, "quota_used"),
			"What a WorkspaceQuota's namespace uses: resource is workspaces, or gpu/<vendor>[/<model>].", []string{"namespace", "quota", "resource"}, nil),
		limit: prometheus.NewDesc(bootstrap.MetricName(component.Name, "quota_limit"),
			"A WorkspaceQuota's limit: resource is workspaces, or gpu/<vendor>[/<model>].", []string{"namespace", "quota", "resource"}, nil),
		guaranteed: prometheus.NewDesc(bootstrap.MetricName(component.Name, "quota_guaranteed_gpus"),
			"The GPUs a WorkspaceQuota entry guarantees its namespace (its limit unless spec.gpus[].guaranteed says less); resource is gpu/<vendor>[/<model>].", []string{"namespace", "quota", "resource"}, nil),
		borrowed: prometheus.NewDesc(bootstrap.MetricName(component.Name, "quota_borrowed_gpus"),
			"The GPUs a WorkspaceQuota's namespace holds above the entry's guarantee, borrowed from its cohort.", []string{"namespace", "quota", "resource"}, nil),
		lent: prometheus.NewDesc(bootstrap.MetricName(component.Name, "quota_lent_gpus"),
			"The namespace's share of the GPUs its cohort borrows, out of what the entry guarantees and the namespace does not use.", []string{"namespace", "quota", "resource"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.oldest
	ch <- c.used
	ch <- c.limit
	ch <- c.guaranteed
	ch <- c.borrowed
	ch <- c.lent
}

// Collect implements prometheus.Collector.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	reader := c.reader
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if items, err := c.list(ctx); err == nil {
		type key struct{ cluster, namespace, reason string }
		counts, oldest := map[key]int{}, map[key]float64{}
		now := c.now()
		for _, w := range items {
			if w.Status.Phase != workspacesv1.PhaseWaiting {
				continue
			}
			k := key{clusterLabel(w), w.Namespace, WaitingReason(&w.Status)}
			counts[k]++
			if since, ok := waitingSince(&w.Status); ok {
				oldest[k] = max(oldest[k], now.Sub(since).Seconds())
			}
		}
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(n), k.cluster, k.namespace, k.reason)
			ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest[k], k.cluster, k.namespace, k.reason)
		}
	}
	var quotas workspacesv1.WorkspaceQuotaList
	if err := reader.List(ctx, &quotas, client.UnsafeDisableDeepCopy); err == nil {
		for i := range quotas.Items {
			q := &quotas.Items[i]
			if w := q.Spec.Workspaces; w != nil {
				ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(*w), q.Namespace, q.Name, "workspaces")
			}
			ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(q.Status.Workspaces), q.Namespace, q.Name, "workspaces")
			for j, e := range q.Spec.GPUs {
				res := "gpu/" + string(e.Vendor)
				if e.Model != "" {
					res += "/" + e.Model
				}
				var u workspacesv1.GPUUsage
				if j < len(q.Status.GPUs) && q.Status.GPUs[j].Vendor == e.Vendor && q.Status.GPUs[j].Model == e.Model {
					u = q.Status.GPUs[j]
				}
				ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(e.Limit), q.Namespace, q.Name, res)
				ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(u.Used), q.Namespace, q.Name, res)
				ch <- prometheus.MustNewConstMetric(c.guaranteed, prometheus.GaugeValue, float64(e.GuaranteedGPUs()), q.Namespace, q.Name, res)
				ch <- prometheus.MustNewConstMetric(c.borrowed, prometheus.GaugeValue, float64(u.Borrowed), q.Namespace, q.Name, res)
				ch <- prometheus.MustNewConstMetric(c.lent, prometheus.GaugeValue, float64(u.Lent), q.Namespace, q.Name, res)
			}
		}
	}
}

// waitingReasons are the values of the queue gauges' reason label: the Ready condition's reasons of a
// Waiting workspace. QuotaExceeded waits for the namespace's WorkspaceQuota; the others wait for GPUs
// (free capacity, nodes that can take pods, a fitting cluster, a child that answers).
var waitingReasons = map[string]bool{
	workspacesv1.ReasonQuotaExceeded:         true,
	workspacesv1.ReasonWaitingForGpuCapacity: true,
	workspacesv1.ReasonWaitingForGpuNodes:    true,
	workspacesv1.ReasonWaitingForReclaim:     true,
	workspacesv1.ReasonNoClusterFitsNow:      true,
	workspacesv1.ReasonClusterUnreachable:    true,
}

// ReasonOther is the reason label of a Waiting workspace whose Ready reason is none of the known
// ones (a newer controller's, or none yet), so that the label's values stay a fixed set.
const ReasonOther = "Other"

// WaitingReason is a Waiting workspace's reason label: its Ready condition's reason when it is one
// of the known waiting reasons, else Other.
func WaitingReason(st *workspacesv1.WorkspaceDeploymentStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, workspacesv1.ReadyCondition); c != nil && waitingReasons[c.Reason] {
		return c.Reason
	}
	return ReasonOther
}

// clusterLabel is a workspace's cluster as a metrics label: namespace/name, empty while unplaced.
func clusterLabel(w *workspacesv1.WorkspaceDeployment) string {
	if k := owned.ClusterKey(w); k.Name != "" {
		return k.String()
	}
	return ""
}

// waitingSince is when a Waiting workspace started to wait: the latest transition to False of the
// condition that holds it (Feasible, WithinQuota or Placed).
func waitingSince(st *workspacesv1.WorkspaceDeploymentStatus) (time.Time, bool) {
	var since time.Time
	for _, t := range []string{workspacesv1.FeasibleCondition, workspacesv1.WithinQuotaCondition, workspacesv1.PlacedCondition} {
		c := meta.FindStatusCondition(st.Conditions, t)
		if c != nil && c.Status == "False" && c.LastTransitionTime.After(since) {
			since = c.LastTransitionTime.Time
		}
	}
	return since, !since.IsZero()
}

// observeWait records the wait time of a workspace that leaves Waiting.
func observeWait(before, after *workspacesv1.WorkspaceDeployment, now time.Time) {
	if before.Status.Phase != workspacesv1.PhaseWaiting || after.Status.Phase == workspacesv1.PhaseWaiting {
		return
	}
	if since, ok := waitingSince(&before.Status); ok {
		WaitSeconds.WithLabelValues(clusterLabel(after), after.Namespace).Observe(now.Sub(since).Seconds())
	}
}
