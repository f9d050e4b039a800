package colony

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/common/text"
)

// The Colony's status is derived here from one observation, one function per condition and one for
// the phase; computeStatus only composes them. Each function is pure: it reads what it is given
// and returns a condition without observedGeneration, which computeStatus stamps.

// computeStatus returns the fields of the Colony's status that the colony-controller owns. Conditions
// keep their lastTransitionTime unless their status changes.
func computeStatus(colony *infrav1.Colony, obs *observation) infrav1.ColonyStatus {
	st := infrav1.ColonyStatus{
		ObservedGeneration:   colony.Generation,
		TotalClusters:        int32(colony.ManagedClusters()),
		KubeconfigSecretName: obs.kubeconfig.secretName,
	}
	for _, c := range colony.Status.Conditions {
		switch c.Type {
		case infrav1.ColonyClustersReadyCondition, infrav1.ColonyReadyCondition,
			infrav1.ColonyReconcilingCondition, infrav1.ColonyStalledCondition:
			st.Conditions = append(st.Conditions, c)
		}
	}

	var clustersReady, ready metav1.Condition
	if obs.deleting {
		st.KubeconfigSecretName = colony.Status.KubeconfigSecretName
		for _, cd := range obs.remaining {
			st.ClusterDeploymentRefs = append(st.ClusterDeploymentRefs, infrav1.ObjectRef{Name: cd.name, Namespace: colony.Namespace})
		}
		clustersReady = deletingCondition(infrav1.ColonyClustersReadyCondition, obs.remaining)
		ready = deletingCondition(infrav1.ColonyReadyCondition, obs.remaining)
		st.Phase = infrav1.ColonyPhaseDeleting
	} else {
		t := tallyEntries(colony, obs)
		st.ClusterDeploymentRefs, st.ReadyClusters = t.refs, t.ready
		clustersReady = clustersReadyCondition(colony, obs, t)
		ready = readyCondition(clustersReady, obs.kubeconfig)
		st.Phase = colonyPhase(t, obs.kubeconfig, clustersReady)
	}
	setCondition(&st, clustersReady)
	setCondition(&st, ready)
	conditions.SetKstatus(&st.Conditions, infrav1.ColonyReadyCondition, st.ObservedGeneration, colonyProgress(st.Phase))
	return st
}

// entryTally is what the Colony's entries say, sorted into the lists that the conditions name.
type entryTally struct {
	// refs are the ClusterDeployments that exist and that the Colony controls, in entry order.
	refs []infrav1.ObjectRef
	// ready counts the entries whose cluster is ready and whose context is in the kubeconfig Secret.
	ready int32
	// invalid holds the fields of entries that could not be applied.
	invalid []string
	// failed holds "<cluster> (ClusterDeployment <cd>): <message>" of each failed cluster.
	failed []string
	// notReady holds "<cluster> (ClusterDeployment <cd>): <why>" of each cluster not (yet) ready:
	// the apply error, the kubeconfig's problem, or the ClusterDeployment's message.
	notReady []string
}

// tallyEntries sorts the entries of a Colony not being deleted. It reads each entry's state and which
// clusters the kubeconfig Secret includes (and why the others are left out).
func tallyEntries(colony *infrav1.Colony, obs *observation) entryTally {
	var t entryTally
	for _, e := range obs.entries {
		if e.exists {
			t.refs = append(t.refs, infrav1.ObjectRef{Name: e.cdName, Namespace: colony.Namespace})
		}
		who := fmt.Sprintf("%s (ClusterDeployment %s)", e.clusterName, e.cdName)
		if e.invalid != "" {
			t.invalid = append(t.invalid, e.invalid)
		}
		switch {
		case e.phase == clusterReady && obs.kubeconfig.included[e.clusterName]:
			t.ready++
			continue
		case e.phase == clusterFailed:
			t.failed = append(t.failed, who+": "+e.message)
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
		t.notReady = append(t.notReady, who+": "+reason)
	}
	return t
}

// clustersReadyCondition is ClustersReady of a Colony not being deleted. It reads the tally of the
// entries, the number of entries, the ClusterDeployments of removed entries still being deleted and
// the name of the kubeconfig Secret. Reasons, the first that applies: InvalidEntry (False), an entry
// could not be applied; ClusterFailed (False), a ClusterDeployment failed; NoClusters (True), the
// Colony has no entries; AllClustersReady (True); ClustersNotReady (False) otherwise. The message
// counts the ready clusters and names every entry that is not.
func clustersReadyCondition(colony *infrav1.Colony, obs *observation, t entryTally) metav1.Condition {
	total := colony.ManagedClusters()
	parts := []string{fmt.Sprintf("%d/%d clusters ready", t.ready, total)}
	if len(t.invalid) > 0 {
		parts = append(parts, "invalid entries: "+strings.Join(t.invalid, "; "))
	}
	if len(t.failed) > 0 {
		parts = append(parts, "failed: "+strings.Join(t.failed, "; "))
	}
	if len(t.notReady) > 0 {
		parts = append(parts, fmt.Sprintf("not ready, left out of Secret %s: %s",
			KubeconfigSecretName(colony.Name), strings.Join(t.notReady, "; ")))
	}
	if len(obs.removing) > 0 {
		parts = append(parts, "deleting ClusterDeployments of removed entries: "+strings.Join(obs.removing, ", "))
	}
	c := metav1.Condition{Type: infrav1.ColonyClustersReadyCondition, Status: metav1.ConditionFalse,
		Reason: infrav1.ColonyReasonClustersNotReady, Message: text.Truncate(strings.Join(parts, ". "), maxConditionMessage)}
	switch {
	case len(t.invalid) > 0:
		c.Reason = infrav1.ColonyReasonInvalidEntry
	case len(t.failed) > 0:
		c.Reason = infrav1.ColonyReasonClusterFailed
	case total == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, infrav1.ColonyReasonNoClusters, "the Colony has no clusters"
	case len(t.notReady) == 0:
		c.Status, c.Reason = metav1.ConditionTrue, infrav1.ColonyReasonAllClustersReady
	}
	return c
}

// readyCondition is Ready of a Colony not being deleted. It reads ClustersReady and the outcome of
// the kubeconfig Secret's write. Reasons: KubeconfigSecretFailed (False), a Secret of the Colony's
// names exists and the Colony does not control it (the message says which); otherwise ClustersReady's
// status, reason and message, to which a True Ready adds the Secret (or the shards and their index)
// that holds the kubeconfig.
func readyCondition(clustersReady metav1.Condition, kc kubeconfigResult) metav1.Condition {
	c := clustersReady
	c.Type = infrav1.ColonyReadyCondition
	switch {
	case kc.conflict != "":
		c.Status, c.Reason = metav1.ConditionFalse, infrav1.ColonyReasonKubeconfigSecretFailed
		c.Message = text.Truncate(kc.conflict, maxConditionMessage)
	case c.Status == metav1.ConditionTrue && len(kc.shards) > 1:
		c.Message = text.Truncate(c.Message+fmt.Sprintf(". Kubeconfigs in Secrets %s (index in %s)",
			strings.Join(kc.shards, ", "), kc.secretName), maxConditionMessage)
	case c.Status == metav1.ConditionTrue && kc.secretName != "":
		c.Message = text.Truncate(c.Message+fmt.Sprintf(". Kubeconfig in Secret %s", kc.secretName), maxConditionMessage)
	}
	return c
}

// deletingCondition is ClustersReady or Ready (typ) of a Colony being deleted: False with reason
// Deleting. It reads the ClusterDeployments the deletion still waits for, which the message names
// with their finalizers.
func deletingCondition(typ string, remaining []remainingClusterDeployment) metav1.Condition {
	waiting := make([]string, 0, len(remaining))
	for _, cd := range remaining {
		waiting = append(waiting, cd.String())
	}
	msg := "all ClusterDeployments are deleted"
	if len(waiting) > 0 {
		msg = "waiting for ClusterDeployments to be deleted: " + strings.Join(waiting, ", ")
	}
	return metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: infrav1.ColonyReasonDeleting,
		Message: text.Truncate(msg, maxConditionMessage)}
}

// colonyPhase is the phase of a Colony not being deleted: Degraded when an entry is invalid, a
// cluster failed or the kubeconfig Secret cannot be written; Ready when ClustersReady is True;
// Provisioning otherwise.
func colonyPhase(t entryTally, kc kubeconfigResult, clustersReady metav1.Condition) infrav1.ColonyPhase {
	switch {
	case len(t.invalid) > 0 || len(t.failed) > 0 || kc.conflict != "":
		return infrav1.ColonyPhaseDegraded
	case clustersReady.Status == metav1.ConditionTrue:
		return infrav1.ColonyPhaseReady
	default:
		return infrav1.ColonyPhaseProvisioning
	}
}

// colonyProgress says which kstatus condition (conditions.SetKstatus) the phase calls for: Reconciling
// while Provisioning or Deleting, Stalled while Degraded, neither while Ready. Both repeat Ready's
// reason and message.
func colonyProgress(phase infrav1.ColonyPhase) conditions.Progress {
	switch phase {
	case infrav1.ColonyPhaseProvisioning, infrav1.ColonyPhaseDeleting:
		return conditions.InProgress
	case infrav1.ColonyPhaseDegraded:
		return conditions.Failed
	}
	return conditions.Current
}

// setCondition sets c on the status with the status's observedGeneration.
func setCondition(st *infrav1.ColonyStatus, c metav1.Condition) {
	c.ObservedGeneration = st.ObservedGeneration
	meta.SetStatusCondition(&st.Conditions, c)
}
