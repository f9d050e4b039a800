package k0rdentsim

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// The Cluster API Cluster of a ClusterDeployment made from a ClusterTemplate: KCM's templates create
// it in the ClusterDeployment's namespace under the ClusterDeployment's name, and Cluster API reports
// on it. The simulator has no infrastructure or control-plane providers, so the Cluster names none
// (spec.paused only) and the simulator writes its status: Available False until the child's API server
// answers, then infrastructure provisioned, control plane initialized, Available and
// RemoteConnectionProbe True, phase Provisioned. Adopted clusters have none (a SveltosCluster stands
// in), regional ones have it on their regional cluster, which the simulator leaves out.

// ensureCAPICluster creates the Cluster API Cluster of cd when it does not exist, reporting it not
// available yet.
func (r *clusterDeploymentReconciler) ensureCAPICluster(ctx context.Context, cd *k0rdentv1beta1.ClusterDeployment) error {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: cd.Namespace, Name: cd.Name,
		Labels: map[string]string{"helm.toolkit.fluxcd.io/name": cd.Name, "helm.toolkit.fluxcd.io/namespace": cd.Namespace}},
		Spec: clusterv1.ClusterSpec{Paused: ptr.To(false)}}
	switch err := r.client.Get(ctx, client.ObjectKeyFromObject(c), &clusterv1.Cluster{}); {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading the Cluster API Cluster %s: %w", cd.Name, err)
	}
	err := r.client.Create(ctx, c)
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return fmt.Errorf("creating the Cluster API Cluster %s: %w", cd.Name, err)
	}
	return r.setCAPIClusterStatus(ctx, cd, false)
}

// setCAPIClusterStatus writes the Cluster API Cluster's status as Cluster API would: up (the child's
// API server answers) or still provisioning.
func (r *clusterDeploymentReconciler) setCAPIClusterStatus(ctx context.Context, cd *k0rdentv1beta1.ClusterDeployment, up bool) error {
	c := &clusterv1.Cluster{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: cd.Namespace, Name: cd.Name}, c); err != nil {
		return client.IgnoreNotFound(err)
	}
	before := c.Status.DeepCopy()
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: c.Generation})
	}
	if up {
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		c.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
		c.Status.Phase = string(clusterv1.ClusterPhaseProvisioned)
		set(clusterv1.ClusterRemoteConnectionProbeCondition, metav1.ConditionTrue, clusterv1.ClusterRemoteConnectionProbeSucceededReason, "")
		set(clusterv1.ClusterAvailableCondition, metav1.ConditionTrue, clusterv1.ClusterAvailableReason, "")
	} else {
		c.Status.Phase = string(clusterv1.ClusterPhaseProvisioning)
		set(clusterv1.ClusterAvailableCondition, metav1.ConditionFalse, clusterv1.ClusterNotAvailableReason,
			"* ControlPlaneAvailable: Control plane not yet initialized")
	}
	c.Status.ObservedGeneration = c.Generation
	if equality.Semantic.DeepEqual(before, &c.Status) {
		return nil
	}
	if err := r.client.Status().Update(ctx, c); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing the Cluster API Cluster %s status: %w", cd.Name, err)
	}
	return nil
}

// deleteCAPICluster deletes the Cluster API Cluster of cd, as uninstalling the template's release
// does (Cluster API's own teardown of the machines is the child's stop here).
func (r *clusterDeploymentReconciler) deleteCAPICluster(ctx context.Context, cd *k0rdentv1beta1.ClusterDeployment) error {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: cd.Namespace, Name: cd.Name}}
	if err := r.client.Delete(ctx, c); err != nil && !apierrors.IsNotFound(err) && !isNoKind(err) {
		return fmt.Errorf("deleting the Cluster API Cluster %s: %w", cd.Name, err)
	}
	return nil
}
