package v1beta1

import "k8s.io/apimachinery/pkg/types"

// Finalizers KCM puts on the objects it manages.
const (
	// ClusterDeploymentFinalizer is KCM's finalizer on a ClusterDeployment.
	ClusterDeploymentFinalizer = "k0rdent.mirantis.com/cluster-deployment"
	// ServiceSetFinalizer is KCM's finalizer on a ServiceSet. KCM drops it once the ServiceSet's Sveltos
	// Profile is gone; deleting a ServiceSet whose ClusterDeployment is already gone leaves it stuck.
	ServiceSetFinalizer = "k0rdent.mirantis.com/service-set"
)

// Labels and annotations KCM reads or writes.
const (
	// StateManagementProviderAdapterLabel is the label a ServiceSet must carry for the default
	// StateManagementProvider's selector to match it. A ServiceSet without it is silently skipped.
	StateManagementProviderAdapterLabel = "ksm.k0rdent.mirantis.com/adapter"
	// StateManagementProviderAdapterValue is the value of StateManagementProviderAdapterLabel that
	// KCM's default StateManagementProvider selects.
	StateManagementProviderAdapterValue = "kcm-controller-manager"
	// DefaultStateManagementProvider is the name of the StateManagementProvider KCM creates, which
	// deploys services with Sveltos. ServiceSets set it as spec.provider.name.
	DefaultStateManagementProvider = "ksm-projectsveltos"
	// ServiceSetPausedAnnotation, when present on a ServiceSet, pauses its Sveltos Profile.
	ServiceSetPausedAnnotation = "k0rdent.mirantis.com/service-set-paused"
	// ManagedLabel is set to "true" by KCM on the objects it creates (Sveltos Profiles among them).
	ManagedLabel = "k0rdent.mirantis.com/managed"
	// HealthRuleTargetLabel marks the ConfigMaps that hold health rules for KCM v1.12's service verifier.
	HealthRuleTargetLabel = "k0rdent.mirantis.com/health-rule-target"
)

// KOF's labels on a child ClusterDeployment naming its regional cluster (k0rdent observability,
// github.com/k0rdent/kof). The namespace label is optional; the child's namespace is the default.
// Whoever writes the child's labels (a Colony's clusterLabels) writes these: a reference they make to
// another namespace is subject to the tenancy rule (common/tenancy, docs/TENANCY.md).
const (
	KOFRegionalClusterNameLabel      = "k0rdent.mirantis.com/kof-regional-cluster-name"
	KOFRegionalClusterNamespaceLabel = "k0rdent.mirantis.com/kof-regional-cluster-namespace"
)

