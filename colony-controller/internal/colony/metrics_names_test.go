package colony

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricNames pins the names docs/operations.md lists: they are what dashboards and alerts query.
func TestMetricNames(t *testing.T) {
	want := map[prometheus.Collector]string{
		coloniesGauge:      "exalsius_colony_controller_colonies",
		clustersGauge:      "exalsius_colony_controller_clusters",
		readyClustersGauge: "exalsius_colony_controller_clusters_ready",
		reconcileErrors:    "exalsius_colony_controller_reconcile_errors_total",
	}
	for c, name := range want {
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		if d := (<-ch).String(); !strings.Contains(d, `fqName: "`+name+`"`) {
			t.Errorf("%s, want the name %s", d, name)
		}
	}
}
