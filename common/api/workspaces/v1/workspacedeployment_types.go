package v1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ClusterDeploymentRef names the k0rdent ClusterDeployment a workspace runs on.
type ClusterDeploymentRef struct {
	// Name of the ClusterDeployment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Namespace of the ClusterDeployment; the workspace's own namespace when empty. Another namespace
	// must allow it (see docs/TENANCY.md).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// ColonyRef names a Colony.
type ColonyRef struct {
	// Name of the Colony.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace of the Colony; the workspace's own namespace when empty. Another namespace must allow
	// the workspace's, as for clusterDeploymentRef.namespace (see docs/TENANCY.md): a platform team's
	// fleet, shared by many teams.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// WorkspaceDeploymentSpec is a user's request for one workspace. It names where the workspace runs in
// exactly one of three ways: one ClusterDeployment (clusterDeploymentRef), any cluster of a Colony
// (colonyRef), or any ClusterDeployment of a namespace whose labels match (clusterSelector); each may
// name another namespace that allows the workspace's. With
// colonyRef or clusterSelector the controller places the workspace on a cluster that can hold it now
// and records the choice in status.placement (see docs/placement.md).
// +kubebuilder:validation:XValidation:rule="[has(self.clusterDeploymentRef), has(self.colonyRef), has(self.clusterSelector)].filter(x, x).size() == 1",message="exactly one of spec.clusterDeploymentRef, spec.colonyRef and spec.clusterSelector must be set"
// +kubebuilder:validation:XValidation:rule="has(self.clusterDeploymentRef) == has(oldSelf.clusterDeploymentRef) && has(self.colonyRef) == has(oldSelf.colonyRef) && has(self.clusterSelector) == has(oldSelf.clusterSelector)",message="spec.clusterDeploymentRef, spec.colonyRef and spec.clusterSelector are immutable: which one is set cannot change"
// +kubebuilder:validation:XValidation:rule="!has(self.clusterSelectorNamespace) || has(self.clusterSelector)",message="spec.clusterSelectorNamespace is only used with spec.clusterSelector"
// +kubebuilder:validation:XValidation:rule="has(self.clusterSelectorNamespace) == has(oldSelf.clusterSelectorNamespace)",message="spec.clusterSelectorNamespace is immutable"
type WorkspaceDeploymentSpec struct {
	// WorkspaceClassRef is the name of the WorkspaceClass. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workspaceClassRef is immutable: delete the WorkspaceDeployment and create it again with the new class (its volumes go with it), or create another WorkspaceDeployment beside it; stop and start keep the class"
	WorkspaceClassRef string `json:"workspaceClassRef"`

	// ClusterDeploymentRef is the ClusterDeployment the workspace runs on. Immutable. Exactly one of
	// clusterDeploymentRef, colonyRef and clusterSelector is set.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterDeploymentRef is immutable: delete the WorkspaceDeployment and create it again on the other cluster"
	ClusterDeploymentRef ClusterDeploymentRef `json:"clusterDeploymentRef,omitzero"`

	// ColonyRef places the workspace on one of the Colony's clusters (status.clusterDeploymentRefs of
	// the Colony). Immutable.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="colonyRef is immutable: delete the WorkspaceDeployment and create it again with the other Colony"
	ColonyRef *ColonyRef `json:"colonyRef,omitempty"`

	// ClusterSelector places the workspace on one of the ClusterDeployments whose labels match, in its
	// namespace or in clusterSelectorNamespace. Immutable.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterSelector is immutable: delete the WorkspaceDeployment and create it again with the other selector"
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// ClusterSelectorNamespace is the namespace whose ClusterDeployments clusterSelector selects; the
	// workspace's own when empty. Another namespace must allow the workspace's, as for
	// clusterDeploymentRef.namespace (see docs/TENANCY.md). Only with clusterSelector. Immutable.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterSelectorNamespace is immutable: delete the WorkspaceDeployment and create it again with the other namespace"
	ClusterSelectorNamespace string `json:"clusterSelectorNamespace,omitempty"`

	// Priority orders the workspaces waiting for GPUs on a cluster and for the namespace's quota:
	// higher first, then older first. A namespace's WorkspaceQuotas cap it (spec.maxPriority, 0 when
	// none sets it); the webhook refuses a higher value and the controller counts at most the cap. A
	// running workspace is never preempted.
	// +optional
	// +kubebuilder:validation:Minimum=-1000
	// +kubebuilder:validation:Maximum=1000
	Priority int32 `json:"priority,omitempty"`

	// PreemptionPolicy says whether the workspace's GPUs may be taken back. Reclaimable (the default)
	// lets it borrow GPUs above its namespace's guarantee (WorkspaceQuota spec.gpus[].guaranteed);
	// Never keeps it within the guarantee, never borrowing.
	// +optional
	// +kubebuilder:validation:Enum=Reclaimable;Never
	PreemptionPolicy PreemptionPolicy `json:"preemptionPolicy,omitempty"`

	// Resources override the class's defaultResources, field by field.
	// +optional
	Resources *ResourceOverrides `json:"resources,omitempty"`

	// Values are Helm values, deep-merged over the class's defaultValues.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Values *apiextensionsv1.JSON `json:"values,omitempty"`

	// ValuesFrom are Secrets and ConfigMaps in the workspace's namespace holding Helm values, merged
	// in order over spec.values (a later source wins). Every key of a source holds a YAML document of
	// values; keys are merged in sorted order. Values read from a Secret reach the release only through
	// a Secret, never inline in the ServiceSet. A change of a source rolls the release out. The
	// operator reads the sources with its own rights, so the webhook admits a source only when the
	// user who creates the workspace (or whose update adds the source) may get it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ValuesFrom []ValuesFromSource `json:"valuesFrom,omitempty"`

	// Suspend stops reconciling the workspace (it keeps running as it is). It never blocks deletion.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Stopped scales the workspace's release to zero replicas and frees its GPUs for other workspaces;
	// its volumes, its release and its URLs are kept (phase Stopped). Setting it back to false passes
	// the GPU gate again (Waiting while the GPUs are taken) and brings the workspace back with its
	// data. See docs/stop-start.md.
	// +optional
	Stopped bool `json:"stopped,omitempty"`

	// StopAfter stops the workspace (the controller sets spec.stopped to true) once it has held its
	// admission (status.admission: its GPUs) for this long without a spec change, counted from the later
	// of status.lastSpecChange and status.admission.admittedAt. A workspace without an admission
	// (Waiting for GPUs, Pending, installing its prerequisites) is never stopped by it; its clock starts
	// when the GPU gate admits it. Starting the workspace again is a spec change, so the clock restarts.
	// A positive duration such as `30m` or `8h` (units h, m, s, ms).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	StopAfter *metav1.Duration `json:"stopAfter,omitempty"`
}

// ValuesSourceKind is the kind of a valuesFrom source.
// +kubebuilder:validation:Enum=Secret;ConfigMap
type ValuesSourceKind string

const (
	// ValuesSourceSecret reads values from a Secret.
	ValuesSourceSecret ValuesSourceKind = "Secret"
	// ValuesSourceConfigMap reads values from a ConfigMap.
	ValuesSourceConfigMap ValuesSourceKind = "ConfigMap"
)

// ValuesFromSource names a Secret or ConfigMap, in the workspace's namespace, holding Helm values.
type ValuesFromSource struct {
	// Kind is Secret or ConfigMap.
	// +required
	Kind ValuesSourceKind `json:"kind"`

	// Name of the Secret or ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Optional sources may be missing; a missing source that is not optional keeps the workspace
	// Pending until it exists.
	// +optional
	Optional bool `json:"optional,omitempty"`
}

// WorkspacePhase summarises a workspace in one word.
// +kubebuilder:validation:Enum=Pending;InstallingPrerequisites;Waiting;Deploying;Running;Stopped;Failed;Deleting
type WorkspacePhase string

const (
	// PhasePending means resolving the class and the cluster, or the cluster cannot be reached yet.
	PhasePending WorkspacePhase = "Pending"
	// PhaseInstallingPrerequisites means waiting for the prerequisites to be deployed.
	PhaseInstallingPrerequisites WorkspacePhase = "InstallingPrerequisites"
	// PhaseWaiting means the requested GPU kind exists but none is free, no candidate cluster can
	// hold the workspace now, or the namespace's WorkspaceQuota is used up; retried, highest priority
	// and oldest first.
	PhaseWaiting WorkspacePhase = "Waiting"
	// PhaseDeploying means the ServiceSet is made and the release is being installed.
	PhaseDeploying WorkspacePhase = "Deploying"
	// PhaseRunning means the release is deployed.
	PhaseRunning WorkspacePhase = "Running"
	// PhaseStopped means spec.stopped is set; the release runs no replica and holds no GPU, its
	// volumes and URLs are kept.
	PhaseStopped WorkspacePhase = "Stopped"
	// PhaseFailed means a human must act; the Ready condition and failureContext say why.
	PhaseFailed WorkspacePhase = "Failed"
	// PhaseDeleting means the release is being uninstalled.
	PhaseDeleting WorkspacePhase = "Deleting"
)

// ResolvedResources are a workspace's resources after the class defaults and the overrides are merged.
type ResolvedResources struct {
	// Replicas is the number of replicas.
	Replicas int32 `json:"replicas"`
	// PerReplica are the resources of each replica.
	// +optional
	PerReplica PerReplicaResources `json:"perReplica,omitempty"`
	// GPUResourceName is the extended resource the GPUs are counted in, when gpuCount > 0.
	// +optional
	GPUResourceName string `json:"gpuResourceName,omitempty"`
	// NodeSelector is the selector the GPU gate checked, passed to the chart.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// PrerequisiteStatus is the state of one prerequisite.
type PrerequisiteStatus struct {
	// ServiceTemplate names the prerequisite.
	ServiceTemplate string `json:"serviceTemplate"`
	// Namespace on the child.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// ServiceSetName is the shared ServiceSet that installs it; empty when the Colony provides it.
	// +optional
	ServiceSetName string `json:"serviceSetName,omitempty"`
	// ProvidedByCluster is true when a service already on the ClusterDeployment satisfies it.
	// +optional
	ProvidedByCluster bool `json:"providedByCluster,omitempty"`
	// State is the k0rdent service state: Deployed, Provisioning, Failed, Pending, Deleting or Deleted.
	// +optional
	State string `json:"state,omitempty"`
	// Message says what is wrong, when anything is.
	// +optional
	Message string `json:"message,omitempty"`
}

// Feasibility says whether the cluster can hold the workspace.
type Feasibility struct {
	// Feasible is true when every replica fits on the cluster now.
	Feasible bool `json:"feasible"`
	// Reason is a one-word cause, matching the Feasible condition's reason.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains the decision with the numbers that drove it.
	// +optional
	Message string `json:"message,omitempty"`
	// Selector is the GPU node selector checked.
	// +optional
	Selector map[string]string `json:"selector,omitempty"`
	// MatchingNodes is the number of schedulable nodes that carry the selector and the GPU resource.
	// +optional
	MatchingNodes int32 `json:"matchingNodes,omitempty"`
	// FreeGPUs is the free GPUs on those nodes, after the reservations of other admitted workspaces.
	// +optional
	FreeGPUs int64 `json:"freeGPUs,omitempty"`
	// FittingReplicas is how many replicas fit, each on one node.
	// +optional
	FittingReplicas int32 `json:"fittingReplicas,omitempty"`
}

// AdmittedNode is one node the GPU gate counted replicas of a workspace on.
type AdmittedNode struct {
	// Name of the node on the child cluster.
	Name string `json:"name"`
	// Replicas counted on the node.
	Replicas int32 `json:"replicas"`
	// Hostname is the node's kubernetes.io/hostname label, which pins the replicas to the node when
	// they were all counted on it.
	// +optional
	Hostname string `json:"hostname,omitempty"`
	// GPUModel is the node's GPU model when the replicas were counted on it: its exalsius.ai/gpu-model
	// label, else its vendor's product label (nvidia.com/gpu.product, amd.com/gpu.product-name). A
	// WorkspaceQuota's per-model limit counts the replicas on each node by this model.
	// +optional
	GPUModel string `json:"gpuModel,omitempty"`
}

// Admission records what the GPU gate granted a workspace. It is written before the workspace's
// ServiceSet is made, and the GPUs stay reserved for the workspace while it is admitted and not
// Failed, or while its ServiceSet exists, also across controller restarts.
type Admission struct {
	// Cluster is the ClusterDeployment (namespace/name) the admission is for.
	Cluster string `json:"cluster"`
	// ClusterUID is the UID of the ClusterDeployment the admission was granted on. A ClusterDeployment
	// deleted and re-created under the same name has another UID: its child is a new cluster, and the
	// workspace is gated again there. Empty on an admission recorded before the field existed; the
	// controller fills it in without gating again.
	// +optional
	ClusterUID types.UID `json:"clusterUID,omitempty"`
	// ClusterIdentity is the identity of the child cluster the admission was granted on: the UID of
	// its kube-system namespace. Two ClusterDeployments that reach one cluster share it, and the GPU
	// gate counts their admissions together. Empty when the child's identity could not be read.
	// +optional
	ClusterIdentity types.UID `json:"clusterIdentity,omitempty"`
	// GPUResourceName is the extended resource the GPUs are counted in; empty without GPUs.
	// +optional
	GPUResourceName string `json:"gpuResourceName,omitempty"`
	// GPUVendor is the vendor of the GPUs.
	// +optional
	GPUVendor GPUVendor `json:"gpuVendor,omitempty"`
	// GPUModel is the GPU model of the nodes the replicas were counted on (see nodes[].gpuModel), when
	// they all share one. A WorkspaceQuota's per-model limit counts nodes[].gpuModel, and this model
	// for an admission recorded before nodes carried theirs.
	// +optional
	GPUModel string `json:"gpuModel,omitempty"`
	// GPUsPerReplica is the GPUs each replica holds, all on one node.
	// +optional
	GPUsPerReplica int64 `json:"gpusPerReplica,omitempty"`
	// Replicas is the number of replicas admitted.
	Replicas int32 `json:"replicas"`
	// GPUs is the total admitted: gpusPerReplica x replicas. The release namespace's ResourceQuota caps
	// the namespace's GPU requests at this number.
	// +optional
	GPUs int64 `json:"gpus,omitempty"`
	// Selector is the node selector the GPUs were counted under.
	// +optional
	Selector map[string]string `json:"selector,omitempty"`
	// Nodes are the nodes the replicas were counted on.
	// +optional
	// +listType=atomic
	Nodes []AdmittedNode `json:"nodes,omitempty"`
	// AdmittedAt is when the gate admitted the workspace.
	// +optional
	AdmittedAt *metav1.Time `json:"admittedAt,omitempty"`
	// BorrowedGPUs is how many of the admitted GPUs are borrowed: above the guarantee of the
	// namespace's WorkspaceQuota, from the unused guarantees of its cohort (see WorkspaceQuota).
	// +optional
	BorrowedGPUs int64 `json:"borrowedGPUs,omitempty"`
}

// PreemptionPolicy says whether a workspace's GPUs may be taken back.
type PreemptionPolicy string

const (
	// PreemptionReclaimable lets the workspace borrow GPUs of its cohort.
	PreemptionReclaimable PreemptionPolicy = "Reclaimable"
	// PreemptionNever keeps the workspace within its namespace's guarantee.
	PreemptionNever PreemptionPolicy = "Never"
)

// Placement records the cluster a workspace was placed on.
type Placement struct {
	// Cluster is the ClusterDeployment's name.
	Cluster string `json:"cluster"`
	// Namespace is the ClusterDeployment's namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Reason is how the cluster was chosen: Named (spec.clusterDeploymentRef), OnlyFit (the one
	// candidate that could hold the workspace now) or TightestFit (the candidate with the fewest
	// matching GPUs left free, then the first by name).
	Reason string `json:"reason"`
	// Message lists the candidates the choice was made among.
	// +optional
	Message string `json:"message,omitempty"`
	// PlacedAt is when the choice was made.
	// +optional
	PlacedAt *metav1.Time `json:"placedAt,omitempty"`
}

// AccessStatus is one URL of a workspace.
type AccessStatus struct {
	// Name of the class's endpoint.
	Name string `json:"name"`
	// Protocol of the endpoint.
	Protocol EndpointProtocol `json:"protocol"`
	// URL users open.
	// +optional
	URL string `json:"url,omitempty"`
	// Ready is true when the route serves.
	Ready bool `json:"ready"`
	// Message says why the route is not ready.
	// +optional
	Message string `json:"message,omitempty"`
}

// FailureContext records what the workspace looked like when it failed.
type FailureContext struct {
	// PhaseWhenFailed is the phase the workspace was in.
	// +optional
	PhaseWhenFailed WorkspacePhase `json:"phaseWhenFailed,omitempty"`
	// Reason is the Ready condition's reason.
	// +optional
	Reason string `json:"reason,omitempty"`
	// ServiceSetStatus is a snapshot of the ServiceSet's status.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	ServiceSetStatus *apiextensionsv1.JSON `json:"serviceSetStatus,omitempty"`
	// RecentEvents are the last events about the workspace and its ServiceSet.
	// +optional
	// +listType=atomic
	RecentEvents []string `json:"recentEvents,omitempty"`
}

// WorkspaceDeploymentStatus is the observed state of a workspace.
type WorkspaceDeploymentStatus struct {
	// Phase summarises the workspace.
	// +optional
	Phase WorkspacePhase `json:"phase,omitempty"`

	// Conditions: Ready, ClassResolved, ClusterDeploymentResolved, Feasible, PrerequisitesMet,
	// ResourcesInjected, HelmReleaseReady, RoutesReady.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ServiceSetName is the k0rdent ServiceSet that installs the workspace.
	// +optional
	ServiceSetName string `json:"serviceSetName,omitempty"`

	// ReleaseName is the Helm release on the child, in namespace releaseNamespace.
	// +optional
	ReleaseName string `json:"releaseName,omitempty"`

	// ReleaseNamespace is the release's namespace on the child, recorded when the ServiceSet is made:
	// ws-<name> for a workspace on a cluster of its own namespace, wst-<name>-<qualifier> for one on a
	// cluster of another namespace (the qualifier is 5 hex characters of the SHA-256 of the
	// workspace's namespace), so that two namespaces can each run a workspace of the same name on one
	// shared cluster.
	// +optional
	ReleaseNamespace string `json:"releaseNamespace,omitempty"`

	// ResolvedResources are the merged resources.
	// +optional
	ResolvedResources *ResolvedResources `json:"resolvedResources,omitempty"`

	// Prerequisites are the states of the class's prerequisites.
	// +optional
	// +listType=atomic
	Prerequisites []PrerequisiteStatus `json:"prerequisites,omitempty"`

	// Feasibility is the last GPU gate's decision.
	// +optional
	Feasibility *Feasibility `json:"feasibility,omitempty"`

	// Placement is the cluster the workspace runs on and why. Set once, when the workspace is placed
	// (or resolved, with clusterDeploymentRef), and never changed: a workspace never moves.
	// +optional
	Placement *Placement `json:"placement,omitempty"`

	// Admission is what the GPU gate granted, while the workspace holds it.
	// +optional
	Admission *Admission `json:"admission,omitempty"`

	// Access are the workspace's URLs.
	// +optional
	// +listType=atomic
	Access []AccessStatus `json:"access,omitempty"`

	// FailureContext is set while the workspace is Failed.
	// +optional
	FailureContext *FailureContext `json:"failureContext,omitempty"`

	// Message is a human summary of the current state.
	// +optional
	Message string `json:"message,omitempty"`

	// LastSpecChange is the spec generation the controller last saw change, and when it first saw it;
	// spec.stopAfter counts from it, or from the admission when that came later.
	// +optional
	LastSpecChange *SpecChange `json:"lastSpecChange,omitempty"`

	// LastHandledRetryAt is the value of the annotation workspaces.exalsius.ai/retry-requested-at
	// the controller last handled. The annotation asks a retry of a Failed workspace while its value
	// differs from this one.
	// +optional
	LastHandledRetryAt string `json:"lastHandledRetryAt,omitempty"`

	// Reclaim is set on a workspace that borrows GPUs from its cohort while a workspace of a namespace
	// within its guarantee needs them back: when it is stopped (at), for whom, and, once it was
	// stopped, when. A workspace stopped by a reclaim keeps its volumes and URLs and starts again
	// through the GPU queue.
	// +optional
	Reclaim *ReclaimNotice `json:"reclaim,omitempty"`

	// Reclaiming is set on a workspace that waits for GPUs within its namespace's guarantee while
	// they are lent to other members of its cohort: the borrowers it stops, each with its time. The GPUs they
	// free are held for it until it is admitted.
	// +optional
	Reclaiming *Reclaiming `json:"reclaiming,omitempty"`
}

// ReclaimNotice tells a borrowing workspace that it is stopped to give its GPUs back.
type ReclaimNotice struct {
	// At is when the workspace is stopped: the notice's time plus the reclaimGracePeriod of the
	// WorkspaceQuota whose guarantee is claimed back.
	At metav1.Time `json:"at"`
	// For names who the GPUs are given back for: "workspace <namespace>/<name>" when that workspace is
	// in this workspace's namespace, else "a workspace of namespace <namespace>" (another team's
	// workspace names are not shown).
	For string `json:"for"`
	// NoticedAt is when the workspace was told.
	NoticedAt metav1.Time `json:"noticedAt"`
	// StoppedAt is when the workspace was stopped by the reclaim; unset while it still runs.
	// +optional
	StoppedAt *metav1.Time `json:"stoppedAt,omitempty"`
}

// Reclaiming records the borrowers a workspace stops to get its guaranteed GPUs back.
type Reclaiming struct {
	// Cluster is the ClusterDeployment (namespace/name) whose GPUs are claimed back.
	Cluster string `json:"cluster"`
	// Since is when the reclaim was first decided; among reclaims of the same GPUs, the earlier goes
	// first.
	Since metav1.Time `json:"since"`
	// Borrowers are the workspaces stopped for it.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Borrowers []ReclaimedWorkspace `json:"borrowers"`
}

// ReclaimedWorkspace is one borrower a reclaim stops.
type ReclaimedWorkspace struct {
	// Namespace of the workspace.
	Namespace string `json:"namespace"`
	// Name of the workspace.
	Name string `json:"name"`
	// UID of the workspace: one re-created under the same name is not the one reclaimed.
	UID types.UID `json:"uid"`
	// GPUs the workspace's admission holds.
	GPUs int64 `json:"gpus"`
	// At is when the workspace is stopped: when it was first named plus the grace period.
	At metav1.Time `json:"at"`
}

// SpecChange records when the controller first saw a generation of the spec.
type SpecChange struct {
	// Generation is the metadata.generation seen.
	Generation int64 `json:"generation"`
	// Time is when the controller first saw it.
	Time metav1.Time `json:"time"`
}

// WorkspaceDeployment is one instance of a WorkspaceClass on one ClusterDeployment.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=exalsius,shortName=wsd
// +kubebuilder:selectablefield:JSONPath=`.spec.workspaceClassRef`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.workspaceClassRef`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.status.placement.cluster`
// +kubebuilder:printcolumn:name="Placement",type=string,JSONPath=`.status.placement.reason`,priority=1
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`,priority=1
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="GPUs",type=integer,JSONPath=`.status.admission.gpus`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.access[0].url`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 60",message="metadata.name must be at most 60 characters, so that ws-<name> fits 63"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label"
type WorkspaceDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the request.
	// +required
	Spec WorkspaceDeploymentSpec `json:"spec"`

	// Status is the observed state.
	// +optional
	Status WorkspaceDeploymentStatus `json:"status,omitempty"`
}

// WorkspaceDeploymentList is a list of WorkspaceDeployments.
//
// +kubebuilder:object:root=true
type WorkspaceDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkspaceDeployment `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &WorkspaceDeployment{}, &WorkspaceDeploymentList{})
}

// PlacementNamespace is the namespace a workspace that places itself is placed from: the namespace of
// its Colony (spec.colonyRef.namespace) or of the ClusterDeployments its selector selects
// (spec.clusterSelectorNamespace), else its own. It also returns the field that names it ("" for the
// workspace's own namespace).
func (w *WorkspaceDeployment) PlacementNamespace() (namespace, field string) {
	switch {
	case w.Spec.ColonyRef != nil && w.Spec.ColonyRef.Namespace != "":
		return w.Spec.ColonyRef.Namespace, "spec.colonyRef.namespace"
	case w.Spec.ClusterSelector != nil && w.Spec.ClusterSelectorNamespace != "":
		return w.Spec.ClusterSelectorNamespace, "spec.clusterSelectorNamespace"
	}
	return w.Namespace, ""
}
