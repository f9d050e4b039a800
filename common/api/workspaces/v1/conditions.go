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
	// WorkspaceUIDLabel is set, to the workspace's uid, on the release namespace ws-<name> the
	// controller makes on the child; with WorkspaceLabel and WorkspaceNamespaceLabel it names the
	// namespace's owner, and only that owner deletes it.
	WorkspaceUIDLabel = "workspaces.exalsius.ai/workspace-uid"
	// ClusterDeploymentLabel is set, to the ClusterDeployment's name, on every ServiceSet this operator makes.
	ClusterDeploymentLabel = "workspaces.exalsius.ai/cluster-deployment"
	// AllowWorkspacesFromAnnotation on a namespace lists, comma-separated, the namespaces whose
	// workspaces may target ClusterDeployments in it; `*` allows every namespace.
	AllowWorkspacesFromAnnotation = "workspaces.exalsius.ai/allow-workspaces-from"
	// ServiceSetNameAnnotation pins, on a WorkspaceDeployment, the upstream operator's ServiceSet the
	// workspace-controller adopted (`wsd-<cd>-<name>`; any other value is ignored). Only the
	// workspace-controller sets it: the webhook refuses it from anyone else.
	ServiceSetNameAnnotation = "workspaces.exalsius.ai/serviceset-name"
	// ReleaseNameAnnotation pins the Helm release name of the adopted ServiceSet. Only the
	// workspace-controller sets it: the webhook refuses it from anyone else.
	ReleaseNameAnnotation = "workspaces.exalsius.ai/release-name"
	// AutoStoppedAnnotation records, on a WorkspaceDeployment, when the workspace-controller set
	// spec.stopped because spec.stopAfter elapsed while the workspace held its admission, without a
	// spec change; it is removed once the workspace is started again.
	AutoStoppedAnnotation = "workspaces.exalsius.ai/auto-stopped"
	// RetryRequestedAtAnnotation on a WorkspaceDeployment asks the workspace-controller to retry it
	// once while it is Failed: a value (any string, a timestamp by convention, as Flux's
	// reconcile.fluxcd.io/requestedAt) that differs from status.lastHandledRetryAt makes the next pass
	// take the workspace out of Failed and run it again from admission, then record the value there.
	// A value already handled, or one set while the workspace is not Failed, does nothing more. Anyone
	// who may edit the workspace may set it: it only retries that workspace.
	RetryRequestedAtAnnotation = "workspaces.exalsius.ai/retry-requested-at"
	// LegacyFinalizer is the finalizer the upstream exalsius-operator 0.11 put on WorkspaceDeployments.
	// Nothing else removes it after a switch, so the workspace-controller does, once its own is on.
	LegacyFinalizer = "workspaces.exalsius.ai/deployment"
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
	// ReleaseNamespaceReadyCondition: ws-<name> exists on the child, owned by the workspace, with its
	// Pod Security level and GPU ResourceQuota.
	ReleaseNamespaceReadyCondition = "ReleaseNamespaceReady"
	// ReconcilingCondition is True while the workspace progresses (Pending, InstallingPrerequisites,
	// Waiting, Deploying, Deleting), with Ready's reason and message, and absent otherwise: the
	// kstatus convention that Flux and Argo CD read as "in progress".
	ReconcilingCondition = "Reconciling"
	// WithinQuotaCondition: the namespace's WorkspaceQuotas leave room for the workspace; set only
	// while a WorkspaceQuota applies to the namespace.
	WithinQuotaCondition = "WithinQuota"
	// PlacedCondition: the workspace is placed on a cluster (status.placement); set only for a
	// workspace that names a Colony or a cluster selector.
	PlacedCondition = "Placed"
	// StalledCondition is True while the workspace is Failed, with the failure's reason and message,
	// and absent otherwise: the kstatus convention that Flux and Argo CD read as "failed".
	StalledCondition = "Stalled"
	// ReclaimingCondition is True on a workspace that borrows GPUs while a workspace within its
	// namespace's guarantee needs them back: it is stopped at status.reclaim.at. Absent otherwise.
	ReclaimingCondition = "Reclaiming"
)

// Condition reasons of a WorkspaceDeployment, grouped by the condition that sets them. Ready carries
// the reason of the step that blocks the workspace (any reason below) when it has none of its own.

