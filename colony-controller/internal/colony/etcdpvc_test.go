package colony

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

func createPVC(t *testing.T, ns, name string) { createPVCOn(t, mgmt.Client, ns, name) }

func createPVCOn(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	if err := c.Create(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
}

// pvcGone: the claim is gone or being deleted (the test API server runs no controller-manager, so
// the pvc-protection finalizer the API server adds is never removed here).
func pvcGone(ns, name string) func() error { return pvcGoneOn(mgmt.Client, ns, name) }

func pvcGoneOn(c client.Client, ns, name string) func() error {
	return func() error {
		pvc := &corev1.PersistentVolumeClaim{}
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pvc)
		if apierrors.IsNotFound(err) || (err == nil && pvc.DeletionTimestamp != nil) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	}
}

// TestEtcdPVCCleanup: the etcd claim of a hosted control plane (etcd-data-kmc-<cd>-etcd-0) goes with
// its ClusterDeployment, when an entry is removed and when the Colony is deleted; the claim of a
// cluster the Colony does not control, and any other claim, stay.
func TestEtcdPVCCleanup(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	// A ClusterDeployment named like an entry that the Colony does not control, with its claim.
	foreign := &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "col-theirs"},
		Spec: k0rdentv1beta1.ClusterDeploymentSpec{Template: "theirs"}}
	if err := mgmt.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{EtcdPVCName("col-a"), EtcdPVCName("col-b"), EtcdPVCName("col-theirs"), "etcd-data-kmc-other-etcd-0", "work"} {
		createPVC(t, ns, name)
	}
	startManager(t, ns)
	col := createColony(t, ns, "col", entry(t, "a", nil), entry(t, "b", nil), entry(t, "theirs", nil))
	waitCD(t, ns, "col-a", "col-a", nil)
	waitCD(t, ns, "col-b", "col-b", nil)

	updateColony(t, ns, "col", func(c *infrav1.Colony) { c.Spec.ColonyClusters = c.Spec.ColonyClusters[:1] })
	waitCDGone(t, ns, "col-b")
	eventually(t, "the removed entry's etcd claim is gone", pvcGone(ns, EtcdPVCName("col-b")))

	// The foreign entry goes back into the Colony before its deletion: it is named, not controlled.
	updateColony(t, ns, "col", func(c *infrav1.Colony) {
		c.Spec.ColonyClusters = append(c.Spec.ColonyClusters, entry(t, "theirs", nil))
	})
	if err := mgmt.Client.Delete(ctx, col); err != nil {
		t.Fatal(err)
	}
	waitCDGone(t, ns, "col-a")
	eventually(t, "the etcd claim of the deleted Colony's cluster is gone", pvcGone(ns, EtcdPVCName("col-a")))
	waitColonyGone(t, ns, "col")
	for _, name := range []string{EtcdPVCName("col-theirs"), "etcd-data-kmc-other-etcd-0", "work"} {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc); err != nil || pvc.DeletionTimestamp != nil {
			t.Errorf("claim %s: %v, deleting %v; want it kept", name, err, pvc.DeletionTimestamp)
		}
	}
}
