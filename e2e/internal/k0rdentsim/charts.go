package k0rdentsim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// ChartAnnotation on a ServiceTemplate names the chart folder under the simulator's charts directory
// explicitly. Without it the chart is spec.helm.chartSpec.chart, else spec.helm.chartRef.name.
const ChartAnnotation = "k0rdent-sim.exalsius.ai/chart"

// chartName returns the local chart folder name a ServiceTemplate points at.
func chartName(t *k0rdentv1beta1.ServiceTemplate) (string, error) {
	if n := t.Annotations[ChartAnnotation]; n != "" {
		return n, nil
	}
	if t.Spec.Helm == nil {
		return "", fmt.Errorf("spec.helm: the simulator only deploys Helm ServiceTemplates")
	}
	switch {
	case t.Spec.Helm.ChartSpec != nil && t.Spec.Helm.ChartSpec.Chart != "":
		return t.Spec.Helm.ChartSpec.Chart, nil
	case t.Spec.Helm.ChartRef != nil && t.Spec.Helm.ChartRef.Name != "":
		return t.Spec.Helm.ChartRef.Name, nil
	}
	return "", fmt.Errorf("spec.helm: neither chartSpec.chart nor chartRef.name is set")
}

// loadChart resolves a ServiceTemplate to a chart folder under dir and loads it. A chartSpec.version
// that differs from the chart's own version is an error, as a missing chart version would be.
func loadChart(dir string, t *k0rdentv1beta1.ServiceTemplate) (*chart.Chart, error) {
	name, err := chartName(t)
	if err != nil {
		return nil, err
	}
	if name != filepath.Base(name) || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("chart %q: not a plain folder name", name)
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(filepath.Join(path, "Chart.yaml")); err != nil {
		return nil, fmt.Errorf("chart %q not found in %s", name, dir)
	}
	chrt, err := loader.LoadDir(path)
	if err != nil {
		return nil, fmt.Errorf("chart %q: %w", name, err)
	}
	if t.Spec.Helm != nil && t.Spec.Helm.ChartSpec != nil && t.Spec.Helm.ChartSpec.Version != "" &&
		t.Spec.Helm.ChartSpec.Version != chrt.Metadata.Version {
		return nil, fmt.Errorf("chart %q: version %s requested, %s available", name, t.Spec.Helm.ChartSpec.Version, chrt.Metadata.Version)
	}
	return chrt, nil
}
