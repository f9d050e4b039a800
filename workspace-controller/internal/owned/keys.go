package owned

// Labels and annotations the workspace-controller writes on what a workspace owns. Only the
// controller (and the platform) writes ServiceSets and release namespaces, so these say whose an
// object is and what state it is in; a tenant can never set them.
const (
	// LabelStopped marks a workspace's ServiceSet whose values scale the release to zero replicas. The
	// GPU gate does not count such a ServiceSet as holding GPUs: pods still running are counted live on
	// the child, and the workspace's admission is kept until no pod of the release holds a GPU there.
	LabelStopped = "workspaces.exalsius.ai/stopped"
	// LabelValuesSecret marks a workspace's values Secret.
	LabelValuesSecret = "workspaces.exalsius.ai/values-secret"
	// LabelManagedBy marks what the controller made on a child.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelPodSecurityEnforce is the Pod Security Admission label of a namespace.
	LabelPodSecurityEnforce = "pod-security.kubernetes.io/enforce"

	// AnnotationRolloutStarted records, on a workspace's ServiceSet, when its spec last changed; the
	// deployTimeout counts from there and older service states are not trusted as current.
	AnnotationRolloutStarted = "workspaces.exalsius.ai/rollout-started"
	// AnnotationRolloutDeployed records, on a workspace's ServiceSet, the rollout-started stamp of the
	// last rollout k0rdent reported Deployed. A later Provisioning or Pending of the same rollout is a
	// re-sync, not a new deployment, and no deadline applies to it.
	AnnotationRolloutDeployed = "workspaces.exalsius.ai/rollout-deployed"
	// AnnotationRolloutBaseHash records, on a workspace's ServiceSet, the release's lastDeployedHash
	// in the ServiceSet's status when the current rollout started (empty when k0rdent had stamped
	// none), set only when the rollout changes what k0rdent fingerprints (the template or the values).
	// A Deployed whose lastDeployedHash is still this one is the previous rollout's.
	AnnotationRolloutBaseHash = "workspaces.exalsius.ai/rollout-base-hash"
	// AnnotationRolloutBaseTransition records, on a workspace's ServiceSet, the release's
	// lastStateTransitionTime in the ServiceSet's status when the current rollout started (RFC 3339,
	// to the second as k0rdent reports it; empty when there was none). k0rdent's times have a
	// second's precision: a state of the rollout's own second is the rollout's unless it is this one,
	// the state the rollout found (a change made in the second the previous rollout was deployed).
	AnnotationRolloutBaseTransition = "workspaces.exalsius.ai/rollout-base-transition"
	// AnnotationAdmission carries, on a workspace's ServiceSet, the GPU admission the release was made
	// for (JSON, as status.admission). The status records it in the same pass; the annotation keeps it
	// counted when that pass ended between the ServiceSet and the status write.
	AnnotationAdmission = "workspaces.exalsius.ai/admission"
	// AnnotationValuesHash records, on a workspace's ServiceSet, a hash of its values Secret; a change
	// (a rotated password) counts as a rollout.
	AnnotationValuesHash = "workspaces.exalsius.ai/values-hash"
	// AnnotationPrerequisiteTemplate records the full ServiceTemplate name on a prerequisite
	// ServiceSet (the label value is bounded to 63 characters).
	AnnotationPrerequisiteTemplate = "workspaces.exalsius.ai/prerequisite-template"
	// AnnotationPrerequisiteValuesFrom records, on a shared prerequisite ServiceSet, the WorkspaceClass
	// whose prerequisite values it carries.
	AnnotationPrerequisiteValuesFrom = "workspaces.exalsius.ai/prerequisite-values-from"
	// AnnotationUnusedSince records, on a shared prerequisite ServiceSet, when the last workspace that
	// used it went away.
	AnnotationUnusedSince = "workspaces.exalsius.ai/unused-since"

	// ValuesSecretKey is the key of the values document in a workspace's values Secret.
	ValuesSecretKey = "values.yaml"
	// GPUQuotaName is the ResourceQuota in each release namespace that caps its GPU requests at what
	// the gate admitted.
	GPUQuotaName = "workspace-gpus"
	// StopQuotaName is the ResourceQuota (pods: 0) in the release namespace of a stopped workspace: no
	// pod of the release runs while it is stopped, whatever replica count its chart sets.
	StopQuotaName = "workspace-stopped"
	// AnnotationStartedAt is set, on a started workspace's ReplicaSets and StatefulSets on the child,
	// to the time of the start: the change makes their controllers create the pods the stop quota
	// refused at once, not after their back-off.
	AnnotationStartedAt = "workspaces.exalsius.ai/started-at"
)