// Reasons of Ready.
const (
	// ReasonRunning (True): the release is deployed.
	ReasonRunning = "Running"
	// ReasonStopped (True): the release runs no replica and holds no GPU (spec.stopped); Feasible is
	// False with this reason too.
	ReasonStopped = "Stopped"
	// ReasonStopping: spec.stopped is set and the release is being scaled to zero; its GPUs are still
	// held until k0rdent reports the change deployed. HelmReleaseReady is False with this reason too.
	ReasonStopping = "Stopping"
	// ReasonDeleting: the workspace is being deleted; the message names what it waits for.
	ReasonDeleting = "Deleting"
	// ReasonReclaimed (True): the workspace borrowed GPUs from its cohort and was stopped to give them
	// back (status.reclaim); its release runs no replica, its volumes and URLs are kept, and it starts
	// again through the GPU queue. Feasible carries the gate's word on when.
	ReasonReclaimed = "Reclaimed"
)

// Reasons of Reclaiming.
const (
	// ReasonReclaimScheduled (True): the workspace is stopped at status.reclaim.at to give its borrowed
	// GPUs back; the message names for whom.
	ReasonReclaimScheduled = "ReclaimScheduled"
)

// Reasons of ClassResolved.
const (
	// ReasonClassResolved (True): the WorkspaceClass exists and is valid.
	ReasonClassResolved = "ClassResolved"
	// ReasonClassNotFound: spec.workspaceClassRef names no WorkspaceClass.
	ReasonClassNotFound = "ClassNotFound"
	// ReasonClassInvalid: the WorkspaceClass is not valid, or not validated yet.
	ReasonClassInvalid = "ClassInvalid"
	// ReasonClassNotAllowed: the WorkspaceClass's spec.allowedNamespaces does not select the
	// workspace's namespace.
	ReasonClassNotAllowed = "ClassNotAllowed"
	// ReasonServiceTemplateUnavailable: the class's ServiceTemplate is not valid now; a running release
	// is untouched.
	ReasonServiceTemplateUnavailable = "ServiceTemplateUnavailable"
	// ReasonServiceTemplateNotInClusterNamespace: k0rdent looks a ServiceSet's templates up in the
	// ClusterDeployment's namespace, and the class's (or a prerequisite's) ServiceTemplate is not
	// there, or is not valid there, yet.
	ReasonServiceTemplateNotInClusterNamespace = "ServiceTemplateNotInClusterNamespace"
)

// Reasons of ClusterDeploymentResolved.
const (
	// ReasonClusterDeploymentResolved (True): the ClusterDeployment exists, may be used and is ready.
	ReasonClusterDeploymentResolved = "ClusterDeploymentResolved"
	// ReasonClusterDeploymentNotFound: spec.clusterDeploymentRef names no ClusterDeployment.
	ReasonClusterDeploymentNotFound = "ClusterDeploymentNotFound"
	// ReasonClusterNotReady: the ClusterDeployment is being deleted or has no kubeconfig Secret yet.
	ReasonClusterNotReady = "ClusterNotReady"
	// ReasonNamespaceNotAllowed: the ClusterDeployment's namespace does not allow workspaces from the
	// workspace's namespace (workspaces.exalsius.ai/allow-workspaces-from).
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
)

// Reasons of Feasible (the GPU gate; common/gpu names them too).
const (
	// ReasonFeasible (True): the gate admitted the workspace's GPUs.
	ReasonFeasible = "Feasible"
	// ReasonNoGPURequested (True): the workspace asks for no GPU; the gate has nothing to admit.
	ReasonNoGPURequested = "NoGPURequested"
	// ReasonGpuOfferingUnavailable: no node of the cluster offers the GPU kind asked for.
	ReasonGpuOfferingUnavailable = "GpuOfferingUnavailable"
	// ReasonGpuRequestNeverFits: one replica asks for more GPUs than any matching node has in total,
	// so no release of GPUs can ever make it fit.
	ReasonGpuRequestNeverFits = "GpuRequestNeverFits"
	// ReasonWaitingForGpuCapacity: the GPU kind exists but not enough is free; the workspace waits.
	ReasonWaitingForGpuCapacity = "WaitingForGpuCapacity"
	// ReasonWaitingForReclaim: the GPUs the workspace needs are within its namespace's guarantee and
	// are lent to other members of its cohort; the borrowers are stopped at status.reclaiming.at and
	// the GPUs they free are held for it.
	ReasonWaitingForReclaim = "WaitingForReclaim"
	// ReasonWaitingForGpuNodes: no matching node can take GPU pods now, but matching nodes exist that
	// are cordoned, NotReady or have not advertised their GPUs yet (a drain, a kubelet restart, a new
	// cluster whose device plugin is starting); the workspace waits and keeps its place in the queue.
	ReasonWaitingForGpuNodes = "WaitingForGpuNodes"
	// ReasonClusterUnreachable: the child cluster cannot be reached; ReleaseNamespaceReady is False
	// with this reason too.
	ReasonClusterUnreachable = "ClusterUnreachable"
	// ReasonAdmissionLost is the reason of the Warning Event recorded when a workspace's admission no
	// longer holds and the workspace is gated again: its ClusterDeployment was deleted and created
	// again, or an admitted node is gone, or runs none of its pods and cannot take them (cordoned,
	// NotReady, too few GPUs). The Feasible condition's message starts with the same words.
	ReasonAdmissionLost = "AdmissionLost"
	// ReasonRetrying is the reason of the Normal Event recorded when a Failed workspace is retried on
	// request (RetryRequestedAtAnnotation).
	ReasonRetrying = "Retrying"
)

