package colony

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	"github.com/exalsius/exalsius-operator/common/bootstrap"
)

// Error stages of the reconcile errors counter.
const (
	stageApply      = "apply"
	stageDelete     = "delete"
	stageKubeconfig = "kubeconfig"
	stageStatus     = "status"
	stageFinalizer  = "finalizer"
	stageRead       = "read"
)

var (
	coloniesGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: bootstrap.MetricName(Component, "colonies"),
		Help: "Number of Colonies by phase.",
	}, []string{"phase"})
	clustersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: bootstrap.MetricName(Component, "clusters"),
		Help: "Number of clusters (entries) of a Colony.",
	}, []string{"namespace", "colony"})
	readyClustersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: bootstrap.MetricName(Component, "clusters_ready"),
		Help: "Number of ready clusters of a Colony (ClusterDeployment up and kubeconfig aggregated).",
	}, []string{"namespace", "colony"})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: bootstrap.MetricName(Component, "reconcile_errors_total"),
		Help: "Errors met while reconciling Colonies, by stage (read, apply, delete, kubeconfig, status, finalizer).",
	}, []string{"stage"})
)

func init() {
	if err := bootstrap.RegisterMetrics(coloniesGauge, clustersGauge, readyClustersGauge, reconcileErrors); err != nil {
		panic(fmt.Sprintf("registering the %s metrics: %v", Component, err))
	}
	for _, p := range allPhases {
		coloniesGauge.WithLabelValues(string(p)).Set(0)
	}
}

var allPhases = []infrav1.ColonyPhase{
	infrav1.ColonyPhaseProvisioning, infrav1.ColonyPhaseReady, infrav1.ColonyPhaseDegraded, infrav1.ColonyPhaseDeleting,
}

// phaseTracker counts Colonies by phase for the colonies gauge. The metrics are process-wide, like
// controller-runtime's own; one tracker serves every reconciler of the process.
type phaseTracker struct {
	mu     sync.Mutex
	phases map[types.NamespacedName]infrav1.ColonyPhase
}

var tracker = &phaseTracker{phases: map[types.NamespacedName]infrav1.ColonyPhase{}}

// observe records a Colony's phase and cluster counts.
func (t *phaseTracker) observe(key types.NamespacedName, st infrav1.ColonyStatus) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.phases[key] = st.Phase
	clustersGauge.WithLabelValues(key.Namespace, key.Name).Set(float64(st.TotalClusters))
	readyClustersGauge.WithLabelValues(key.Namespace, key.Name).Set(float64(st.ReadyClusters))
	t.publish()
}

// forget drops a Colony that is gone.
func (t *phaseTracker) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.phases, key)
	clustersGauge.DeleteLabelValues(key.Namespace, key.Name)
	readyClustersGauge.DeleteLabelValues(key.Namespace, key.Name)
	t.publish()
}

func (t *phaseTracker) publish() {
	counts := map[infrav1.ColonyPhase]int{}
	for _, p := range t.phases {
		counts[p]++
	}
	for _, p := range allPhases {
		coloniesGauge.WithLabelValues(string(p)).Set(float64(counts[p]))
	}
}

// countError increments the reconcile errors counter for stage.
func countError(stage string) {
	reconcileErrors.WithLabelValues(stage).Inc()
}
