package colony

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
)

const (
	// deleteRequeueMin and deleteRequeueMax bound the safety-net requeue while a Colony waits for its
	// ClusterDeployments. Their own changes (a finalizer removed, the object gone) wake the Colony
	// at once through the watch; the requeue only covers a missed event.
	deleteRequeueMin = 5 * time.Second
	deleteRequeueMax = 5 * time.Minute
)

// remainingClusterDeployment is a ClusterDeployment a deleted Colony still waits for.
type remainingClusterDeployment struct {
	name       string
	finalizers []string
}

// String renders "name (finalizers: a, b)" for the Colony's conditions.
func (c remainingClusterDeployment) String() string {
	if len(c.finalizers) == 0 {
		return c.name
	}
	return fmt.Sprintf("%s (finalizers: %s)", c.name, strings.Join(c.finalizers, ", "))
}

// deleteRequeue grows with the time the Colony has waited: about half of it, between 5 seconds and
// 5 minutes, so a ClusterDeployment stuck on a finalizer is looked at less and less often.
func deleteRequeue(waited time.Duration) time.Duration {
	return min(max(waited/2, deleteRequeueMin), deleteRequeueMax)
}

// reconcileDelete deletes every ClusterDeployment the Colony controls and removes the Colony's
// finalizer once they are all gone. Until then the phase is Deleting and the conditions name the
// ClusterDeployments still present with their finalizers. It never blocks on one of them: each
// pass deletes what is left and returns. A Colony of the upstream operator deleted before this
// controller replaced its finalizer is torn down the same way, and both finalizers are removed.
func (r *Reconciler) reconcileDelete(ctx context.Context, colony *infrav1.Colony, obs *observation) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if !controllerutil.ContainsFinalizer(colony, infrav1.ColonyFinalizer) && !controllerutil.ContainsFinalizer(colony, infrav1.LegacyColonyFinalizer) {
		obs.skip = true
		return ctrl.Result{}, nil
	}
	all, err := r.listClusterDeployments(ctx, colony)
	if err != nil {
		countError(stageRead)
		obs.skip = true
		return ctrl.Result{}, err
	}
	obs.deleting = true
	var errs []error
	for _, cd := range all {
		if !isControlledBy(cd, colony) {
			continue
		}
		if err := r.deleteClusterDeployment(ctx, cd); err != nil {
			errs = append(errs, err)
		}
		obs.remaining = append(obs.remaining, remainingClusterDeployment{name: cd.Name, finalizers: cd.Finalizers})
	}
	sort.Slice(obs.remaining, func(i, j int) bool { return obs.remaining[i].name < obs.remaining[j].name })
	if len(errs) > 0 {
		countError(stageDelete)
		return ctrl.Result{}, errors.Join(errs...)
	}
	if len(obs.remaining) > 0 {
		waited := time.Since(colony.DeletionTimestamp.Time)
		log.V(1).Info("waiting for ClusterDeployments to be deleted", "remaining", len(obs.remaining))
		return ctrl.Result{RequeueAfter: deleteRequeue(waited)}, nil
	}

	// The etcd claims of every cluster the Colony names (etcdpvc.go), also when its ClusterDeployment
	// went before this pass could ask: a restart between the two deletions loses nothing. A
	// ClusterDeployment of that name that the Colony does not control keeps its claim.
	for _, e := range colony.Spec.ColonyClusters {
		name := ClusterDeploymentName(colony.Name, e.ClusterName)
		if _, exists := all[name]; exists {
			continue
		}
		if err := r.deleteEtcdPVC(ctx, colony.Namespace, name, e.Credential()); err != nil {
			countError(stageDelete)
			return ctrl.Result{}, err
		}
	}
	patch := client.MergeFromWithOptions(colony.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(colony, infrav1.ColonyFinalizer)
	controllerutil.RemoveFinalizer(colony, infrav1.LegacyColonyFinalizer)
	if err := r.Client.Patch(ctx, colony, patch, client.FieldOwner(FieldManager)); err != nil {
		if apierrors.IsNotFound(err) {
			obs.skip = true
			return ctrl.Result{}, nil
		}
		countError(stageFinalizer)
		return ctrl.Result{}, fmt.Errorf("removing finalizer: %w", err)
	}
	log.Info("every ClusterDeployment is deleted; finalizer removed")
	obs.skip = true
	r.forget(types.NamespacedName{Namespace: colony.Namespace, Name: colony.Name})
	return ctrl.Result{}, nil
}
