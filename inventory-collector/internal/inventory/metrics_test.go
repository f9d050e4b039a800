package inventory

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
)

// TestMetricNamesFollowPrometheusConventions gathers every exalsius_inventory_collector_ family and checks
// that only counters end in _total (a gauge named *_total reads as a counter to Prometheus tools).
func TestMetricNamesFollowPrometheusConventions(t *testing.T) {
	colony := types.NamespacedName{Namespace: "metrics-names", Name: "c"}
	recordCluster(colony, "cd", infrav1.ClusterGPUInventory{Reachable: true, Offerings: []infrav1.GPUOffering{
		{Vendor: "NVIDIA", Model: "H100", ResourceName: "nvidia.com/gpu", Total: 8, Allocated: 1},
	}})
	defer forgetCluster(colony, "cd")
	scrapeErrors.WithLabelValues(colony.Namespace, colony.Name, "cd", "Error").Add(0)
	connectErrors.WithLabelValues(colony.Namespace, "cd").Add(0)
	statusWrites.WithLabelValues("success").Add(0)

	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]dto.MetricType{}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "exalsius_inventory_collector_") {
			seen[f.GetName()] = f.GetType()
		}
	}
	for name, typ := range seen {
		if strings.HasSuffix(name, "_total") && typ != dto.MetricType_COUNTER {
			t.Errorf("%s is a %s: only counters may end in _total", name, typ)
		}
	}
	for _, want := range []string{"exalsius_inventory_collector_gpus_allocatable", "exalsius_inventory_collector_gpus_allocated", "exalsius_inventory_collector_cluster_reachable",
		"exalsius_inventory_collector_scrape_errors_total", "exalsius_inventory_collector_connect_errors_total", "exalsius_inventory_collector_watched_clusters", "exalsius_inventory_collector_status_writes_total"} {
		if _, ok := seen[want]; !ok {
			t.Errorf("%s is not exported (docs/operations.md lists it)", want)
		}
	}
}
