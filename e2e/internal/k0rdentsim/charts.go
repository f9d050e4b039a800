package k0rdentsim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

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

// serviceValues merges a service's valuesFrom objects (in order; within one object, keys in sorted
// order, each holding a YAML values document) and then its inline values, as Sveltos does. Go
// templating of values (a KCM feature) is not simulated.
func serviceValues(ctx context.Context, c client.Reader, namespace string, svc k0rdentv1beta1.ServiceWithValues) (map[string]interface{}, error) {
	out := map[string]interface{}{}
	for i, vf := range svc.ValuesFrom {
		docs := map[string]string{}
		key := types.NamespacedName{Namespace: namespace, Name: vf.Name}
		switch vf.Kind {
		case k0rdentv1beta1.ValuesFromConfigMap:
			var cm corev1.ConfigMap
			if err := c.Get(ctx, key, &cm); err != nil {
				return nil, fmt.Errorf("valuesFrom[%d]: ConfigMap %s: %w", i, vf.Name, err)
			}
			docs = cm.Data
		case k0rdentv1beta1.ValuesFromSecret:
			var s corev1.Secret
			if err := c.Get(ctx, key, &s); err != nil {
				return nil, fmt.Errorf("valuesFrom[%d]: Secret %s: %w", i, vf.Name, err)
			}
			for k, v := range s.Data {
				docs[k] = string(v)
			}
		default:
			return nil, fmt.Errorf("valuesFrom[%d].kind: %q is not ConfigMap or Secret", i, vf.Kind)
		}
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			var m map[string]interface{}
			if err := yaml.Unmarshal([]byte(docs[k]), &m); err != nil {
				return nil, fmt.Errorf("valuesFrom[%d] %s key %s: %w", i, vf.Name, k, err)
			}
			out = chartutil.MergeTables(m, out)
		}
	}
	if strings.TrimSpace(svc.Values) != "" {
		var m map[string]interface{}
		if err := yaml.Unmarshal([]byte(svc.Values), &m); err != nil {
			return nil, fmt.Errorf("values: %w", err)
		}
		out = chartutil.MergeTables(m, out)
	}
	return out, nil
}
