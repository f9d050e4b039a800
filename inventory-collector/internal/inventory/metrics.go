package inventory

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	"github.com/exalsius/exalsius-operator/common/bootstrap"
)

var (
	gpusTotal = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: bootstrap.MetricName(Component, "gpus_allocatable"),
		Help: "Allocatable GPUs on schedulable, Ready nodes of a child cluster, by vendor and model (last seen while unreachable).",
	}, []string{"namespace", "colony", "cluster", "vendor", "model"})
	gpusAllocated = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: bootstrap.MetricName(Component, "gpus_allocated"),
		Help: "GPUs requested by non-terminal pods on those nodes, by vendor and model.",
	}, []string{"namespace", "colony", "cluster", "vendor", "model"})
	clusterReachable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: bootstrap.MetricName(Component, "cluster_reachable"),
		Help: "1 while the child cluster's API server answers through its kubeconfig Secret, else 0.",
	}, []string{"namespace", "colony", "cluster"})
	scrapeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: bootstrap.MetricName(Component, "scrape_errors_total"),
		Help: "Inventory collections of a child cluster that failed, by reason (KubeconfigMissing, KubeconfigInvalid, ConnectFailed, Unhealthy, Error).",
	}, []string{"namespace", "colony", "cluster", "reason"})
	connectErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: bootstrap.MetricName(Component, "connect_errors_total"),
		Help: "Failed connects (list and watch of Nodes and Pods) to a child cluster.",
	}, []string{"namespace", "cluster"})
	watchedClusters = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: bootstrap.MetricName(Component, "watched_clusters"),
		Help: "Child clusters this replica (shard) watches.",
	})
	statusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: bootstrap.MetricName(Component, "status_writes_total"),
		Help: "Server-side applies of Colony status.gpuInventory, by result (success, conflict, error).",
	}, []string{"result"})
)

func init() {
	metrics.Registry.MustRegister(gpusTotal, gpusAllocated, clusterReachable, scrapeErrors, connectErrors, watchedClusters, statusWrites)
}

// ObserveConnect counts a failed connect; pass it as childcluster.Options.OnConnect (wrapped).
func ObserveConnect(cd types.NamespacedName, err error) {
	if err != nil {
		connectErrors.WithLabelValues(cd.Namespace, cd.Name).Inc()
	}
}

// recordCluster sets the gauges of one child cluster from its inventory entry.
func recordCluster(colony types.NamespacedName, cluster string, e infrav1.ClusterGPUInventory) {
	labels := prometheus.Labels{"namespace": colony.Namespace, "colony": colony.Name, "cluster": cluster}
	gpusTotal.DeletePartialMatch(labels)
	gpusAllocated.DeletePartialMatch(labels)
	type vm struct{ vendor, model string }
	total, allocated := map[vm]int64{}, map[vm]int64{}
	for _, o := range e.Offerings {
		k := vm{o.Vendor, o.Model}
		total[k] += o.Total
		allocated[k] += o.Allocated
	}
	for k, v := range total {
		gpusTotal.WithLabelValues(colony.Namespace, colony.Name, cluster, k.vendor, k.model).Set(float64(v))
		gpusAllocated.WithLabelValues(colony.Namespace, colony.Name, cluster, k.vendor, k.model).Set(float64(allocated[k]))
	}
	reach := 0.0
	if e.Reachable {
		reach = 1
	}
	clusterReachable.WithLabelValues(colony.Namespace, colony.Name, cluster).Set(reach)
}

// forgetCluster removes every series of one child cluster.
func forgetCluster(colony types.NamespacedName, cluster string) {
	labels := prometheus.Labels{"namespace": colony.Namespace, "colony": colony.Name, "cluster": cluster}
	gpusTotal.DeletePartialMatch(labels)
	gpusAllocated.DeletePartialMatch(labels)
	clusterReachable.DeletePartialMatch(labels)
	scrapeErrors.DeletePartialMatch(labels)
}

// forgetColony removes every series of a Colony.
func forgetColony(colony types.NamespacedName) {
	labels := prometheus.Labels{"namespace": colony.Namespace, "colony": colony.Name}
	gpusTotal.DeletePartialMatch(labels)
	gpusAllocated.DeletePartialMatch(labels)
	clusterReachable.DeletePartialMatch(labels)
	scrapeErrors.DeletePartialMatch(labels)
}
