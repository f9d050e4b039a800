package world

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Storage of a child cluster: a default StorageClass whose claims a small provisioner in the world
// satisfies with hostPath PersistentVolumes, so charts with PersistentVolumeClaims reach Running.
const (
	// StorageClassName is the child's default StorageClass.
	StorageClassName = "standard"
	// StorageProvisioner is the provisioner name of that StorageClass.
	StorageProvisioner = "local-world.exalsius.ai/hostpath"
	// provisionedByAnnotation marks PersistentVolumes a provisioner created (as external provisioners do).
	provisionedByAnnotation = "pv.kubernetes.io/provisioned-by"
	// storageProvisionerAnnotation is what kube-controller-manager sets on a claim it leaves to an
	// external provisioner.
	storageProvisionerAnnotation = "volume.kubernetes.io/storage-provisioner"
)

// ensureStorageClass creates the default StorageClass.
func (c *ChildCluster) ensureStorageClass(ctx context.Context) error {
	del := corev1.PersistentVolumeReclaimDelete
	mode := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: StorageClassName, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       StorageProvisioner,
		ReclaimPolicy:     &del,
		VolumeBindingMode: &mode,
	}
	if err := c.Env.Client.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("child %s: StorageClass: %w", c.Name, err)
	}
	return nil
}

// runProvisioner provisions a PersistentVolume for every pending claim of the default class and
// deletes released ones, until ctx ends. kube-controller-manager binds the volume to its claim.
func (c *ChildCluster) runProvisioner(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = c.provisionOnce(ctx)
	}
}

func (c *ChildCluster) provisionOnce(ctx context.Context) error {
	cl := c.Env.Client
	var claims corev1.PersistentVolumeClaimList
	if err := cl.List(ctx, &claims); err != nil {
		return err
	}
	for i := range claims.Items {
		pvc := &claims.Items[i]
		if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil {
			continue
		}
		class := ""
		if pvc.Spec.StorageClassName != nil {
			class = *pvc.Spec.StorageClassName
		}
		if class != StorageClassName && pvc.Annotations[storageProvisionerAnnotation] != StorageProvisioner {
			continue
		}
		size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		modes := pvc.Spec.AccessModes
		if len(modes) == 0 {
			modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + string(pvc.UID), Annotations: map[string]string{provisionedByAnnotation: StorageProvisioner}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
				AccessModes:                   modes,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				StorageClassName:              StorageClassName,
				VolumeMode:                    pvc.Spec.VolumeMode,
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/local-world/" + string(pvc.UID)}},
			},
		}
		if err := cl.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	var vols corev1.PersistentVolumeList
	if err := cl.List(ctx, &vols); err != nil {
		return err
	}
	for i := range vols.Items {
		pv := &vols.Items[i]
		if pv.Annotations[provisionedByAnnotation] == StorageProvisioner && pv.Status.Phase == corev1.VolumeReleased &&
			pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete {
			if err := cl.Delete(ctx, pv); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}
