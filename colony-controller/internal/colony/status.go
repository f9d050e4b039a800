package colony

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/common/status"
)

// maxConditionMessage bounds the Colony's condition messages: the bound every component's status
// writes cut messages to (the API allows 32768 bytes).
const maxConditionMessage = conditions.MaxMessageBytes

// entryState is what one reconcile learned about one Colony entry.
type entryState struct {
	clusterName string
	cdName      string
	// exists: the ClusterDeployment exists and the Colony controls it.
	exists bool
	// invalid names the field of an entry that could not be applied.
	invalid string
	// refused: the API server (or an admission webhook or policy) refused the ClusterDeployment.
	refused bool
	// applyError is a transient error applying the entry.
	applyError string
	// phase and message describe the existing ClusterDeployment's readiness.
	phase   clusterPhase
	message string
	// secret is the metadata of the cluster's kubeconfig Secret, when it exists.
	secret *metav1.PartialObjectMetadata
	// indirect is the kubeconfig of an adopted or a regional cluster, which has no `<cd>-kubeconfig`
	// Secret on the management cluster (found through childcluster.Locator). Secret content: never
	// logged or shown.
	indirect []byte
	// recheck: the cluster is up without `<cd>-kubeconfig`; its kubeconfig was looked for elsewhere.
	recheck bool
}

// observation is everything a reconcile learned, from which the status is computed.
type observation struct {
	entries    []*entryState
	kubeconfig kubeconfigResult
	// removing lists ClusterDeployments of removed entries that are still being deleted.
	removing []string
	// deleting is set while the Colony is being deleted; remaining describes what it waits for.
	deleting  bool
	remaining []remainingClusterDeployment
	// skip: the Colony is gone (finalizer removed); there is no status to write.
	skip bool
}

// ownedStatusEqual compares the fields the colony-controller owns, ignoring lastTransitionTime.
func ownedStatusEqual(a, b infrav1.ColonyStatus) bool {
	if a.Phase != b.Phase || a.ObservedGeneration != b.ObservedGeneration || a.TotalClusters != b.TotalClusters ||
		a.ReadyClusters != b.ReadyClusters || a.KubeconfigSecretName != b.KubeconfigSecretName ||
		len(a.ClusterDeploymentRefs) != len(b.ClusterDeploymentRefs) {
		return false
	}
	for i := range a.ClusterDeploymentRefs {
		if a.ClusterDeploymentRefs[i] != b.ClusterDeploymentRefs[i] {
			return false
		}
	}
	for _, typ := range []string{infrav1.ColonyClustersReadyCondition, infrav1.ColonyReadyCondition,
		infrav1.ColonyReconcilingCondition, infrav1.ColonyStalledCondition} {
		x, y := meta.FindStatusCondition(a.Conditions, typ), meta.FindStatusCondition(b.Conditions, typ)
		if (x == nil) != (y == nil) {
			return false
		}
		if x != nil && (x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message ||
			x.ObservedGeneration != y.ObservedGeneration) {
			return false
		}
	}
	return true
}

// patchStatus writes the owned status fields with server-side apply on the status subresource,
// with the colony-controller field manager, and only when they changed. gpuInventory, which the
// inventory-collector owns, is never sent and so never touched; the counts are sent even when zero. It
// records events for condition transitions.
func (r *Reconciler) patchStatus(ctx context.Context, colony *infrav1.Colony, desired infrav1.ColonyStatus) error {
	if ownedStatusEqual(colony.Status, desired) {
		return nil
	}
	if err := status.Apply(ctx, r.Client, statusObject(colony, desired), FieldManager, ownedZeros); err != nil {
		return fmt.Errorf("applying Colony status: %w", err)
	}
	r.recordTransitions(colony, desired)
	return nil
}

// ownedZeros: the counts are always sent, so that zero is explicit (kubectl's Ready and Total columns
// show 0, not nothing).
var ownedZeros = status.Explicit("totalClusters", "readyClusters")

// statusObject is the Colony to apply: its identity and the owned status fields, without gpuInventory
// and gpus (the inventory-collector's).
func statusObject(colony *infrav1.Colony, st infrav1.ColonyStatus) *infrav1.Colony {
	st.GPUInventory, st.GPUs = nil, nil
	return &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Name: colony.Name, Namespace: colony.Namespace}, Status: st}
}
