package colony

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The etcd volume of a hosted control plane. k0smotron runs a hosted control plane's etcd as the
// StatefulSet `kmc-<cd>-etcd` next to the ClusterDeployment, whose volume claim template leaves the
// PersistentVolumeClaim `etcd-data-kmc-<cd>-etcd-0` behind when the cluster goes: a cluster made again
// under the same name (a Colony entry removed and added back, a Colony deleted and re-applied) would
// start from the old cluster's etcd. The colony-controller deletes that claim when it deletes the
// ClusterDeployment, as the upstream operator did after the ClusterDeployment was gone: Kubernetes'
// PVC protection keeps a claim that a pod still mounts until the pod is gone, so the claim goes once
// the old etcd has stopped. A Colony being deleted also sweeps the claims of all its entries' names
// before it lets go, so a restart between the two deletions loses nothing. A ClusterDeployment whose
// Credential names a Region has its cluster objects, and so its hosted control plane and the claim,
// on the Region's cluster (a KOF regional cluster), in the namespace of the same name: the claim is
// deleted there, through the Region's kubeconfig.

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;delete

// EtcdPVCName is the PersistentVolumeClaim of the etcd of the control plane k0smotron hosts for the
// ClusterDeployment cd.
func EtcdPVCName(cd string) string { return "etcd-data-kmc-" + cd + "-etcd-0" }

// deleteEtcdPVC asks the etcd claim of cd to go, when there is one that is not going already: on the
// management cluster, and on the cluster of the Region that credential (the ClusterDeployment's, ""
// when it has none) names. It reads with the API reader (claims are not cached: this is only done
// during deletions).
func (r *Reconciler) deleteEtcdPVC(ctx context.Context, namespace, cd, credential string) error {
	if err := deleteEtcdPVCOn(ctx, r.APIReader, r.Client, namespace, cd); err != nil {
		return err
	}
	if credential == "" {
		return nil
	}
	regional, region, err := r.locator().RegionClient(ctx, client.ObjectKey{Namespace: namespace, Name: cd}, credential)
	if err != nil {
		return fmt.Errorf("reaching the cluster of Region %s for the etcd claim of %s: %w", region, cd, err)
	}
	if regional == nil {
		return nil
	}
	if err := deleteEtcdPVCOn(ctx, regional, regional, namespace, cd); err != nil {
		return fmt.Errorf("on the cluster of Region %s: %w", region, err)
	}
	return nil
}

// deleteEtcdPVCOn deletes the etcd claim of cd through reader and writer (one cluster's).
func deleteEtcdPVCOn(ctx context.Context, reader client.Reader, writer client.Writer, namespace, cd string) error {
	pvc := &corev1.PersistentVolumeClaim{}
	name := EtcdPVCName(cd)
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading PersistentVolumeClaim %s: %w", name, err)
	}
	if pvc.DeletionTimestamp != nil {
		return nil
	}
	uid := pvc.UID
	if err := writer.Delete(ctx, pvc, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting PersistentVolumeClaim %s: %w", name, err)
	}
	return nil
}
