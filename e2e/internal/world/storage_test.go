package world

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// The provisioner gives a pending claim of the default class a volume bound to it (by claimRef) of
// the requested size, leaves claims of other classes alone, and deletes its released volumes.
func TestProvisioner(t *testing.T) {
	env, err := testenv.StartChild("storage")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	c := &ChildCluster{Name: "storage", Env: env}
	ctx := context.Background()
	if err := c.ensureStorageClass(ctx); err != nil {
		t.Fatal(err)
	}
	var sc storagev1.StorageClass
	if err := env.Client.Get(ctx, client.ObjectKey{Name: StorageClassName}, &sc); err != nil || sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
		t.Fatalf("default StorageClass: %v %v", sc.Annotations, err)
	}
	claim := func(name string, class *string) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: class,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("3Gi")}}},
		}
		if err := env.Client.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
		// Without kube-controller-manager nobody sets the phase: set Pending as it would.
		pvc.Status.Phase = corev1.ClaimPending
		if err := env.Client.Status().Update(ctx, pvc); err != nil {
			t.Fatal(err)
		}
		return pvc
	}
	std, other := StorageClassName, "other"
	mine := claim("data", &std)
	claim("foreign", &other)
	if err := c.provisionOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var pvs corev1.PersistentVolumeList
	if err := env.Client.List(ctx, &pvs); err != nil {
		t.Fatal(err)
	}
	if len(pvs.Items) != 1 {
		t.Fatalf("%d volumes, want 1 (only the default class's claim)", len(pvs.Items))
	}
	pv := pvs.Items[0]
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != mine.UID || pv.Spec.StorageClassName != StorageClassName {
		t.Errorf("volume %s claimRef %v class %q", pv.Name, pv.Spec.ClaimRef, pv.Spec.StorageClassName)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.String() != "3Gi" {
		t.Errorf("capacity %s, want 3Gi", got.String())
	}
	pv.Status.Phase = corev1.VolumeReleased
	if err := env.Client.Status().Update(ctx, &pv); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if err := c.provisionOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.List(ctx, &pvs); err != nil {
		t.Fatal(err)
	}
	for _, v := range pvs.Items {
		if v.Name == pv.Name && v.DeletionTimestamp == nil {
			t.Errorf("the released volume %s was not deleted", v.Name)
		}
	}
}
