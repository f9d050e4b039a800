package colony

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

func TestDeleteRequeueBacksOff(t *testing.T) {
	cases := map[time.Duration]time.Duration{
		0:                deleteRequeueMin,
		time.Second:      deleteRequeueMin,
		time.Minute:      30 * time.Second,
		4 * time.Minute:  2 * time.Minute,
		time.Hour:        deleteRequeueMax,
		-5 * time.Second: deleteRequeueMin,
	}
	for waited, want := range cases {
		if got := deleteRequeue(waited); got != want {
			t.Errorf("deleteRequeue(%s) = %s, want %s", waited, got, want)
		}
	}
}

func TestRemainingString(t *testing.T) {
	if got := (remainingClusterDeployment{name: "a"}).String(); got != "a" {
		t.Errorf("%q", got)
	}
	got := remainingClusterDeployment{name: "a", finalizers: []string{"x", "y"}}.String()
	if got != "a (finalizers: x, y)" {
		t.Errorf("%q", got)
	}
}

// TestDeletionWaitsForStuckClusterDeployment: deleting a Colony deletes its ClusterDeployments; one
// held by a finalizer keeps the Colony in phase Deleting with a condition that names it; once the
// finalizer goes, so does the Colony.
func TestDeletionWaitsForStuckClusterDeployment(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns)
	createColony(t, ns, "col", entry(t, "a", nil), entry(t, "b", nil))
	cdA := waitCD(t, ns, "col-a", "col-a", nil)
	waitCD(t, ns, "col-b", "col-b", nil)
	// KCM's finalizer on a, as on a real cluster whose teardown takes time.
	cdA.Finalizers = append(cdA.Finalizers, k0rdentv1beta1.ClusterDeploymentFinalizer)
	if err := mgmt.Client.Update(context.Background(), cdA); err != nil {
		t.Fatal(err)
	}
	waitColony(t, ns, "col", "finalizer on the Colony", func(c *infrav1.Colony) error {
		if !containsString(c.Finalizers, infrav1.ColonyFinalizer) {
			return errors.New("no finalizer yet")
		}
		return nil
	})

	if err := mgmt.Client.Delete(context.Background(), &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "col"}}); err != nil {
		t.Fatal(err)
	}
	waitCDGone(t, ns, "col-b")
	c := waitColony(t, ns, "col", "Deleting names the stuck ClusterDeployment", all(
		func(c *infrav1.Colony) error {
			if c.Status.Phase != infrav1.ColonyPhaseDeleting {
				return fmt.Errorf("phase %q", c.Status.Phase)
			}
			return nil
		},
		conditionIs(infrav1.ColonyReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonDeleting,
			"waiting for ClusterDeployments to be deleted: col-a (finalizers: "+k0rdentv1beta1.ClusterDeploymentFinalizer+")"),
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionFalse, infrav1.ColonyReasonDeleting, "col-a"),
		func(c *infrav1.Colony) error {
			if len(c.Status.ClusterDeploymentRefs) != 1 || c.Status.ClusterDeploymentRefs[0].Name != "col-a" {
				return fmt.Errorf("refs %+v", c.Status.ClusterDeploymentRefs)
			}
			return nil
		}))
	if c.DeletionTimestamp == nil {
		t.Fatal("Colony not being deleted")
	}
	if cd := getCD(t, ns, "col-a"); cd.DeletionTimestamp == nil {
		t.Error("the stuck ClusterDeployment was not asked to go")
	}

	// No busy loop: a pass over the stuck Colony returns a requeue after a delay, not an error or
	// an immediate requeue.
	r := directReconciler()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "col"}})
	if err != nil || res.RequeueAfter < deleteRequeueMin {
		t.Errorf("reconcile of a stuck deletion: %+v, %v", res, err)
	}

	removeFinalizers(t, ns, "col-a")
	waitColonyGone(t, ns, "col")
}

// TestDeletionWithoutClusterDeployments: a Colony whose ClusterDeployments are already gone (or
// that never had any) goes at once.
func TestDeletionWithoutClusterDeployments(t *testing.T) {
	ns := newNamespace(t)
	startManager(t, ns)
	createColony(t, ns, "empty")
	waitColony(t, ns, "empty", "empty Colony is Ready", all(phaseIs(infrav1.ColonyPhaseReady),
		conditionIs(infrav1.ColonyClustersReadyCondition, metav1.ConditionTrue, infrav1.ColonyReasonNoClusters)))
	if err := mgmt.Client.Delete(context.Background(), &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "empty"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Colony gone", func() error {
		err := mgmt.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "empty"}, &infrav1.Colony{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}

// upstreamClusterDeployment creates a ClusterDeployment as the upstream operator made them: named
// <colony>-<clusterName>, controlled by the Colony, without this project's labels.
func upstreamClusterDeployment(t *testing.T, colony *infrav1.Colony, clusterName string) {
	t.Helper()
	yes := true
	cd := &k0rdentv1beta1.ClusterDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: colony.Namespace, Name: colony.Name + "-" + clusterName,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "Colony",
				Name: colony.Name, UID: colony.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: k0rdentv1beta1.ClusterDeploymentSpec{Template: "tmpl-1-0-0", Credential: "cred"},
	}
	if err := mgmt.Client.Create(context.Background(), cd); err != nil {
		t.Fatal(err)
	}
}

// TestUpstreamColonyFinalizer: the upstream operator's finalizer colony.infra.exalsius.ai/finalizer
// never blocks a Colony. A live Colony gets this controller's finalizer in its place; a Colony that
// was deleted while the upstream operator was already gone (so only its finalizer holds it) has its
// ClusterDeployments deleted and then goes.
func TestUpstreamColonyFinalizer(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	newUpstreamColony := func(name string) *infrav1.Colony {
		c := &infrav1.Colony{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{infrav1.LegacyColonyFinalizer}},
			Spec:       infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{entry(t, "a", nil)}},
		}
		if err := mgmt.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		upstreamClusterDeployment(t, c, "a")
		return c
	}
	live := newUpstreamColony("live")
	deleted := newUpstreamColony("deleted")
	if err := mgmt.Client.Delete(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	startManager(t, ns)

	waitColony(t, ns, "live", "this controller's finalizer in place of upstream's", func(c *infrav1.Colony) error {
		if !containsString(c.Finalizers, infrav1.ColonyFinalizer) || containsString(c.Finalizers, infrav1.LegacyColonyFinalizer) {
			return fmt.Errorf("finalizers %v", c.Finalizers)
		}
		return nil
	})
	waitCDGone(t, ns, "deleted-a")
	waitColonyGone(t, ns, "deleted")

	if err := mgmt.Client.Delete(ctx, live); err != nil {
		t.Fatal(err)
	}
	waitCDGone(t, ns, "live-a")
	waitColonyGone(t, ns, "live")
}
