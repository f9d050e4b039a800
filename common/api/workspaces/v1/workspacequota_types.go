package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GPUQuota caps the GPUs of one vendor, or of one model of that vendor, and says how many of them
// the namespace is guaranteed and may borrow within its cohort (see CohortLabel).
// +kubebuilder:validation:XValidation:rule="!has(self.guaranteed) || self.guaranteed <= self.limit",message="spec.gpus[].guaranteed may not exceed limit"
type GPUQuota struct {
	// Vendor of the GPUs counted.
	// +required
	Vendor GPUVendor `json:"vendor"`
	// Model, when set, counts only GPUs of this model: the model of each node a workspace's replicas
	// were admitted on (its exalsius.ai/gpu-model label, else its vendor's product label, as the
	// inventory reports it); without it every GPU of the vendor counts.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Model string `json:"model,omitempty"`
	// Limit is the most GPUs the namespace's workspaces may hold at once.
	// +required
	// +kubebuilder:validation:Minimum=0
	Limit int64 `json:"limit"`
	// Guaranteed is the share of limit the namespace may always use: it is admitted up to it whenever a
	// cluster has the GPUs free, and lends what it does not use to the other namespaces of its cohort.
	// Above it, the namespace's workspaces borrow, up to borrowingLimit, what the guarantees of the
	// cohort's other namespaces leave unused. Defaults to limit: nothing borrowed, as without a cohort.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Guaranteed *int64 `json:"guaranteed,omitempty"`
	// BorrowingLimit is the most GPUs the namespace may hold above guaranteed, borrowed from its cohort;
	// defaults to limit minus guaranteed. A namespace outside any cohort borrows nothing.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BorrowingLimit *int64 `json:"borrowingLimit,omitempty"`
}

// GuaranteedGPUs is the entry's guaranteed GPUs: spec.gpus[].guaranteed, else the limit.
func (e GPUQuota) GuaranteedGPUs() int64 {
	if e.Guaranteed != nil && *e.Guaranteed < e.Limit {
		return *e.Guaranteed
	}
	return e.Limit
}

// Ceiling is the most GPUs the entry lets the namespace hold: its limit, and at most guaranteed plus
// borrowingLimit.
func (e GPUQuota) Ceiling() int64 {
	g := e.GuaranteedGPUs()
	if e.BorrowingLimit != nil && *e.BorrowingLimit < e.Limit-g { // g <= limit: no overflow
		return g + *e.BorrowingLimit
	}
	return e.Limit
}

// WorkspaceQuotaSpec caps what the workspaces of a namespace hold across all clusters.
type WorkspaceQuotaSpec struct {
	// GPUs caps GPUs per vendor and, optionally, per model. Each entry applies on its own.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.vendor == x.vendor && (has(y.model) ? y.model : '') == (has(x.model) ? x.model : '')))",message="spec.gpus: each vendor and model appears at most once"
	GPUs []GPUQuota `json:"gpus,omitempty"`

	// Workspaces caps the number of admitted workspaces (with or without GPUs).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Workspaces *int32 `json:"workspaces,omitempty"`

	// TCPEndpoints caps the SSH and TCP endpoints (ports of the Gateway's shared pool) the namespace's
	// workspaces hold at once. They are given in the order of the workspaces' age, oldest first: an
	// endpoint past the cap gets no port and says why in its status.access entry (the workspace stays
	// Running). With several WorkspaceQuotas setting it, the lowest applies.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TCPEndpoints *int32 `json:"tcpEndpoints,omitempty"`

	// MaxPriority is the highest spec.priority a WorkspaceDeployment of the namespace may ask for.
	// Without any WorkspaceQuota setting it the maximum is 0; with several, the lowest applies.
	// +optional
	// +kubebuilder:validation:Minimum=-1000
	// +kubebuilder:validation:Maximum=1000
	MaxPriority *int32 `json:"maxPriority,omitempty"`

	// ReclaimGracePeriod is how long a workspace that borrows GPUs this namespace's guarantees cover is
	// told before it is stopped to give them back, when a workspace of this namespace needs them. A
	// duration such as `10m` (units h, m, s, ms). With several WorkspaceQuotas setting it, the
	// shortest applies.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	ReclaimGracePeriod *metav1.Duration `json:"reclaimGracePeriod,omitempty"`
}

