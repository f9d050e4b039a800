package chaos

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// recreateBound bounds a ClusterDeployment's way back: its ServiceSets deleted, the old child torn
// down, the Colony's re-create, and a new child started with its nodes.
const recreateBound = 10 * time.Minute

// recreate deletes a ClusterDeployment of the Colony, as a platform team rebuilding a cluster does.
// The Colony creates it again under the same name, and the simulator builds a new child for it (a
// new API server, new nodes, a new kube-system namespace), as KCM provisions a new cluster. The
// workspaces that ran there lose their releases with the old child; the round's convergence then
// needs them admitted and installed again on the new one (or waiting while its GPUs are taken),
// and the deletions issued meanwhile complete.
func (s *suite) recreate(ctx context.Context, r int, cd string) error {
	key := types.NamespacedName{Namespace: s.ns, Name: cd}
	old := &k0rdentv1beta1.ClusterDeployment{}
	if err := retry(ctx, time.Minute, func(ctx context.Context) error { return s.c.Get(ctx, key, old) }); err != nil {
		return err
	}
	uid := old.UID
	if err := retry(ctx, time.Minute, func(ctx context.Context) error {
		return client.IgnoreNotFound(s.c.Delete(ctx, old, client.Preconditions{UID: &uid}))
	}); err != nil {
		return err
	}
	ok, last := poll(ctx, recreateBound, func(ctx context.Context) (bool, string) {
		now := &k0rdentv1beta1.ClusterDeployment{}
		err := s.c.Get(ctx, key, now)
		switch {
		case apierrors.IsNotFound(err):
			return false, "deleted, not created again yet"
		case err != nil:
			return false, err.Error()
		case now.UID == uid:
			return false, fmt.Sprintf("the old one is still there (being deleted: %t)", !now.DeletionTimestamp.IsZero())
		}
		if c := meta.FindStatusCondition(now.Status.Conditions, k0rdentv1beta1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
			return false, fmt.Sprintf("created again (uid %s), not Ready: %+v", now.UID, c)
		}
		e, found, err := s.inventory(ctx, cd)
		if err != nil || !found {
			return false, fmt.Sprintf("created again and Ready, no inventory yet (%v)", err)
		}
		var total int64
		for _, o := range e.Offerings {
			total += o.Total
		}
		return e.Reachable && total == s.gpus[cd], fmt.Sprintf("created again and Ready, inventory reachable %t with %d GPUs", e.Reachable, total)
	})
	if !ok {
		s.finding(r, "ClusterDeployment %s not back within %s: %s", cd, recreateBound, last)
	} else {
		s.progress("round %d: ClusterDeployment %s back under a new UID", r, cd)
	}
	return nil
}
