package colony

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/text"
)

// clusterPhase is the state of one Colony entry.
type clusterPhase int

const (
	// clusterProvisioning: the ClusterDeployment exists (or is being made) and is not ready yet.
	clusterProvisioning clusterPhase = iota
	// clusterReady: the cluster is up and its kubeconfig Secret exists.
	clusterReady
	// clusterFailed: the ClusterDeployment reports Ready=False with reason Failed.
	clusterFailed
	// clusterInvalid: the entry could not be applied; the message names the field.
	clusterInvalid
)

// maxQuotedMessage bounds how much of a ClusterDeployment's condition message is repeated in the
// Colony's conditions.
const maxQuotedMessage = 200

// readiness decides whether a ClusterDeployment's cluster is ready from its conditions, its Cluster
// API Cluster (nil when there is none, see clusterUp) and whether its kubeconfig was found: missing
// is empty when it was, else why not ("kubeconfig Secret x not found"). Ready=True or
// CAPIClusterSummary=True means the cluster is up (the aggregate Ready also waits for services,
// CAPIClusterSummary does not), unless Cluster API says otherwise; a missing condition means not
// ready. A cluster that is not up and whose Ready is False with reason Failed has failed. The message
// says what the cluster waits for (Cluster API's words where its Cluster is why), or why it failed,
// and is empty when it is ready.
func readiness(conds []metav1.Condition, capi *clusterv1.Cluster, missing string) (clusterPhase, string) {
	ready := meta.FindStatusCondition(conds, k0rdentv1beta1.ReadyCondition)
	summary := meta.FindStatusCondition(conds, k0rdentv1beta1.CAPIClusterSummaryCondition)
	up, why := clusterUp(conds, capi)
	switch {
	case up && missing == "":
		return clusterReady, ""
	case up:
		return clusterProvisioning, missing
	case ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == k0rdentv1beta1.FailedReason:
		return clusterFailed, describe(ready)
	case why != "":
		return clusterProvisioning, why
	case ready != nil:
		return clusterProvisioning, describe(ready)
	case summary != nil:
		return clusterProvisioning, describe(summary)
	default:
		return clusterProvisioning, "no Ready condition yet"
	}
}

// isUp reports Ready=True or CAPIClusterSummary=True: the cluster itself is up.
func isUp(conds []metav1.Condition) bool {
	return meta.IsStatusConditionTrue(conds, k0rdentv1beta1.ReadyCondition) ||
		meta.IsStatusConditionTrue(conds, k0rdentv1beta1.CAPIClusterSummaryCondition)
}

// locatorTimeout bounds each request to a regional cluster while looking for a kubeconfig there.
const locatorTimeout = 15 * time.Second

// locator finds the kubeconfig of adopted and regional clusters, the same way as the
// workspace-controller and the inventory-collector (common/childcluster).
func (r *Reconciler) locator() *childcluster.Locator {
	return &childcluster.Locator{Reader: r.APIReader, SystemNamespace: r.SystemNamespace,
		UserAgent: bootstrap.UserAgent(Component), Timeout: locatorTimeout, Kubeconfig: r.Kubeconfig}
}

// locateMessage says why an adopted or regional cluster's kubeconfig was not found (it names
// objects, never their content).
func locateMessage(err error) string {
	var ue *childcluster.UnreachableError
	if errors.As(err, &ue) && ue.Err != nil {
		return fmt.Sprintf("kubeconfig not usable (%s): %s", ue.Reason, ue.Err.Error())
	}
	return "kubeconfig not found: " + err.Error()
}

// describe renders a condition for a message: "Ready=False (Progressing): text".
func describe(c *metav1.Condition) string {
	s := fmt.Sprintf("%s=%s", c.Type, c.Status)
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	if c.Message != "" {
		s += ": " + text.Truncate(c.Message, maxQuotedMessage)
	}
	return s
}

// secretMetadata returns a Secret's metadata, or nil when it does not exist, reading only the
// metadata-only cache (the controller never caches Secret data).
func (r *Reconciler) secretMetadata(ctx context.Context, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading Secret %s metadata: %w", name, err)
	}
	return m, nil
}
