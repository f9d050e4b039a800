package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/component"
)

// gpuSecondsCollector counts the GPU-seconds the namespaces' workspaces hold: at each scrape, each
// admission that holds GPUs (as gpus_admitted counts them) adds its GPUs times the time since the
// previous scrape, or since it was admitted, or since this process started, whichever is latest. The
// counter is what a platform team bills from (increase over a month, divided by 3600, is GPU-hours);
// it starts again at 0 with the process, which Prometheus' increase and rate take as a reset. An
// admission released between two scrapes loses the time since the earlier one: scrape often (at
// most a minute apart) for a bill within a minute's GPUs per workspace.
type gpuSecondsCollector struct {
	list  listWorkspaces
	now   func() time.Time
	start time.Time
	desc  *prometheus.Desc

	mu      sync.Mutex
	counted map[types.UID]time.Time // each holding workspace's admission counted up to
	total   map[gpuKey]float64
}

func newGPUSecondsCollector(list listWorkspaces, now func() time.Time) *gpuSecondsCollector {
	return &gpuSecondsCollector{list: list, now: now, start: now(),
		desc: prometheus.NewDesc(bootstrap.MetricName(component.Name, "gpu_seconds_total"),
			"GPU-seconds held by the namespace's admitted workspaces (GPUs admitted x seconds, counted at each scrape), by the admitted nodes' GPU model: the figure to bill GPU-hours from.",
			[]string{"namespace", "vendor", "model"}, nil),
		counted: map[types.UID]time.Time{}, total: map[gpuKey]float64{}}
}

// Describe implements prometheus.Collector.
func (c *gpuSecondsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *gpuSecondsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	items, err := c.list(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.add(items, c.now())
	}
	for k, v := range c.total {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, v, k.namespace, k.vendor, k.model)
	}
}

// add counts what the workspaces hold from their last count (or admission, or the process's start)
// to now; the caller holds mu.
func (c *gpuSecondsCollector) add(items []*workspacesv1.WorkspaceDeployment, now time.Time) {
	seen := make(map[types.UID]bool, len(c.counted))
	for _, w := range items {
		held := map[gpuKey]int64{}
		addAdmitted(held, w.Namespace, w.Status.Admission)
		if len(held) == 0 {
			continue
		}
		seen[w.UID] = true
		from, ok := c.counted[w.UID]
		if !ok {
			from = c.start
			if at := w.Status.Admission.AdmittedAt; at != nil && at.After(from) {
				from = at.Time
			}
		}
		c.counted[w.UID] = now
		secs := now.Sub(from).Seconds()
		if secs <= 0 {
			continue
		}
		for k, n := range held {
			c.total[k] += float64(n) * secs
		}
	}
	for uid := range c.counted {
		if !seen[uid] {
			delete(c.counted, uid) // released: a later admission counts from its own time
		}
	}
}
