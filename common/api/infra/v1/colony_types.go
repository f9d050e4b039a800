package v1

import (
	"encoding/json"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ColonyFinalizer holds a Colony until every ClusterDeployment it made is gone.
const ColonyFinalizer = "infra.exalsius.ai/colony"

// LegacyColonyFinalizer is the finalizer the upstream exalsius-operator 0.11 put on Colonies. The
// colony-controller replaces it with ColonyFinalizer on a live Colony, and treats it as its own on a
// Colony that was deleted before it could (docs/MIGRATION.md).
const LegacyColonyFinalizer = "colony.infra.exalsius.ai/finalizer"

// ColonyLabel is set on every ClusterDeployment a Colony makes, to the Colony's name.
const ColonyLabel = "infra.exalsius.ai/colony"

// ColonyClusterLabel is set on every ClusterDeployment a Colony makes, to the entry's clusterName.
const ColonyClusterLabel = "infra.exalsius.ai/cluster-name"

// ColonyPhase summarises a Colony's state in one word.
// +kubebuilder:validation:Enum=Provisioning;Ready;Degraded;Deleting
type ColonyPhase string

const (
	// ColonyPhaseProvisioning means at least one cluster is not ready yet and none has failed.
	ColonyPhaseProvisioning ColonyPhase = "Provisioning"
	// ColonyPhaseReady means every cluster is ready and its kubeconfig is in the aggregated Secret.
	ColonyPhaseReady ColonyPhase = "Ready"
	// ColonyPhaseDegraded means at least one entry could not be reconciled or its cluster failed.
	ColonyPhaseDegraded ColonyPhase = "Degraded"
	// ColonyPhaseDeleting means the Colony is being deleted and waits for its ClusterDeployments to go.
	ColonyPhaseDeleting ColonyPhase = "Deleting"
)

// Condition types and reasons of a Colony.
const (
	// ColonyClustersReadyCondition is True when every entry's ClusterDeployment is ready.
	ColonyClustersReadyCondition = "ClustersReady"
	// ColonyReadyCondition is the Colony's summary condition.
	ColonyReadyCondition = "Ready"
	// ColonyReconcilingCondition is True while the Colony is Provisioning or Deleting, with Ready's
	// reason and message, and absent otherwise: the kstatus convention that Flux and Argo CD read as
	// "in progress".
	ColonyReconcilingCondition = "Reconciling"
	// ColonyStalledCondition is True while the Colony is Degraded, with Ready's reason and message, and
	// absent otherwise: the kstatus convention that Flux and Argo CD read as "failed".
	ColonyStalledCondition = "Stalled"

	// ColonyReasonAllClustersReady: every cluster is ready.
	ColonyReasonAllClustersReady = "AllClustersReady"
	// ColonyReasonClustersNotReady: some clusters are still provisioning; the message names them.
	ColonyReasonClustersNotReady = "ClustersNotReady"
	// ColonyReasonClusterFailed: a ClusterDeployment reports a failure; the message names it.
	ColonyReasonClusterFailed = "ClusterFailed"
	// ColonyReasonInvalidEntry: an entry's spec is invalid or was rejected; the message names the field.
	ColonyReasonInvalidEntry = "InvalidEntry"
	// ColonyReasonDeleting: the Colony is being deleted; the message names what it waits for.
	ColonyReasonDeleting = "Deleting"
	// ColonyReasonNoClusters: the Colony has no entries.
	ColonyReasonNoClusters = "NoClusters"
	// ColonyReasonKubeconfigSecretFailed: the Colony's kubeconfig Secret cannot be written, for example
	// because a Secret of that name exists and the Colony does not control it; the message says why.
	ColonyReasonKubeconfigSecretFailed = "KubeconfigSecretFailed"
)

// ColonySpec lists the child clusters of a Colony. Entries are keyed by clusterName, so the API server
// rejects duplicates.
type ColonySpec struct {
	// ColonyClusters are the child clusters of this Colony. Each entry becomes one k0rdent
	// ClusterDeployment named `<colony>-<clusterName>` in the Colony's namespace. Removing an entry
	// deletes its ClusterDeployment.
	// +optional
	// +listType=map
	// +listMapKey=clusterName
	// +kubebuilder:validation:MaxItems=256
	ColonyClusters []ColonyCluster `json:"colonyClusters,omitempty"`
}

// ManagedClusters counts the entries that have a clusterDeploymentSpec: the clusters the Colony makes
// and counts.
func (c *Colony) ManagedClusters() int {
	n := 0
	for i := range c.Spec.ColonyClusters {
		if c.Spec.ColonyClusters[i].HasClusterDeploymentSpec() {
			n++
		}
	}
	return n
}

// HasClusterDeploymentSpec says whether the entry has a clusterDeploymentSpec (an entry without one
// makes no ClusterDeployment).
func (c *ColonyCluster) HasClusterDeploymentSpec() bool {
	raw := strings.TrimSpace(string(c.ClusterDeploymentSpec.Raw))
	return raw != "" && raw != "null"
}

// Credential is the Credential the entry's clusterDeploymentSpec names (`credential`), or "" when it
// names none or does not parse.
func (c *ColonyCluster) Credential() string {
	var spec struct {
		Credential string `json:"credential"`
	}
	if !c.HasClusterDeploymentSpec() || json.Unmarshal(c.ClusterDeploymentSpec.Raw, &spec) != nil {
		return ""
	}
	return spec.Credential
}

// ColonyCluster describes one child cluster of a Colony.
type ColonyCluster struct {
	// ClusterName names the cluster within the Colony. It must be a DNS label; the ClusterDeployment
	// is named `<colony>-<clusterName>`, and that name must fit in 63 characters.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ClusterName string `json:"clusterName"`

	// ClusterDeploymentSpec is the spec of the k0rdent ClusterDeployment for this cluster (template,
	// credential, config, dryRun, propagateCredentials, serviceSpec, ...). It is passed on as written:
	// keys this operator does not know are kept, never dropped. `config` is always sent, `{}` when
	// empty, because KCM turns a missing config into a dry run. An entry without it (as the upstream
	// operator allows) makes no ClusterDeployment and changes none: a ClusterDeployment
	// `<colony>-<clusterName>` the Colony already controls is kept as it is (and deleted with the
	// Colony), and the entry is not counted in the Colony's clusters.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	ClusterDeploymentSpec apiextensionsv1.JSON `json:"clusterDeploymentSpec,omitzero"`

	// ClusterLabels are set on the ClusterDeployment. Labels set earlier and removed here are removed
	// from the ClusterDeployment too.
	// +optional
	ClusterLabels map[string]string `json:"clusterLabels,omitempty"`

	// ClusterAnnotations are set on the ClusterDeployment. Annotations set earlier and removed here are
	// removed from the ClusterDeployment too.
	// +optional
	ClusterAnnotations map[string]string `json:"clusterAnnotations,omitempty"`
}

// ObjectRef names an object by namespace and name.
type ObjectRef struct {
	// Name of the object.
	Name string `json:"name"`
	// Namespace of the object.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// ColonyStatus is the observed state of a Colony. The colony-controller owns every field but
// gpuInventory, which the inventory-collector owns; each writes with its own server-side apply field
// manager.
type ColonyStatus struct {
	// Phase summarises the Colony: Provisioning, Ready, Degraded or Deleting.
	// +optional
	Phase ColonyPhase `json:"phase,omitempty"`

	// Conditions are ClustersReady and Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ClusterDeploymentRefs name the ClusterDeployments this Colony made.
	// +optional
	// +listType=atomic
	ClusterDeploymentRefs []ObjectRef `json:"clusterDeploymentRefs,omitempty"`

	// TotalClusters is the number of entries in the spec.
	// +optional
	TotalClusters int32 `json:"totalClusters,omitempty"`

	// ReadyClusters is the number of clusters that are ready: their ClusterDeployment reports Ready (or
	// CAPIClusterSummary) True, or their Cluster API Cluster is Available, no remote-connection probe
	// of Cluster API's fails, and their kubeconfig Secret exists.
	// +optional
	ReadyClusters int32 `json:"readyClusters,omitempty"`

	// KubeconfigSecretName names the Secret, in the Colony's namespace, that holds one kubeconfig with a
	// context per ready cluster (key `kubeconfig`) and one key per cluster.
	// +optional
	KubeconfigSecretName string `json:"kubeconfigSecretName,omitempty"`

	// GPUInventory maps each ClusterDeployment name to the GPUs its child cluster offers. Written by
	// the inventory-collector.
	// +optional
	GPUInventory map[string]ClusterGPUInventory `json:"gpuInventory,omitempty"`

	// GPUs sums gpuInventory over the clusters that are reachable now. Written by the
	// inventory-collector, together with gpuInventory.
	// +optional
	GPUs *ColonyGPUs `json:"gpus,omitempty"`
}

// ColonyGPUs are a Colony's GPU totals, summed over the offerings of its reachable clusters.
type ColonyGPUs struct {
	// Total is the allocatable GPUs.
	Total int64 `json:"total"`
	// Allocated is the GPUs requested by non-terminal pods.
	Allocated int64 `json:"allocated"`
	// Free is the GPUs not requested, counted per offering (total minus allocated, at least zero).
	// Admissions the GPU gate granted whose pods do not run yet are not subtracted.
	Free int64 `json:"free"`
}

// ClusterGPUInventory is the GPU inventory of one child cluster.
type ClusterGPUInventory struct {
	// LastUpdated is when the offerings (or reachability) last changed: the age of what is shown. A
	// quiet cluster keeps an old lastUpdated; compare lastContact to tell quiet from stale.
	// +optional
	LastUpdated metav1.Time `json:"lastUpdated,omitempty"`

	// LastContact is when the child's API server last answered (a list, a watch event or the periodic
	// probe). To keep status writes rare it is refreshed only when the entry changes anyway or when the
	// stored value is older than the inventory-collector's --contact-refresh interval (10 minutes by
	// default): a reachable child's lastContact is at most that old, an unreachable child's says since
	// when it is gone.
	// +optional
	LastContact *metav1.Time `json:"lastContact,omitempty"`

	// Reachable is false while the child's API server cannot be reached; the offerings are then the
	// last ones seen.
	Reachable bool `json:"reachable"`

	// Message says why the child is unreachable, or is empty.
	// +optional
	Message string `json:"message,omitempty"`

	// Offerings are the kinds of GPU on the cluster.
	// +optional
	// +listType=atomic
	Offerings []GPUOffering `json:"offerings,omitempty"`
}

// GPUOffering is one kind of GPU on one cluster: vendor, model, resource name and the node selector
// that picks it.
type GPUOffering struct {
	// Model is the GPU model, from the label exalsius.ai/gpu-model, else nvidia.com/gpu.product or
	// amd.com/gpu.product-name; empty when no node says.
	// +optional
	Model string `json:"model,omitempty"`

	// Selector is the node selector that picks these nodes: the label the model came from.
	// +optional
	Selector map[string]string `json:"selector,omitempty"`

	// Vendor is NVIDIA or AMD.
	Vendor string `json:"vendor"`

	// ResourceName is the extended resource that counts these GPUs (nvidia.com/gpu or amd.com/gpu).
	ResourceName string `json:"resourceName"`

	// Total is the allocatable GPUs on schedulable, Ready nodes of this offering.
	Total int64 `json:"total"`

	// Allocated is the GPUs requested by non-terminal pods on those nodes.
	Allocated int64 `json:"allocated"`

	// Nodes is the number of nodes of this offering.
	Nodes int32 `json:"nodes"`

	// Labels are the raw vendor labels of these nodes (nvidia.com/*, amd.com/*), for display.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// Colony groups the child clusters that a platform team provisions through k0rdent.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=exalsius,shortName=col
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyClusters`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.totalClusters`
// +kubebuilder:printcolumn:name="GPUs Free",type=integer,JSONPath=`.status.gpus.free`
// +kubebuilder:printcolumn:name="GPUs Total",type=integer,JSONPath=`.status.gpus.total`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.colonyClusters) || self.spec.colonyClusters.all(c, size(self.metadata.name) + 1 + size(c.clusterName) <= 63)",message="spec.colonyClusters[].clusterName: '<colony>-<clusterName>' must be at most 63 characters",fieldPath=.spec.colonyClusters
type Colony struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec lists the child clusters.
	// +optional
	Spec ColonySpec `json:"spec,omitempty"`

	// Status is the observed state.
	// +optional
	Status ColonyStatus `json:"status,omitempty"`
}

// ColonyList is a list of Colonies.
//
// +kubebuilder:object:root=true
type ColonyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Colony `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &Colony{}, &ColonyList{})
}
