package v1

// Finalizers and labels.
const (
	// WorkspaceFinalizer holds a WorkspaceDeployment until its release and namespace are gone.
	WorkspaceFinalizer = "workspaces.exalsius.ai/workspace"
	// WorkspaceLabel is set, to the workspace's name, on the ServiceSet of a workspace.
	WorkspaceLabel = "workspaces.exalsius.ai/workspace"
	// WorkspaceNamespaceLabel is set, to the workspace's namespace, on the ServiceSet of a workspace.
	WorkspaceNamespaceLabel = "workspaces.exalsius.ai/workspace-namespace"
	// PrerequisiteLabel is set, to the ServiceTemplate name, on a shared prerequisite ServiceSet.
	PrerequisiteLabel = "workspaces.exalsius.ai/prerequisite"
	// ClusterDeploymentLabel is set, to the ClusterDeployment's name, on every ServiceSet this operator makes.
	ClusterDeploymentLabel = "workspaces.exalsius.ai/cluster-deployment"
	// AllowWorkspacesFromAnnotation on a namespace lists, comma-separated, the namespaces whose
	// workspaces may target ClusterDeployments in it; `*` allows every namespace.
	AllowWorkspacesFromAnnotation = "workspaces.exalsius.ai/allow-workspaces-from"
)

// Condition types of a WorkspaceDeployment.
const (
	ReadyCondition                     = "Ready"
	ClassResolvedCondition             = "ClassResolved"
	ClusterDeploymentResolvedCondition = "ClusterDeploymentResolved"
	FeasibleCondition                  = "Feasible"
	PrerequisitesMetCondition          = "PrerequisitesMet"
	ResourcesInjectedCondition         = "ResourcesInjected"
	HelmReleaseReadyCondition          = "HelmReleaseReady"
	RoutesReadyCondition               = "RoutesReady"
)

// Condition reasons of a WorkspaceDeployment.
const (
	ReasonClassNotFound                 = "ClassNotFound"
	ReasonClassInvalid                  = "ClassInvalid"
	ReasonClassResolved                 = "ClassResolved"
	ReasonClusterDeploymentNotFound     = "ClusterDeploymentNotFound"
	ReasonClusterDeploymentResolved     = "ClusterDeploymentResolved"
	ReasonClusterNotReady               = "ClusterNotReady"
	ReasonClusterUnreachable            = "ClusterUnreachable"
	ReasonNamespaceNotAllowed           = "NamespaceNotAllowed"
	ReasonGpuOfferingUnavailable        = "GpuOfferingUnavailable"
	ReasonWaitingForGpuCapacity         = "WaitingForGpuCapacity"
	ReasonFeasible                      = "Feasible"
	ReasonNoGPURequested                = "NoGPURequested"
	ReasonPrerequisitesDeploying        = "PrerequisitesDeploying"
	ReasonPrerequisitesMet              = "PrerequisitesMet"
	ReasonPrerequisiteFailed            = "PrerequisiteFailed"
	ReasonPrerequisiteNamespaceConflict = "PrerequisiteNamespaceConflict"
	ReasonPrerequisiteTimeout           = "PrerequisiteTimeout"
	ReasonNoPrerequisites               = "NoPrerequisites"
	ReasonResourcesInjected             = "ResourcesInjected"
	ReasonUserValuesOverwritten         = "UserValuesOverwritten"
	ReasonInvalidValues                 = "InvalidValues"
	ReasonHelmReleaseDeploying          = "HelmReleaseDeploying"
	ReasonHelmReleaseDeployed           = "HelmReleaseDeployed"
	ReasonHelmReleaseFailed             = "HelmReleaseFailed"
	ReasonDeployTimeout                 = "DeployTimeout"
	ReasonRoutesPending                 = "RoutesPending"
	ReasonNoEndpoints                   = "NoEndpoints"
	ReasonSuspended                     = "Suspended"
	ReasonDeleting                      = "Deleting"
	ReasonRunning                       = "Running"
	// ReasonServiceTemplateNotInClusterNamespace: k0rdent looks a ServiceSet's templates up in the
	// ClusterDeployment's namespace, and the class's (or a prerequisite's) ServiceTemplate is not
	// there, or is not valid there, yet.
	ReasonServiceTemplateNotInClusterNamespace = "ServiceTemplateNotInClusterNamespace"
	// ReasonReleaseNamespaceConflict: an older workspace with the same name, from another namespace,
	// already uses the release namespace ws-<name> on the same cluster.
	ReasonReleaseNamespaceConflict = "ReleaseNamespaceConflict"
	// ReasonRoutingNotConfigured: access URLs are computed but no route serves them yet.
	ReasonRoutingNotConfigured = "RoutingNotConfigured"
	// ReasonRoutingInfraNotReady: the routing infrastructure (the regional cluster, its Gateway, a
	// wildcard listener, TCP listeners for SSH and TCP endpoints) is missing; the message names what.
	ReasonRoutingInfraNotReady = "RoutingInfraNotReady"
	// ReasonRoutesReady: every access endpoint's route serves.
	ReasonRoutesReady = "RoutesReady"
)

// Condition types and reasons of a WorkspaceClass.
const (
	ClassReadyCondition           = "Ready"
	ReasonServiceTemplateNotFound = "ServiceTemplateNotFound"
	ReasonServiceTemplateInvalid  = "ServiceTemplateInvalid"
	ReasonVersionConstraintUnmet  = "VersionConstraintUnmet"
	ReasonInvalidInjectionPath    = "InvalidInjectionPath"
	ReasonInvalidPrerequisite     = "InvalidPrerequisite"
	// ReasonInvalidValuePath: a userFacingConfig helmValuePath does not parse.
	ReasonInvalidValuePath = "InvalidValuePath"
	ReasonValid            = "Valid"
)