// GPUUsage is what a namespace's workspaces hold of one GPUQuota entry.
type GPUUsage struct {
	// Vendor of the entry.
	Vendor GPUVendor `json:"vendor"`
	// Model of the entry, when it has one.
	// +optional
	Model string `json:"model,omitempty"`
	// Used is the GPUs the admitted workspaces hold.
	Used int64 `json:"used"`
	// Limit repeats the entry's limit.
	Limit int64 `json:"limit"`
	// Guaranteed repeats the entry's guarantee (its limit when spec.gpus[].guaranteed is not set).
	// +optional
	Guaranteed int64 `json:"guaranteed,omitempty"`
	// Borrowed is the GPUs the namespace holds above its guarantee, borrowed from its cohort.
	// +optional
	Borrowed int64 `json:"borrowed,omitempty"`
	// Lent is this namespace's share of the GPUs the cohort's other namespaces borrow: of its unused
	// guarantee, what covers their borrowing (shared among the lenders in proportion to what each
	// leaves unused).
	// +optional
	Lent int64 `json:"lent,omitempty"`
}

// WorkspaceQuotaStatus is what the namespace uses.
type WorkspaceQuotaStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Cohort is the cohort of the namespace (its workspaces.exalsius.ai/cohort label), when it has one.
	// +optional
	Cohort string `json:"cohort,omitempty"`
	// GPUs is the use of each spec.gpus entry, in the same order.
	// +optional
	// +listType=atomic
	GPUs []GPUUsage `json:"gpus,omitempty"`
	// Workspaces is the number of admitted workspaces in the namespace.
	// +optional
	Workspaces int32 `json:"workspaces,omitempty"`
	// TCPEndpoints is the number of SSH and TCP endpoints of the namespace's workspaces that hold a
	// port.
	// +optional
	TCPEndpoints int32 `json:"tcpEndpoints,omitempty"`

	// Waiting is the number of workspaces of the namespace waiting because of a WorkspaceQuota.
	// +optional
	Waiting int32 `json:"waiting,omitempty"`
	// Summary is the use in one line, for example `NVIDIA 3/4, workspaces 2/5`.
	// +optional
	Summary string `json:"summary,omitempty"`
}

// CohortLabel on a Namespace puts the namespace's WorkspaceQuotas into the cohort it names: the
// namespaces of a cohort lend one another the guaranteed GPUs they do not use (spec.gpus[].guaranteed
// and borrowingLimit). Namespaces are cluster-scoped, so only the platform team sets it.
const CohortLabel = "workspaces.exalsius.ai/cohort"

// WorkspaceQuota caps the GPUs (per vendor, optionally per model) and the number of workspaces the
// WorkspaceDeployments of its namespace hold across all clusters, and the priority they may ask for.
// A workspace that would go over it waits (reason QuotaExceeded); it is never failed. See
// docs/placement.md.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=exalsius,shortName=wsq
// +kubebuilder:printcolumn:name="Used",type=string,JSONPath=`.status.summary`
// +kubebuilder:printcolumn:name="Waiting",type=integer,JSONPath=`.status.waiting`
// +kubebuilder:printcolumn:name="MaxPriority",type=integer,JSONPath=`.spec.maxPriority`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WorkspaceQuota struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the cap.
	// +required
	Spec WorkspaceQuotaSpec `json:"spec"`

	// Status is the use.
	// +optional
	Status WorkspaceQuotaStatus `json:"status,omitempty"`
}

// WorkspaceQuotaList is a list of WorkspaceQuotas.
//
// +kubebuilder:object:root=true
type WorkspaceQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkspaceQuota `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &WorkspaceQuota{}, &WorkspaceQuotaList{})
}

// TCPEndpointLimit is the most SSH and TCP endpoints the namespace of the quotas may hold: the lowest
// spec.tcpEndpoints among them; false when none sets it.
func TCPEndpointLimit(quotas []WorkspaceQuota) (int32, bool) {
	var out int32
	found := false
	for i := range quotas {
		if m := quotas[i].Spec.TCPEndpoints; m != nil && (!found || *m < out) {
			out, found = *m, true
		}
	}
	return out, found
}

// MaxPriority is the highest spec.priority a WorkspaceDeployment may ask for in the namespace of the
// quotas: the lowest spec.maxPriority among them, 0 when none sets it.
func MaxPriority(quotas []WorkspaceQuota) int32 {
	var out int32
	found := false
	for i := range quotas {
		if m := quotas[i].Spec.MaxPriority; m != nil && (!found || *m < out) {
			out, found = *m, true
		}
	}
	return out
}