// KOFRegionalCluster returns the regional ClusterDeployment that the KOF labels of a child
// ClusterDeployment in namespace name. ok is false when labels has no (or an empty)
// KOFRegionalClusterNameLabel; the namespace label alone names nothing.
func KOFRegionalCluster(labels map[string]string, namespace string) (key types.NamespacedName, ok bool) {
	name := labels[KOFRegionalClusterNameLabel]
	if name == "" {
		return types.NamespacedName{}, false
	}
	if ns := labels[KOFRegionalClusterNamespaceLabel]; ns != "" {
		namespace = ns
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, true
}

// Kubeconfig Secret of a child cluster, written by Cluster API in the ClusterDeployment's namespace.
const (
	// KubeconfigSecretSuffix follows the ClusterDeployment name in its kubeconfig Secret's name.
	KubeconfigSecretSuffix = "-kubeconfig"
	// KubeconfigSecretKey is the data key of the kubeconfig in that Secret.
	KubeconfigSecretKey = "value"
)

// KubeconfigSecretName returns the name of the kubeconfig Secret of the ClusterDeployment cdName.
func KubeconfigSecretName(cdName string) string {
	return cdName + KubeconfigSecretSuffix
}

// Condition types of a ClusterDeployment.
const (
	// ReadyCondition is the aggregate condition of a ClusterDeployment (and of other KCM objects).
	ReadyCondition = "Ready"
	// TemplateReadyCondition reports the ClusterTemplate's validity.
	TemplateReadyCondition = "TemplateReady"
	// CredentialReadyCondition reports the Credential's readiness.
	CredentialReadyCondition = "CredentialReady"
	// HelmChartReadyCondition reports the Flux HelmChart of the ClusterTemplate.
	HelmChartReadyCondition = "HelmChartReady"
	// HelmReleaseReadyCondition reports the Flux HelmRelease that installs the ClusterTemplate chart.
	HelmReleaseReadyCondition = "HelmReleaseReady"
	// CAPIClusterSummaryCondition summarises the Cluster API Cluster (infrastructure, control plane,
	// workers, remote connection). True means the cluster is up.
	CAPIClusterSummaryCondition = "CAPIClusterSummary"
	// ServicesInReadyStateCondition is True when every service is deployed; its message is
	// "<deployed>/<total>". A ClusterDeployment and a ServiceSet both carry it.
	ServicesInReadyStateCondition = "ServicesInReadyState"
	// PausedCondition reports whether the ClusterDeployment is paused.
	PausedCondition = "Paused"
	// DeletingCondition reports the progress of a deletion.
	DeletingCondition = "Deleting"
	// CloudResourcesDeletedCondition reports the deletion of the cluster's cloud resources.
	CloudResourcesDeletedCondition = "CloudResourcesDeletedCondition"
	// ClusterAuthenticationReadyCondition reports the ClusterAuthentication referenced by the spec.
	ClusterAuthenticationReadyCondition = "ClusterAuthenticationReady"
	// ClusterAuditPolicyReadyCondition reports the audit policy referenced by the spec.
	ClusterAuditPolicyReadyCondition = "ClusterAuditPolicyReady"
	// DataSourceReadyCondition reports the DataSource referenced by the spec.
	DataSourceReadyCondition = "DataSourceReady"
	// ClusterDataSourceReadyCondition reports the cluster's data source.
	ClusterDataSourceReadyCondition = "ClusterDataSourceReady"
	// HelmChartNameChangedCondition reports a change of the ClusterTemplate's chart name.
	HelmChartNameChangedCondition = "HelmChartNameChanged"
	// SveltosClusterReadyCondition reports the SveltosCluster of an adopted cluster.
	SveltosClusterReadyCondition = "SveltosClusterReady"
	// ServicesDependencyValidationCondition reports the validation of the services' dependsOn.
	ServicesDependencyValidationCondition = "ServicesDependencyValidation"
)

// Condition reasons of a ClusterDeployment.
const (
	// SucceededReason: the condition's subject succeeded.
	SucceededReason = "Succeeded"
	// FailedReason: the condition's subject failed.
	FailedReason = "Failed"
	// ProgressingReason: the condition's subject is still progressing.
	ProgressingReason = "Progressing"
	// DeletingReason: the object is being deleted.
	DeletingReason = "Deleting"
	// DeletionCompletedReason: the deletion finished.
	DeletionCompletedReason = "DeletionCompleted"
	// WaitingForServiceSetsDeletionReason: the ClusterDeployment waits for its ServiceSets to go.
	WaitingForServiceSetsDeletionReason = "WaitingForServiceSetsDeletion"
	// CAPIClusterMissingReason: the Cluster API Cluster does not exist (yet).
	CAPIClusterMissingReason = "CAPIClusterMissing"
)

// Condition types of a ServiceSet.
const (
	// ServiceSetProfileCondition reports the Sveltos Profile built from the ServiceSet.
	ServiceSetProfileCondition = "ServiceSetProfile"
	// ServiceSetStatusesCollectedCondition reports whether service states were read from Sveltos.
	ServiceSetStatusesCollectedCondition = "ServiceSetStatusesCollected"
	// ServiceSetHealthRulesCondition reports the health-rule verifier (KCM v1.12 and later).
	ServiceSetHealthRulesCondition = "ServiceSetHealthRules"
)

// Condition reasons of a ServiceSet.
const (
	// ServiceSetProfileReadyReason: the Profile is built and applied.
	ServiceSetProfileReadyReason = "ServiceSetProfileReady"
	// ServiceSetProfileNotReadyReason: the Profile is not ready yet.
	ServiceSetProfileNotReadyReason = "ServiceSetProfileNotReady"
	// ServiceSetProfileBuildFailedReason: the Profile could not be built.
	ServiceSetProfileBuildFailedReason = "ServiceSetProfileBuildFailed"
	// ServiceSetHelmChartsBuildFailedReason: a service's Helm chart could not be resolved, for example
	// because its ServiceTemplate is missing or not valid.
	ServiceSetHelmChartsBuildFailedReason = "ServiceSetHelmChartsBuildFailed"
	// ServiceSetKustomizationRefsBuildFailedReason: a Kustomize service could not be resolved.
	ServiceSetKustomizationRefsBuildFailedReason = "ServiceSetKustomizationRefsBuildFailed"
	// ServiceSetPolicyRefsBuildFailedReason: a Resource service could not be resolved.
	ServiceSetPolicyRefsBuildFailedReason = "ServiceSetPolicyRefsBuildFailed"
	// ServiceSetStatusesCollectedReason: service states were read.
	ServiceSetStatusesCollectedReason = "ServiceSetStatusesCollected"
	// ServiceSetStatusesNotCollectedReason: service states could not be read.
	ServiceSetStatusesNotCollectedReason = "ServiceSetStatusesNotCollected"
)