// Field indexes on WorkspaceDeployments, registered by the workspace controller's setup.
const (
	// IndexCluster indexes workspaces by "<namespace>/<name>" of their ClusterDeployment.
	IndexCluster = "workspace.cluster"
	// IndexClusterIdentity indexes admitted workspaces by the identity of the child cluster their
	// admission was granted on (status.admission.clusterIdentity): the GPU gate counts the admissions
	// of every ClusterDeployment that reaches one child.
	IndexClusterIdentity = "workspace.clusterIdentity"
	// IndexNamespaceWaiter indexes, by their namespace, the workspaces that wait for placement or for
	// their namespace's quota (a workspace a reclaim stopped, waiting to start again, among them), so that a watch event finds them without listing the namespace; an
	// unplaced workspace placed from another namespace (a shared Colony or selector) is indexed under
	// that namespace too.
	IndexNamespaceWaiter = "workspace.namespaceWaiter"
	// IndexClusterWaiter indexes the Waiting workspaces (the GPU gate's queue) by "<namespace>/<name>"
	// of their ClusterDeployment (ClusterWaiterKeys): every admission or release of GPUs on a cluster
	// wakes its queue, and listing the cluster's waiters, not all its workspaces, keeps that wake-up
	// from growing with the workspaces already running there.
	IndexClusterWaiter = "workspace.clusterWaiter"
	// IndexClusterNamespace indexes workspaces by their ClusterDeployment's namespace.
	IndexClusterNamespace = "workspace.clusterNamespace"
	// IndexValuesFrom indexes workspaces by "<Kind>/<namespace>/<name>" of their spec.valuesFrom
	// sources (ValuesFromKey).
	IndexValuesFrom = "workspace.valuesFrom"
	// IndexName indexes workspaces by name, for the release-namespace check (ws-<name> is shared by
	// same-named workspaces of different namespaces).
	IndexName = "workspace.name"
	// IndexReclaimedBy indexes workspaces that reclaim GPUs by "<namespace>/<name>" of each borrower
	// their status.reclaiming names (ReclaimedByKeys): a borrower's pass finds who stops it.
	IndexReclaimedBy = "workspace.reclaimedBy"
)

// IndexServiceSetCluster indexes ServiceSets by "<namespace>/<name>" of the ClusterDeployment their
// label names (ServiceSetClusterKeys): the workspaces' and the prerequisites' ServiceSets of one
// cluster are found without reading those of every other cluster in the namespace (a GPU decision,
// under its cluster's lock, and every workspace event the prerequisite collector sees read them).
const IndexServiceSetCluster = "serviceset.cluster"

// IndexServiceSetWorkspaceNamespace indexes the workspaces' ServiceSets by the namespace of their
// workspace (workspacesv1.WorkspaceNamespaceLabel): a decision under a namespace's quota, and the
// count of its use into the quota's status, read the ServiceSets of that namespace's workspaces only.
const IndexServiceSetWorkspaceNamespace = "serviceset.workspaceNamespace"

// ValuesFromKey is the IndexValuesFrom value of one spec.valuesFrom source.
func ValuesFromKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }
