package colony

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// A ClusterDeployment made from a ClusterTemplate has a Cluster API Cluster of the same name in its
// namespace (k0rdent's templates create it); an adopted cluster has none (a SveltosCluster stands in),
// and a regional one has it on the regional cluster. Where the Cluster is on the management cluster,
// the Colony reads Cluster API's own conditions (v1beta2) rather than KCM's summary of them: KCM
// copies them into the ClusterDeployment's CAPIClusterSummary and Ready conditions on its own passes,
// while Cluster API writes them as it observes the cluster.

// capiClustersServed reports whether the management cluster serves Cluster API's Cluster at
// v1beta2 (Cluster API v1.11 and later). Without it (no Cluster API, or an older one serving only
// v1beta1) the Colony reads the ClusterDeployments' conditions alone.
func capiClustersServed(mapper meta.RESTMapper) (bool, error) {
	gk := schema.GroupKind{Group: clusterv1.GroupVersion.Group, Kind: "Cluster"}
	_, err := mapper.RESTMapping(gk, clusterv1.GroupVersion.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	default:
		return false, fmt.Errorf("looking up %s %s: %w", gk, clusterv1.GroupVersion.Version, err)
	}
}

// capiCluster returns the Cluster API Cluster of a ClusterDeployment (same namespace and name), or nil
// when there is none or the management cluster does not serve Cluster API's v1beta2 Clusters.
func (r *Reconciler) capiCluster(ctx context.Context, namespace, cdName string) (*clusterv1.Cluster, error) {
	if !r.capiClusters {
		return nil, nil
	}
	c := &clusterv1.Cluster{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: cdName}, c)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading Cluster API Cluster %s: %w", cdName, err)
	}
	return c, nil
}

// clusterUp decides whether an entry's cluster itself is up, from its ClusterDeployment's conditions
// and, when there is one, its Cluster API Cluster:
//   - without a Cluster API Cluster: the ClusterDeployment's Ready=True or CAPIClusterSummary=True;
//   - a Cluster being deleted is not up;
//   - a Cluster whose RemoteConnectionProbe is False is not up, whatever the ClusterDeployment still
//     says: Cluster API cannot reach the cluster's API server (it says so only after its grace period,
//     so a blip does not take a cluster out);
//   - a Cluster that is Available is up, also while KCM has not summarised it yet;
//   - otherwise the ClusterDeployment decides, as without a Cluster.
//
// why is Cluster API's reason when the Cluster is why the cluster is not up, else empty.
func clusterUp(conds []metav1.Condition, capi *clusterv1.Cluster) (up bool, why string) {
	if capi == nil {
		return isUp(conds), ""
	}
	who := "Cluster API Cluster " + capi.Name
	if !capi.DeletionTimestamp.IsZero() {
		return false, who + " is being deleted"
	}
	if probe := meta.FindStatusCondition(capi.Status.Conditions, clusterv1.ClusterRemoteConnectionProbeCondition); probe != nil && probe.Status == metav1.ConditionFalse {
		return false, who + ": " + describeCAPI(probe)
	}
	available := meta.FindStatusCondition(capi.Status.Conditions, clusterv1.ClusterAvailableCondition)
	if available != nil && available.Status == metav1.ConditionTrue {
		return true, ""
	}
	if isUp(conds) {
		return true, ""
	}
	if available != nil {
		return false, who + ": " + describeCAPI(available)
	}
	return false, ""
}

// describeCAPI renders a Cluster API condition like describe. Cluster API's v1beta2 messages list
// the conditions they aggregate as "* Kind: text" lines; those become one line, "Kind: text; ...".
func describeCAPI(c *metav1.Condition) string {
	lines := strings.Split(c.Message, "\n")
	parts := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "*")); l != "" {
			parts = append(parts, l)
		}
	}
	flat := *c
	flat.Message = strings.Join(parts, "; ")
	return describe(&flat)
}

// capiClusterToColony maps a Cluster API Cluster to the Colony that controls the ClusterDeployment of
// the same name, read from the cache.
func (r *Reconciler) capiClusterToColony(ctx context.Context, obj client.Object) []reconcile.Request {
	cd := &k0rdentv1beta1.ClusterDeployment{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), cd); err != nil {
		return nil
	}
	ref := metav1.GetControllerOfNoCopy(cd)
	if ref == nil || ref.Kind != "Colony" || !strings.HasPrefix(ref.APIVersion, infrav1.GroupVersion.Group+"/") {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: cd.Namespace, Name: ref.Name}}}
}

// capiClusterChanged lets through the Cluster events that can change a Colony's status: creation,
// deletion, the start of a deletion and a change of the two conditions clusterUp reads. Cluster API
// rewrites its status often (observed generations, machine counts): those pass by.
func capiClusterChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*clusterv1.Cluster)
			cur, okNew := e.ObjectNew.(*clusterv1.Cluster)
			if !okOld || !okNew {
				return true
			}
			if old.DeletionTimestamp.IsZero() != cur.DeletionTimestamp.IsZero() {
				return true
			}
			for _, t := range []string{clusterv1.ClusterAvailableCondition, clusterv1.ClusterRemoteConnectionProbeCondition} {
				if !sameCondition(meta.FindStatusCondition(old.Status.Conditions, t), meta.FindStatusCondition(cur.Status.Conditions, t)) {
					return true
				}
			}
			return false
		},
	}
}

// sameCondition compares what the Colony shows of a condition: status, reason and message.
func sameCondition(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}
