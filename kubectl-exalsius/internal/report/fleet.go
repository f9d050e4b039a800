package report

import (
	"sort"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
)

// FleetRow is one kind of GPU on one cluster of a Colony.
type FleetRow struct {
	Colony    string `json:"colony"`
	Cluster   string `json:"cluster"`
	Reachable bool   `json:"reachable"`
	Vendor    string `json:"vendor"`
	Model     string `json:"model"`
	// Total, Allocated and Free are the inventory's (status.gpuInventory): allocatable GPUs, GPUs
	// requested by pods, and the difference (at least zero).
	Total     int64 `json:"total"`
	Allocated int64 `json:"allocated"`
	Free      int64 `json:"free"`
	// Admitted is the GPUs the GPU gate admitted workspaces on this cluster and model
	// (status.admission), whether or not their pods run yet.
	Admitted int64 `json:"admitted"`
	// Waiting is the GPUs the workspaces queued on this cluster ask for, of this vendor and matching
	// this model's selector; a waiter that takes any model of the vendor counts under each.
	Waiting int64 `json:"waiting"`
}

// Fleet reports the Colony's GPUs per cluster and model, with the admissions and waiters of
// workspaces (of any namespace given) on its clusters.
func Fleet(colony *infrav1.Colony, workspaces []workspacesv1.WorkspaceDeployment) []FleetRow {
	clusters := make([]string, 0, len(colony.Status.GPUInventory))
	for name := range colony.Status.GPUInventory {
		clusters = append(clusters, name)
	}
	sort.Strings(clusters)
	var rows []FleetRow
	for _, name := range clusters {
		inv := colony.Status.GPUInventory[name]
		key := colony.Namespace + "/" + name
		for _, o := range inv.Offerings {
			r := FleetRow{Colony: colony.Name, Cluster: name, Reachable: inv.Reachable, Vendor: o.Vendor, Model: o.Model,
				Total: o.Total, Allocated: o.Allocated, Free: max(o.Total-o.Allocated, 0)}
			for i := range workspaces {
				ws := &workspaces[i]
				r.Admitted += admittedOn(ws, key, o)
				if QueuedForGPUs(ws) && ClusterOf(ws) == key && wants(ws, o) {
					r.Waiting += RequestedGPUs(ws)
				}
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// admittedOn is the GPUs of ws's admission on cluster key that were counted on nodes of offering o.
func admittedOn(ws *workspacesv1.WorkspaceDeployment, key string, o infrav1.GPUOffering) int64 {
	a := ws.Status.Admission
	if a == nil || a.Cluster != key || a.GPUs == 0 || string(a.GPUVendor) != o.Vendor {
		return 0
	}
	if len(a.Nodes) == 0 {
		if a.GPUModel == o.Model {
			return a.GPUs
		}
		return 0
	}
	var n int64
	for _, node := range a.Nodes {
		if orDefault(node.GPUModel, a.GPUModel) == o.Model {
			n += int64(node.Replicas) * a.GPUsPerReplica
		}
	}
	return n
}

// modelLabels are the node labels an offering's model (and so its selector) comes from.
var modelLabels = []string{gpu.LabelGPUModel, gpu.LabelNVIDIAProduct, gpu.LabelAMDProductName}

// wants reports whether a waiter can take GPUs of offering o: same vendor, and every model label the
// waiter's node selector sets is the offering's selector's too, with the same value. A waiter that
// sets no model label takes any model of its vendor.
func wants(ws *workspacesv1.WorkspaceDeployment, o infrav1.GPUOffering) bool {
	r := ws.Status.ResolvedResources
	if r == nil || string(r.PerReplica.GPUVendor) != o.Vendor {
		return false
	}
	for _, k := range modelLabels {
		if w, ok := r.NodeSelector[k]; ok && o.Selector[k] != w {
			return false
		}
	}
	return true
}
