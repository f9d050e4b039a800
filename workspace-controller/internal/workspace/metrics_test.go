package workspace

import (
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
)

// metric returns the value of a gauge or counter, or the sample count of a histogram, whose labels
// include the given ones; -1 when absent.
func metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	must(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for k, v := range labels {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == k && lp.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			return value(m)
		}
	}
	return -1
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return -1
}

// TestMetrics: workspaces by namespace and phase, the GPUs admitted to the namespace, gate decisions, creation-to-Running and the child cache size.
func TestMetrics(t *testing.T) {
	admitBefore := metric(t, "exalsius_workspace_controller_gate_decisions_total", map[string]string{"outcome": "Admit"})
	runningBefore := metric(t, "exalsius_workspace_controller_creation_to_running_seconds", nil)
	ns, class, cd := gateFixture(t)
	model := name("metrics")
	node := gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	key := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	setServiceState(t, client.ObjectKeyFromObject(waitServiceSet(t, ws)), k0rdentv1beta1.ServiceStateDeployed, "")
	releasePod(t, ws, node, 0, false)
	waitPhase(t, key, workspacesv1.PhaseRunning, "")

	eventually(t, "metrics", func() error {
		if v := metric(t, "exalsius_workspace_controller_workspaces", map[string]string{"namespace": ns, "phase": "Running"}); v != 1 {
			return fmt.Errorf("workspaces{namespace=%s, phase=Running} = %v", ns, v)
		}
		if v := metric(t, "exalsius_workspace_controller_gpus_admitted", map[string]string{"namespace": ns, "vendor": "NVIDIA", "model": model}); v != 1 {
			return fmt.Errorf("gpus_admitted{namespace=%s} = %v", ns, v)
		}
		if v := metric(t, "exalsius_workspace_controller_gate_decisions_total", map[string]string{"outcome": "Admit"}); v < admitBefore+1 {
			return fmt.Errorf("gate_decisions_total{outcome=Admit} = %v, was %v", v, admitBefore)
		}
		if v := metric(t, "exalsius_workspace_controller_creation_to_running_seconds", nil); v < runningBefore+1 {
			return fmt.Errorf("creation_to_running_seconds count = %v, was %v", v, runningBefore)
		}
		if v := metric(t, "exalsius_workspace_controller_child_clients", nil); v < 1 {
			return fmt.Errorf("child_clients = %v", v)
		}
		return nil
	})
}
