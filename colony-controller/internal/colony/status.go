package colony

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/common/status"
	"github.com/exalsius/exalsius-operator/common/text"
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

// computeStatus returns the fields of the Colony's status that the colony-controller owns. Conditions
// keep their lastTransitionTime unless their status changes.
func computeStatus(colony *infrav1.Colony, obs *observation) infrav1.ColonyStatus {
	st := infrav1.ColonyStatus{
		ObservedGeneration:   colony.Generation,
		TotalClusters:        int32(len(colony.Spec.ColonyClusters)),
		KubeconfigSecretName: obs.kubeconfig.secretName,
	}
	for _, c := range colony.Status.Conditions {
		switch c.Type {
		case infrav1.ColonyClustersReadyCondition, infrav1.ColonyReadyCondition,
			infrav1.ColonyReconcilingCondition, infrav1.ColonyStalledCondition:
			st.Conditions = append(st.Conditions, c)
		}
	}
	if obs.deleting {
		st.Phase = infrav1.ColonyPhaseDeleting
		st.KubeconfigSecretName = colony.Status.KubeconfigSecretName
		waiting := make([]string, 0, len(obs.remaining))
		for _, cd := range obs.remaining {
			st.ClusterDeploymentRefs = append(st.ClusterDeploymentRefs, infrav1.ObjectRef{Name: cd.name, Namespace: colony.Namespace})
			waiting = append(waiting, cd.String())
		}
		msg := "all ClusterDeployments are deleted"
		if len(waiting) > 0 {
			msg = "waiting for ClusterDeployments to be deleted: " + strings.Join(waiting, ", ")
		}
		msg = text.Truncate(msg, maxConditionMessage)
		setCondition(&st, infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonDeleting, msg)
		setCondition(&st, infrav1.ColonyReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonDeleting, msg)
		setKstatusConditions(&st)
		return st
	}

	var invalid, failed, notReady []string
	for _, e := range obs.entries {
		if e.exists {
			st.ClusterDeploymentRefs = append(st.ClusterDeploymentRefs, infrav1.ObjectRef{Name: e.cdName, Namespace: colony.Namespace})
		}
		who := fmt.Sprintf("%s (ClusterDeployment %s)", e.clusterName, e.cdName)
		if e.invalid != "" {
			invalid = append(invalid, e.invalid)
		}
		switch {
		case e.phase == clusterReady && obs.kubeconfig.included[e.clusterName]:
			st.ReadyClusters++
			continue
		case e.phase == clusterFailed:
			failed = append(failed, who+": "+e.message)
			continue
		case e.invalid != "" && !e.exists:
			continue // listed as invalid already
		}
		reason := e.message
		switch {
		case e.applyError != "":
			reason = e.applyError
		case e.phase == clusterReady && obs.kubeconfig.problems[e.clusterName] != "":
			reason = obs.kubeconfig.problems[e.clusterName]
		case e.phase == clusterReady:
			reason = "kubeconfig not aggregated yet"
		}
		notReady = append(notReady, who+": "+reason)
	}

	var parts []string
	parts = append(parts, fmt.Sprintf("%d/%d clusters ready", st.ReadyClusters, st.TotalClusters))
	if len(invalid) > 0 {
		parts = append(parts, "invalid entries: "+strings.Join(invalid, "; "))
	}
	if len(failed) > 0 {
		parts = append(parts, "failed: "+strings.Join(failed, "; "))
	}
	if len(notReady) > 0 {
		parts = append(parts, fmt.Sprintf("not ready, left out of Secret %s: %s",
			KubeconfigSecretName(colony.Name), strings.Join(notReady, "; ")))
	}
	if len(obs.removing) > 0 {
		parts = append(parts, "deleting ClusterDeployments of removed entries: "+strings.Join(obs.removing, ", "))
	}
	msg := text.Truncate(strings.Join(parts, ". "), maxConditionMessage)

	status, reason := metav1.ConditionFalse, infrav1.ColonyReasonClustersNotReady
	switch {
	case len(invalid) > 0:
		reason = infrav1.ColonyReasonInvalidEntry
	case len(failed) > 0:
		reason = infrav1.ColonyReasonClusterFailed
	case st.TotalClusters == 0:
		status, reason, msg = metav1.ConditionTrue, infrav1.ColonyReasonNoClusters, "the Colony has no clusters"
	case len(notReady) == 0:
		status, reason = metav1.ConditionTrue, infrav1.ColonyReasonAllClustersReady
	}
	setCondition(&st, infrav1.ColonyClustersReadyCondition, status, reason, msg)

	switch {
	case obs.kubeconfig.conflict != "":
		setCondition(&st, infrav1.ColonyReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonKubeconfigSecretFailed,
			text.Truncate(obs.kubeconfig.conflict, maxConditionMessage))
	case status == metav1.ConditionTrue && len(obs.kubeconfig.shards) > 1:
		setCondition(&st, infrav1.ColonyReadyCondition, status, reason,
			text.Truncate(msg+fmt.Sprintf(". Kubeconfigs in Secrets %s (index in %s)", strings.Join(obs.kubeconfig.shards, ", "),
				st.KubeconfigSecretName), maxConditionMessage))
	case status == metav1.ConditionTrue && st.KubeconfigSecretName != "":
		setCondition(&st, infrav1.ColonyReadyCondition, status, reason,
			text.Truncate(msg+fmt.Sprintf(". Kubeconfig in Secret %s", st.KubeconfigSecretName), maxConditionMessage))
	default:
		setCondition(&st, infrav1.ColonyReadyCondition, status, reason, msg)
	}

	switch {
	case len(invalid) > 0 || len(failed) > 0 || obs.kubeconfig.conflict != "":
		st.Phase = infrav1.ColonyPhaseDegraded
	case status == metav1.ConditionTrue:
		st.Phase = infrav1.ColonyPhaseReady
	default:
		st.Phase = infrav1.ColonyPhaseProvisioning
	}
	setKstatusConditions(&st)
	return st
}

// setKstatusConditions sets, from the phase, the conditions GitOps tools read (the kstatus
// conventions that Flux's and Argo CD's health checks understand): Reconciling True while Provisioning
// or Deleting, Stalled True while Degraded, each with Ready's reason and message; both are removed
// otherwise.
func setKstatusConditions(st *infrav1.ColonyStatus) {
	ready := meta.FindStatusCondition(st.Conditions, infrav1.ColonyReadyCondition)
	reconciling, stalled := false, false
	switch st.Phase {
	case infrav1.ColonyPhaseProvisioning, infrav1.ColonyPhaseDeleting:
		reconciling = true
	case infrav1.ColonyPhaseDegraded:
		stalled = true
	}
	for _, k := range []struct {
		typ string
		on  bool
	}{{infrav1.ColonyReconcilingCondition, reconciling}, {infrav1.ColonyStalledCondition, stalled}} {
		if k.on && ready != nil {
			setCondition(st, k.typ, metav1.ConditionTrue, ready.Reason, ready.Message)
		} else {
			meta.RemoveStatusCondition(&st.Conditions, k.typ)
		}
	}
}

func setCondition(st *infrav1.ColonyStatus, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: st.ObservedGeneration,
	})
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

// statusObject is the Colony to apply: its identity and the owned status fields, without gpuInventory.
func statusObject(colony *infrav1.Colony, st infrav1.ColonyStatus) *infrav1.Colony {
	st.GPUInventory = nil
	return &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Name: colony.Name, Namespace: colony.Namespace}, Status: st}
}