// Reasons of Placed (only for a workspace that names a Colony or a cluster selector).
const (
	// ReasonPlaced (True): status.placement names the cluster.
	ReasonPlaced = "Placed"
	// ReasonColonyNotFound: spec.colonyRef names no Colony in the workspace's namespace.
	ReasonColonyNotFound = "ColonyNotFound"
	// ReasonNoCandidateClusters: the Colony or the cluster selector names no ClusterDeployment (yet).
	ReasonNoCandidateClusters = "NoCandidateClusters"
	// ReasonNoClusterFitsNow: no candidate cluster can hold the workspace now, but one could once GPUs
	// are freed (or a cluster becomes reachable); the workspace waits unplaced.
	ReasonNoClusterFitsNow = "NoClusterFitsNow"
	// ReasonNoClusterCanFit: no candidate cluster has, or could ever free, the GPUs the workspace asks
	// for; the message names the largest offering.
	ReasonNoClusterCanFit = "NoClusterCanFit"
)

// Reasons of WithinQuota (only while a WorkspaceQuota applies to the namespace).
const (
	// ReasonWithinQuota (True): every WorkspaceQuota of the namespace leaves room for the workspace.
	ReasonWithinQuota = "WithinQuota"
	// ReasonQuotaExceeded: admitting the workspace would take the namespace over a WorkspaceQuota;
	// the message names the quota, its limit and what is used. The workspace waits.
	ReasonQuotaExceeded = "QuotaExceeded"
)

// Reasons of PrerequisitesMet.
const (
	// ReasonPrerequisitesMet (True): every prerequisite is deployed.
	ReasonPrerequisitesMet = "PrerequisitesMet"
	// ReasonNoPrerequisites (True): the class has no prerequisites.
	ReasonNoPrerequisites = "NoPrerequisites"
	// ReasonPrerequisitesDeploying: a prerequisite is being installed.
	ReasonPrerequisitesDeploying = "PrerequisitesDeploying"
	// ReasonPrerequisiteFailed: k0rdent reports a prerequisite failed.
	ReasonPrerequisiteFailed = "PrerequisiteFailed"
	// ReasonPrerequisiteTimeout: the prerequisites were not deployed within prerequisiteDeployTimeout.
	ReasonPrerequisiteTimeout = "PrerequisiteTimeout"
	// ReasonPrerequisiteNamespaceConflict: k0rdent reports a prerequisite in conflict with what its
	// namespace holds (another version of the chart, for example).
	ReasonPrerequisiteNamespaceConflict = "PrerequisiteNamespaceConflict"
	// ReasonPrerequisiteValuesConflict: another WorkspaceClass in use on the cluster installed the
	// shared prerequisite with other values.
	ReasonPrerequisiteValuesConflict = "PrerequisiteValuesConflict"
)

// Reasons of ResourcesInjected.
const (
	// ReasonResourcesInjected (True): the values are computed and the resources injected.
	ReasonResourcesInjected = "ResourcesInjected"
	// ReasonUserValuesOverwritten: injected resources overwrote values the user set (not a failure);
	// the message names the paths.
	ReasonUserValuesOverwritten = "UserValuesOverwritten"
	// ReasonInvalidValues: the values cannot be built (a source does not parse or is over a limit, or
	// the class's paths cannot be set in them).
	ReasonInvalidValues = "InvalidValues"
	// ReasonMissingRequiredValue: a userFacingConfig entry marked required has no value and no default.
	ReasonMissingRequiredValue = "MissingRequiredValue"
	// ReasonValuesFromNotFound: a spec.valuesFrom Secret or ConfigMap that is not optional is missing.
	ReasonValuesFromNotFound = "ValuesFromNotFound"
)

