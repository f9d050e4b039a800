package workspace

import (
	"context"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/gate"
)

// mergeResources merges the class's defaultResources with the workspace's overrides, field by field,
// and records the result with the GPU resource and node selector.
func (r *Reconciler) mergeResources(_ context.Context, s *scope) (stepResult, error) {
	s.resources = MergeResources(s.class.Spec.DefaultResources, s.ws.Spec.Resources)
	return next, nil
}

// MergeResources applies overrides on defaults field by field: a field the overrides leave out keeps
// the default.
func MergeResources(def workspacesv1.DefaultResources, ov *workspacesv1.ResourceOverrides) *workspacesv1.ResolvedResources {
	out := &workspacesv1.ResolvedResources{Replicas: 1}
	if def.Replicas != nil {
		out.Replicas = *def.Replicas
	}
	if def.PerReplica != nil {
		out.PerReplica = *def.PerReplica.DeepCopy()
	}
	if ov != nil {
		if ov.Replicas != nil {
			out.Replicas = *ov.Replicas
		}
		if p := ov.PerReplica; p != nil {
			pr := &out.PerReplica
			if p.CPU != nil {
				q := p.CPU.DeepCopy()
				pr.CPU = &q
			}
			if p.Memory != nil {
				q := p.Memory.DeepCopy()
				pr.Memory = &q
			}
			if p.Storage != nil {
				q := p.Storage.DeepCopy()
				pr.Storage = &q
			}
			if p.GPUCount != nil {
				c := *p.GPUCount
				pr.GPUCount = &c
			}
			if p.GPUVendor != "" {
				pr.GPUVendor = p.GPUVendor
			}
			if p.GPUType != "" {
				pr.GPUType = p.GPUType
			}
			if p.GPUNodeSelector != nil {
				pr.GPUNodeSelector = make(map[string]string, len(p.GPUNodeSelector))
				for k, v := range p.GPUNodeSelector {
					pr.GPUNodeSelector[k] = v
				}
			}
		}
	}
	if out.Replicas < 1 {
		out.Replicas = 1
	}
	if gate.GPUs(out) > 0 {
		if out.PerReplica.GPUVendor == "" {
			out.PerReplica.GPUVendor = workspacesv1.GPUVendorNVIDIA
		}
		if res, ok := gpu.ResourceNameFor(out.PerReplica.GPUVendor); ok {
			out.GPUResourceName = string(res)
		}
		out.NodeSelector = gate.Selector(out)
	}
	return out
}
