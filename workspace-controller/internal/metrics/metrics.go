// Package metrics holds the workspace-controller's Prometheus metrics: the counters the gate, the
// placement and the reconciler increment, and the collectors that count workspaces by phase and the
// queues and quotas at scrape time from the manager's cache. Every metric is named with
// bootstrap.MetricName and the component word; docs/operations.md lists them.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/bootstrap"
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
		Help: "WorkspaceQuota checks by result: Within, Exceeded.",
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
)

// Register registers the workspace-controller's metrics with controller-runtime's registry: the
// counters, and the collectors that read, at scrape time, the manager's cache (reader) and the number
// of child clients (childClients). A later Register (a new manager in the same process) replaces the
// collectors, so the latest cache is the one read.
func Register(reader client.Reader, childClients func() int) error {
	collectors := []prometheus.Collector{
		newPhaseCollector(reader),
		newQueueCollector(reader, time.Now),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: bootstrap.MetricName(component.Name, "child_clients"),
			Help: "Child-cluster clients held in the cache.",
		}, func() float64 { return float64(childClients()) }),
	}
	for _, c := range collectors {
		ctrlmetrics.Registry.Unregister(c) // matched by its descriptors: the previous manager's
	}
	return bootstrap.RegisterMetrics(append(collectors, GateDecisions, TimeToRunning, Placements, QuotaDecisions, WaitSeconds, StopsAfterIdle)...)
}

// phaseCollector reports the number of workspaces by phase from the manager's cache at scrape time,
// so the gauge is never stale and needs no bookkeeping.
type phaseCollector struct {
	reader client.Reader
	desc   *prometheus.Desc
}

func newPhaseCollector(reader client.Reader) *phaseCollector {
	return &phaseCollector{reader: reader, desc: prometheus.NewDesc(
		bootstrap.MetricName(component.Name, "workspaces"), "WorkspaceDeployments by phase.", []string{"phase"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	reader := c.reader
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list workspacesv1.WorkspaceDeploymentList
	// Read-only: the cached objects are not copied (a scrape would copy every workspace).
	if err := reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	counts := map[workspacesv1.WorkspacePhase]int{}
	for _, p := range []workspacesv1.WorkspacePhase{
		workspacesv1.PhasePending, workspacesv1.PhaseInstallingPrerequisites, workspacesv1.PhaseWaiting,
		workspacesv1.PhaseDeploying, workspacesv1.PhaseRunning, workspacesv1.PhaseStopped, workspacesv1.PhaseFailed, workspacesv1.PhaseDeleting,
	} {
		counts[p] = 0
	}
	for i := range list.Items {
		p := list.Items[i].Status.Phase
		if p == "" {
			p = workspacesv1.PhasePending
		}
		counts[p]++
	}
	for p, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), string(p))
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
// age of the oldest per cluster and namespace, and each WorkspaceQuota's use and limits.
type queueCollector struct {
	reader client.Reader
	now    func() time.Time

	waiting, oldest, used, limit *prometheus.Desc
}

func newQueueCollector(reader client.Reader, now func() time.Time) *queueCollector {
	return &queueCollector{
		reader: reader,
		now:    now,
		waiting: prometheus.NewDesc(bootstrap.MetricName(component.Name, "queue_length"),
			"Waiting WorkspaceDeployments by cluster (namespace/name, empty while unplaced) and namespace.", []string{"cluster", "namespace"}, nil),
		oldest: prometheus.NewDesc(bootstrap.MetricName(component.Name, "queue_oldest_wait_seconds"),
			"Seconds the longest-waiting WorkspaceDeployment has waited, by cluster and namespace.", []string{"cluster", "namespace"}, nil),
		used: prometheus.NewDesc(bootstrap.MetricName(component.Name, "quota_used"),
			"What a WorkspaceQuota's namespace uses: resource is workspaces, or gpu/<vendor>[/<model>].", []string{"namespace", "quota", "resource"}, nil),
		limit: prometheus.NewDesc(bootstrap.MetricName(component.Name, "quota_limit"),
			"A WorkspaceQuota's limit: resource is workspaces, or gpu/<vendor>[/<model>].", []string{"namespace", "quota", "resource"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.oldest
	ch <- c.used
	ch <- c.limit
}

// Collect implements prometheus.Collector.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	reader := c.reader
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list workspacesv1.WorkspaceDeploymentList
	// Read-only: the cached objects are not copied (a scrape would copy every workspace).
	if err := reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err == nil {
		type key struct{ cluster, namespace string }
		counts, oldest := map[key]int{}, map[key]float64{}
		now := c.now()
		for i := range list.Items {
			w := &list.Items[i]
			if w.Status.Phase != workspacesv1.PhaseWaiting {
				continue
			}
			k := key{clusterLabel(w), w.Namespace}
			counts[k]++
			if since, ok := waitingSince(&w.Status); ok {
				oldest[k] = max(oldest[k], now.Sub(since).Seconds())
			}
		}
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(n), k.cluster, k.namespace)
			ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest[k], k.cluster, k.namespace)
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
				var used int64
				if j < len(q.Status.GPUs) && q.Status.GPUs[j].Vendor == e.Vendor && q.Status.GPUs[j].Model == e.Model {
					used = q.Status.GPUs[j].Used
				}
				ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(e.Limit), q.Namespace, q.Name, res)
				ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(used), q.Namespace, q.Name, res)
			}
		}
	}
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
