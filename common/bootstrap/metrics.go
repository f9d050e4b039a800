package bootstrap

import (
	"errors"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MetricsNamespace is the Prometheus namespace every metric of the project is named in (the
// controller-runtime and client-go metrics the manager serves keep their own names).
const MetricsNamespace = "exalsius"

// MetricsPrefix is the prefix of a component's Prometheus metrics: the namespace, then the component
// word with '-' replaced by '_' (workspace-controller -> exalsius_workspace_controller).
func MetricsPrefix(component string) string {
	return MetricsNamespace + "_" + strings.ReplaceAll(component, "-", "_")
}

// MetricName returns MetricsPrefix(component) + "_" + name: the one way a component names its
// metrics (exalsius_workspace_controller_<name>). Give it as the Name of the collector options (or of
// a Desc), with no Namespace or Subsystem.
func MetricName(component, name string) string {
	return MetricsPrefix(component) + "_" + name
}

// RegisterMetrics registers collectors with controller-runtime's registry, which the manager's
// metrics server serves. Registering a collector that is already there is not an error, so
// components and tests may call it more than once.
func RegisterMetrics(collectors ...prometheus.Collector) error {
	var errs []error
	for _, c := range collectors {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				continue
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
