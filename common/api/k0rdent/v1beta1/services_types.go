package v1beta1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HelmAction is what the state management provider does with a service's Helm release.
// +kubebuilder:validation:Enum=Install;Uninstall
type HelmAction string

const (
	// HelmActionInstall installs or upgrades the release (the default).
	HelmActionInstall HelmAction = "Install"
	// HelmActionUninstall uninstalls the release while keeping the service in the spec.
	HelmActionUninstall HelmAction = "Uninstall"
)

// ValuesFromKind is the kind of object a service reads extra Helm values from.
// +kubebuilder:validation:Enum=ConfigMap;Secret
type ValuesFromKind string

const (
	// ValuesFromConfigMap reads values from a ConfigMap.
	ValuesFromConfigMap ValuesFromKind = "ConfigMap"
	// ValuesFromSecret reads values from a Secret.
	ValuesFromSecret ValuesFromKind = "Secret"
)

// ValuesFrom names a ConfigMap or Secret, in the namespace of the object that holds the service,
// whose data are extra Helm values of the service.
type ValuesFrom struct {
	// Kind is ConfigMap or Secret.
	// +required
	Kind ValuesFromKind `json:"kind"`

	// Name of the ConfigMap or Secret.
	// +required
	Name string `json:"name"`
}

// ServiceDependsOn names a service that must be deployed before the one that lists it.
type ServiceDependsOn struct {
	// Name of the service depended on.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace of the service depended on.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Service is one service of a ClusterDeployment's serviceSpec: a ServiceTemplate installed on the
// cluster as a Helm release (or Kustomize / raw resources).
type Service struct {
	// Name is the service's name, which is also its Helm release name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace on the child cluster the service is installed in.
	// +optional
	// +kubebuilder:default=default
	Namespace string `json:"namespace,omitempty"`

	// Template is the name of the ServiceTemplate to install.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Template string `json:"template"`

	// TemplateChain names a ServiceTemplateChain that lists the templates this service may move to.
	// +optional
	TemplateChain string `json:"templateChain,omitempty"`

	// Version is the version of the service (added after KCM v1.3).
	// +optional
	Version string `json:"version,omitempty"`

	// Values are Helm values as a YAML string; they may use Go templates.
	// +optional
	Values string `json:"values,omitempty"`

	// ValuesFrom lists ConfigMaps and Secrets whose data are extra Helm values.
	// +optional
	ValuesFrom []ValuesFrom `json:"valuesFrom,omitempty"`

	// DependsOn lists the services that must be deployed first.
	// +optional
	DependsOn []ServiceDependsOn `json:"dependsOn,omitempty"`

	// Disable keeps the service in the spec without deploying it.
	// +optional
	Disable bool `json:"disable,omitempty"`

	// HelmAction is Install or Uninstall (added after KCM v1.3).
	// +optional
	HelmAction *HelmAction `json:"helmAction,omitempty"`

	// HelmOptions are Helm install/upgrade options (wait, timeout, atomic, ...), kept as written.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	HelmOptions *apiextensionsv1.JSON `json:"helmOptions,omitempty"`
}

// ServiceWithValues is one service of a ServiceSet.
type ServiceWithValues struct {
	// Name is the service's name, which is also its Helm release name.
	// +required
	Name string `json:"name"`

	// Namespace on the child cluster the release is installed in.
	// +required
	Namespace string `json:"namespace"`

	// Template is the name of a ServiceTemplate in the ServiceSet's namespace.
	// +required
	Template string `json:"template"`

	// Version is the version of the service (added after KCM v1.3).
	// +optional
	Version *string `json:"version,omitempty"`

	// Values are Helm values as a YAML string.
	// +optional
	Values string `json:"values,omitempty"`

	// ValuesFrom lists ConfigMaps and Secrets, in the ServiceSet's namespace, whose data are extra Helm
	// values.
	// +optional
	ValuesFrom []ValuesFrom `json:"valuesFrom,omitempty"`

	// HelmAction is Install or Uninstall (added after KCM v1.3).
	// +optional
	HelmAction *HelmAction `json:"helmAction,omitempty"`

	// HelmOptions are Helm install/upgrade options (wait, timeout, atomic, ...), kept as written.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	HelmOptions *apiextensionsv1.JSON `json:"helmOptions,omitempty"`
}

// StateManagementProviderConfig picks the StateManagementProvider that deploys the services and
// passes it provider-specific settings.
type StateManagementProviderConfig struct {
	// Name of the StateManagementProvider, ksm-projectsveltos for KCM's Sveltos adapter. Immutable once
	// set.
	// +optional
	// +kubebuilder:validation:XValidation:rule="oldSelf == '' || self == oldSelf",message="Provider name is immutable once set"
	Name string `json:"name,omitempty"`

	// Config holds provider settings, for Sveltos: priority, syncMode, driftIgnore, stopMatchingBehavior,
	// templateResourceRefs, policyRefs, driftExclusions, patches, continueOnError, reloader,
	// stopOnConflict, maxConsecutiveFailures. Kept as written.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Config *apiextensionsv1.JSON `json:"config,omitempty"`

	// SelfManagement deploys to the management cluster itself.
	// +optional
	SelfManagement bool `json:"selfManagement,omitempty"`
}

// SyncMode is the deprecated serviceSpec.syncMode; use provider.config.syncMode.
// +kubebuilder:validation:Enum=OneTime;Continuous;ContinuousWithDriftDetection;DryRun
type SyncMode string

// ServiceSpec lists the services of a ClusterDeployment and how they are deployed.
type ServiceSpec struct {
	// Services are installed on the cluster; keyed by name and namespace.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +listMapKey=namespace
	Services []Service `json:"services,omitempty"`

	// Provider picks the StateManagementProvider and its settings (added after KCM v1.3).
	// +optional
	Provider StateManagementProviderConfig `json:"provider,omitempty"`

	// SyncMode is deprecated: use provider.config.syncMode.
	// +optional
	// +kubebuilder:default=Continuous
	SyncMode SyncMode `json:"syncMode,omitempty"`

	// TemplateResourceRefs is deprecated: use provider.config.templateResourceRefs.
	// +optional
	// +listType=atomic
	TemplateResourceRefs []apiextensionsv1.JSON `json:"templateResourceRefs,omitempty"`

	// PolicyRefs is deprecated: use provider.config.policyRefs.
	// +optional
	// +listType=atomic
	PolicyRefs []apiextensionsv1.JSON `json:"policyRefs,omitempty"`

	// DriftIgnore is deprecated: use provider.config.driftIgnore.
	// +optional
	// +listType=atomic
	DriftIgnore []apiextensionsv1.JSON `json:"driftIgnore,omitempty"`

	// DriftExclusions is deprecated: use provider.config.driftExclusions.
	// +optional
	// +listType=atomic
	DriftExclusions []apiextensionsv1.JSON `json:"driftExclusions,omitempty"`

	// Priority is deprecated: use provider.config.priority.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483646
	Priority int32 `json:"priority,omitempty"`

	// StopOnConflict is deprecated: use provider.config.stopOnConflict.
	// +optional
	StopOnConflict bool `json:"stopOnConflict,omitempty"`

	// Reload is deprecated: use provider.config.reloader.
	// +optional
	Reload bool `json:"reload,omitempty"`

	// ContinueOnError is deprecated: use provider.config.continueOnError.
	// +optional
	ContinueOnError bool `json:"continueOnError,omitempty"`
}

// ServiceType is the kind of a deployed service.
// +kubebuilder:validation:Enum=Helm;Kustomize;Resource
type ServiceType string

const (
	// ServiceTypeHelm is a Helm release.
	ServiceTypeHelm ServiceType = "Helm"
	// ServiceTypeKustomize is a Kustomize deployment.
	ServiceTypeKustomize ServiceType = "Kustomize"
	// ServiceTypeResource is a set of raw resources.
	ServiceTypeResource ServiceType = "Resource"
)

// ServiceDeploymentState is the state of one deployed service.
// +kubebuilder:validation:Enum=Deployed;Provisioning;Failed;Pending;Deleting;Deleted
type ServiceDeploymentState string

const (
	// ServiceStateDeployed means the service is deployed.
	ServiceStateDeployed ServiceDeploymentState = "Deployed"
	// ServiceStateProvisioning means the service is being deployed.
	ServiceStateProvisioning ServiceDeploymentState = "Provisioning"
	// ServiceStateFailed means deploying the service failed; failureMessage says why.
	ServiceStateFailed ServiceDeploymentState = "Failed"
	// ServiceStatePending means the service is not deployed (yet).
	ServiceStatePending ServiceDeploymentState = "Pending"
	// ServiceStateDeleting means the service is being removed.
	ServiceStateDeleting ServiceDeploymentState = "Deleting"
	// ServiceStateDeleted means the service was removed (KCM v1.11 and later).
	ServiceStateDeleted ServiceDeploymentState = "Deleted"
)

// ServiceState is the observed state of one service, in ServiceSet and ClusterDeployment status.
type ServiceState struct {
	// Type is Helm, Kustomize or Resource.
	// +required
	Type ServiceType `json:"type"`

	// Name of the service (the Helm release name).
	// +required
	Name string `json:"name"`

	// Namespace of the service on the child cluster.
	// +required
	Namespace string `json:"namespace"`

	// Template is the ServiceTemplate the service was deployed from.
	// +required
	Template string `json:"template"`

	// State is Deployed, Provisioning, Failed, Pending, Deleting or Deleted.
	// +required
	State ServiceDeploymentState `json:"state"`

	// FailureMessage says why the service failed.
	// +optional
	FailureMessage string `json:"failureMessage,omitempty"`

	// Version of the deployed service (added after KCM v1.3; since v1.12 stamped only once the child
	// confirms the deployment).
	// +optional
	Version *string `json:"version,omitempty"`

	// LastStateTransitionTime is when State last changed.
	// +required
	LastStateTransitionTime *metav1.Time `json:"lastStateTransitionTime"`

	// LastDeployedHash is KCM's fingerprint (chart, rendered values and patches) of the configuration
	// the service was last confirmed Deployed at, by Sveltos and by KCM's check of the release's
	// resources on the child (KCM v1.12 and later, when health rules are loaded). It moves only when
	// a new configuration is confirmed Deployed.
	// +optional
	LastDeployedHash string `json:"lastDeployedHash,omitempty"`

	// Conditions of the service.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ServiceUpgradePaths lists the templates a deployed service may be upgraded to.
type ServiceUpgradePaths struct {
	// Name of the service.
	// +optional
	Name string `json:"name,omitempty"`

	// Namespace of the service.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Template the service is deployed from.
	// +optional
	Template string `json:"template,omitempty"`

	// AvailableUpgrades lists the upgrade paths, kept as written by KCM.
	// +optional
	// +listType=atomic
	AvailableUpgrades []apiextensionsv1.JSON `json:"availableUpgrades,omitempty"`
}
