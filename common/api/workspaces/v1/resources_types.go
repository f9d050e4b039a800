package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
)

// GPUVendor names a GPU vendor.
// +kubebuilder:validation:Enum=NVIDIA;AMD
type GPUVendor string

const (
	// GPUVendorNVIDIA counts GPUs through the nvidia.com/gpu resource.
	GPUVendorNVIDIA GPUVendor = "NVIDIA"
	// GPUVendorAMD counts GPUs through the amd.com/gpu resource.
	GPUVendorAMD GPUVendor = "AMD"
)

// PerReplicaResources are the resources of one replica of a workspace.
type PerReplicaResources struct {
	// CPU requested by each replica, for example `2` or `500m`.
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// Memory requested by each replica, for example `8Gi`.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`

	// Storage requested by each replica (persistent volume size), for example `50Gi`.
	// +optional
	Storage *resource.Quantity `json:"storage,omitempty"`

	// GPUCount is the number of GPUs each replica needs, all from one node.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	GPUCount *int32 `json:"gpuCount,omitempty"`

	// GPUVendor picks the GPU resource: NVIDIA (nvidia.com/gpu) or AMD (amd.com/gpu).
	// +optional
	GPUVendor GPUVendor `json:"gpuVendor,omitempty"`

	// GPUType is the GPU model, matched against the node label exalsius.ai/gpu-model. Only a
	// WorkspaceDeployment may set it.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	GPUType string `json:"gpuType,omitempty"`

	// GPUNodeSelector is joined with the gpuType selector to pick GPU nodes, for example
	// `{nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}`. Only a WorkspaceDeployment may set it.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	GPUNodeSelector map[string]string `json:"gpuNodeSelector,omitempty"`
}

// DefaultResources are a WorkspaceClass's resources for each workspace made from it.
// +kubebuilder:validation:XValidation:rule="!has(self.perReplica) || !has(self.perReplica.gpuType)",message="perReplica.gpuType: a WorkspaceClass may not set gpuType; a WorkspaceDeployment picks it",fieldPath=.perReplica.gpuType
// +kubebuilder:validation:XValidation:rule="!has(self.perReplica) || !has(self.perReplica.gpuNodeSelector)",message="perReplica.gpuNodeSelector: a WorkspaceClass may not set gpuNodeSelector; a WorkspaceDeployment picks it",fieldPath=.perReplica.gpuNodeSelector
type DefaultResources struct {
	// Replicas is the number of replicas.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Replicas *int32 `json:"replicas,omitempty"`

	// PerReplica are the resources of each replica.
	// +optional
	PerReplica *PerReplicaResources `json:"perReplica,omitempty"`
}

// ResourceOverrides are a WorkspaceDeployment's changes to its class's defaultResources, applied field
// by field: a field left out keeps the class's value.
// +kubebuilder:validation:XValidation:rule="!has(self.perReplica) || !(has(self.perReplica.gpuType) || has(self.perReplica.gpuNodeSelector)) || (has(self.perReplica.gpuCount) && self.perReplica.gpuCount > 0)",message="perReplica.gpuType and perReplica.gpuNodeSelector need perReplica.gpuCount > 0",fieldPath=.perReplica
type ResourceOverrides struct {
	// Replicas overrides the class's replicas.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Replicas *int32 `json:"replicas,omitempty"`

	// PerReplica overrides the class's per-replica resources, field by field.
	// +optional
	PerReplica *PerReplicaResources `json:"perReplica,omitempty"`
}
