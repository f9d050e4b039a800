package workspace

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/bootstrap"
)

// Component is the component word: logger name, metrics prefix, leader-election lease.
const Component = "workspace-controller"

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
)

// phaseCollector reports the number of workspaces by phase from the manager's cache at scrape time,
// so the gauge is never stale and needs no bookkeeping.
type phaseCollector struct {
	reader client.Reader
	desc   *prometheus.Desc
}

func newPhaseCollector(reader client.Reader) *phaseCollector {
	return &phaseCollector{reader: reader, desc: prometheus.NewDesc(
		bootstrap.MetricName(Component, "workspaces"), "WorkspaceDeployments by phase.", []string{"phase"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list workspacesv1.WorkspaceDeploymentList
	if err := c.reader.List(ctx, &list); err != nil {
		return
	}
	counts := map[workspacesv1.WorkspacePhase]int{}
	for _, p := range []workspacesv1.WorkspacePhase{
		workspacesv1.PhasePending, workspacesv1.PhaseInstallingPrerequisites, workspacesv1.PhaseWaiting,
		workspacesv1.PhaseDeploying, workspacesv1.PhaseRunning, workspacesv1.PhaseFailed, workspacesv1.PhaseDeleting,
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
	size := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: bootstrap.MetricsPrefix(Component),
		Name:      "child_clients",
		Help:      "Child-cluster clients held in the cache.",
	}, func() float64 { return float64(children.Size()) })
	return bootstrap.RegisterMetrics(gateDecisions, timeToRunning, newPhaseCollector(reader), size)
}

// observePhase records the creation-to-Running time when a workspace of its first generation
// reaches Running for the first time.
func observePhase(before, after *workspacesv1.WorkspaceDeployment, now time.Time) {
	if after.Status.Phase != workspacesv1.PhaseRunning || before.Status.Phase == workspacesv1.PhaseRunning {
		return
	}
	if before.Status.ObservedGeneration > 1 || after.Generation > 1 {
		return
	}
	timeToRunning.Observe(now.Sub(after.CreationTimestamp.Time).Seconds())
}
