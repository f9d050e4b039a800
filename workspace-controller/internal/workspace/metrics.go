package workspace

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/component"
)

// Component is the component word: logger name, metrics prefix, leader-election lease.
const Component = component.Name

var (
	gateDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: bootstrap.MetricsPrefix(Component),
		Name:      "gate_decisions_total",
		Help:      "GPU gate decisions by outcome: Admit, Wait, Unavailable, Unreachable.",
	}, []string{"outcome"})

	timeToRunning = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: bootstrap.MetricsPrefix(Component),
		Name:      "creation_to_running_seconds",
		Help:      "Seconds from a WorkspaceDeployment's creation to its first Running phase.",
		Buckets:   []float64{5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
	})

	placements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: bootstrap.MetricsPrefix(Component),
		Name:      "placements_total",
		Help:      "Workspaces placed on a cluster, by reason: Named, OnlyFit, TightestFit.",
	}, []string{"reason"})

	quotaDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: bootstrap.MetricsPrefix(Component),
		Name:      "quota_decisions_total",
		Help:      "WorkspaceQuota checks by result: Within, Exceeded.",
	}, []string{"result"})

	waitSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: bootstrap.MetricsPrefix(Component),
		Name:      "wait_seconds",
		Help:      "Seconds a workspace spent Waiting (for GPUs, placement or quota), observed when it leaves Waiting; cluster is empty for an unplaced workspace.",
		Buckets:   []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400},
	}, []string{"cluster", "namespace"})

	// stopsAfterIdle counts the workspaces the controller stopped because spec.stopAfter passed.
	stopsAfterIdle = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: bootstrap.MetricsPrefix(Component),
		Name:      "stops_after_idle_total",
		Help:      "Workspaces stopped because spec.stopAfter passed without a spec change.",
	})
)

// phaseCollector reports the number of workspaces by phase from the manager's cache at scrape time,
// so the gauge is never stale and needs no bookkeeping. One collector serves the process; the latest
// manager's cache is the one read.
type phaseCollector struct {
	mu     sync.Mutex
	reader client.Reader
	desc   *prometheus.Desc
}

var phases = &phaseCollector{desc: prometheus.NewDesc(
	bootstrap.MetricName(Component, "workspaces"), "WorkspaceDeployments by phase.", []string{"phase"}, nil)}

// childCache is the child cache the child_clients gauge reads.
var childCache struct {
	sync.Mutex
	children Children
}

var childClients = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
	Namespace: bootstrap.MetricsPrefix(Component),
	Name:      "child_clients",
	Help:      "Child-cluster clients held in the cache.",
}, func() float64 {
	childCache.Lock()
	defer childCache.Unlock()
	if childCache.children == nil {
		return 0
	}
	return float64(childCache.children.Size())
})

// Describe implements prometheus.Collector.
func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	reader := c.reader
	c.mu.Unlock()
	if reader == nil {
		return
	}
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

// registerMetrics registers the controller's collectors; the child cache size reads children.Size.
func registerMetrics(reader client.Reader, children Children) error {
	phases.mu.Lock()
	phases.reader = reader
	phases.mu.Unlock()
	queues.use(reader)
	childCache.Lock()
	childCache.children = children
	childCache.Unlock()
	return bootstrap.RegisterMetrics(gateDecisions, timeToRunning, phases, childClients,
		placements, quotaDecisions, waitSeconds, queues, stopsAfterIdle)
}

// observePhase records the creation-to-Running time when a workspace of its first generation
// reaches Running for the first time.
func observePhase(before, after *workspacesv1.WorkspaceDeployment, now time.Time) {
	observeWait(before, after, now)
	if after.Status.Phase != workspacesv1.PhaseRunning || before.Status.Phase == workspacesv1.PhaseRunning {
		return
	}
	if before.Status.ObservedGeneration > 1 || after.Generation > 1 {
		return
	}
	timeToRunning.Observe(now.Sub(after.CreationTimestamp.Time).Seconds())
}