// Reasons of ReleaseNamespaceReady.
const (
	// ReasonReleaseNamespaceReady (True): ws-<name> is owned by the workspace and enforced.
	ReasonReleaseNamespaceReady = "ReleaseNamespaceReady"
	// ReasonReleaseNamespaceTerminating: ws-<name> is still being deleted on the child.
	ReasonReleaseNamespaceTerminating = "ReleaseNamespaceTerminating"
	// ReasonReleaseNamespaceConflict: ws-<name> on the child is not this workspace's to use (another
	// workspace's, or unlabelled and not adoptable); ClusterDeploymentResolved is False with this
	// reason when an older workspace of the same name from another namespace uses the cluster.
	ReasonReleaseNamespaceConflict = "ReleaseNamespaceConflict"
)

// Reasons of HelmReleaseReady.
const (
	// ReasonHelmReleaseDeployed (True): k0rdent reports the release deployed.
	ReasonHelmReleaseDeployed = "HelmReleaseDeployed"
	// ReasonHelmReleaseResyncing (True): a Running workspace's service passes through Provisioning or
	// Pending (a re-sync); it stays Running.
	ReasonHelmReleaseResyncing = "HelmReleaseResyncing"
	// ReasonHelmReleaseDeploying: the release is being installed or upgraded.
	ReasonHelmReleaseDeploying = "HelmReleaseDeploying"
	// ReasonHelmReleaseFailed: k0rdent reports the release failed; also Ready's reason after a
	// deploy timeout.
	ReasonHelmReleaseFailed = "HelmReleaseFailed"
	// ReasonDeployTimeout: the release was not deployed within deployTimeout.
	ReasonDeployTimeout = "DeployTimeout"
	// ReasonGpuQuotaExceeded: the child refused pods of the release because they ask for more GPUs
	// than the gate admitted (the release namespace's ResourceQuota).
	ReasonGpuQuotaExceeded = "GpuQuotaExceeded"
	// ReasonPodsRefused: the child refused to create a pod of the release for another cause than the
	// GPU quota (a workload controller's FailedCreate: a missing RuntimeClass, an admission webhook's
	// denial, Pod Security, another quota), or a pod of the release has been Unschedulable for longer
	// than the controller's bound; the message names the pod or workload and the child's own message.
	// The phase stays Deploying until deployTimeout.
	ReasonPodsRefused = "PodsRefused"
	// ReasonServiceSetConflict: a ServiceSet of the workspace's name exists but belongs to something
	// else; it is not adopted.
	ReasonServiceSetConflict = "ServiceSetConflict"
)

// Reasons of RoutesReady (never changes the phase).
const (
	// ReasonRoutesReady (True): every access endpoint's route serves.
	ReasonRoutesReady = "RoutesReady"
	// ReasonNoEndpoints (True): the class declares no access endpoints.
	ReasonNoEndpoints = "NoEndpoints"
	// ReasonRoutesPending: routes are not served yet, a port pool is exhausted, or a hostname is too
	// long or taken.
	ReasonRoutesPending = "RoutesPending"
	// ReasonRoutingNotConfigured: access URLs are computed but no route serves them yet.
	ReasonRoutingNotConfigured = "RoutingNotConfigured"
	// ReasonRoutingInfraNotReady: the routing infrastructure (the regional cluster, its Gateway, a
	// wildcard listener, TCP listeners for SSH and TCP endpoints) is missing; the message names what.
	ReasonRoutingInfraNotReady = "RoutingInfraNotReady"
)

// Placement reasons (status.placement.reason).
const (
	// PlacementNamed: spec.clusterDeploymentRef names the cluster.
	PlacementNamed = "Named"
	// PlacementOnlyFit: one candidate cluster could hold the workspace now.
	PlacementOnlyFit = "OnlyFit"
	// PlacementTightestFit: of several candidates, the one with the fewest matching GPUs left free
	// after the workspace (then the first by name).
	PlacementTightestFit = "TightestFit"
)

// Condition types and reasons of a WorkspaceClass.
const (
	ClassReadyCondition           = "Ready"
	ReasonServiceTemplateNotFound = "ServiceTemplateNotFound"
	ReasonServiceTemplateInvalid  = "ServiceTemplateInvalid"
	ReasonVersionConstraintUnmet  = "VersionConstraintUnmet"
	ReasonInvalidInjectionPath    = "InvalidInjectionPath"
	ReasonInvalidPrerequisite     = "InvalidPrerequisite"
	// ReasonInvalidValuePath: a userFacingConfig helmValuePath does not parse, points into _exalsius,
	// or names or lies inside (or holds) another value path of the class.
	ReasonInvalidValuePath = "InvalidValuePath"
	ReasonValid            = "Valid"
)
