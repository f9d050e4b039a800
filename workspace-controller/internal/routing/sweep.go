package routing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
)

// Sweeper removes, from every regional cluster, the routes, mirror Services and route namespaces of
// workspaces that no longer exist. It looks only at namespaces labelled RouteNamespaceLabel, so a
// release namespace on a regional cluster that also runs workspaces is never swept. Owner references do not cross clusters, so this is how routes
// left behind (a workspace deleted while its regional cluster was unreachable, a ClusterDeployment
// deleted with its KOF label) are cleaned up. It runs when the manager starts and every Interval.
type Sweeper struct {
	// Clusters lists the ClusterDeployments whose regional clusters are swept (a cached client is
	// fine).
	Clusters client.Reader
	// Workspaces reads WorkspaceDeployments; use the API reader, so that a workspace created a moment
	// ago is never taken for gone.
	Workspaces client.Reader
	Regionals  Regionals
	// DefaultRegional is the operator's default regional cluster.
	DefaultRegional RegionalRef
	// Interval between sweeps (default 10m).
	Interval time.Duration
	Log      logr.Logger
}

// Start sweeps now and then every Interval until ctx ends. It makes the Sweeper a manager.Runnable.
func (s *Sweeper) Start(ctx context.Context) error {
	interval := s.Interval
	if interval <= 0 {
		interval = 10 * time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := s.Sweep(ctx); err != nil {
			s.Log.Error(err, "sweeping routes of deleted workspaces")
		} else if n > 0 {
			s.Log.Info("swept routes of deleted workspaces", "namespaces", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection returns true: only the active replica writes.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// Sweep runs one sweep over every regional cluster named by a ClusterDeployment (when the tenancy
// rule allows the reference, see allowRegional) or the default, and returns how many route
// namespaces it removed (or started removing). An unreachable regional cluster is skipped until the
// next sweep.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	var cds k0rdentv1beta1.ClusterDeploymentList
	if err := s.Clusters.List(ctx, &cds); err != nil {
		return 0, fmt.Errorf("listing ClusterDeployments: %w", err)
	}
	keys := map[types.NamespacedName]bool{}
	var errs []error
	for i := range cds.Items {
		cd := &cds.Items[i]
		k, _, ok := RegionalCluster(cd, s.DefaultRegional)
		if !ok || keys[k] {
			continue
		}
		// A regional cluster named by labels whose namespace does not allow the child's is not swept
		// on this child's account (another child's allowed reference, or the default, may sweep it).
		why, err := allowRegional(ctx, s.Regionals, cd, k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if why != "" {
			s.Log.V(1).Info("regional cluster not allowed, not swept for this ClusterDeployment", "clusterDeployment", cd.Namespace+"/"+cd.Name, "reason", why)
			continue
		}
		keys[k] = true
	}
	if !s.DefaultRegional.IsZero() && s.DefaultRegional.Namespace != "" {
		keys[types.NamespacedName{Namespace: s.DefaultRegional.Namespace, Name: s.DefaultRegional.Name}] = true
	}
	total := 0
	for key := range keys {
		n, err := s.sweepCluster(ctx, key)
		total += n
		errs = append(errs, err) // one regional cluster's trouble does not stop the others' sweep
	}
	return total, errors.Join(errs...)
}

func (s *Sweeper) sweepCluster(ctx context.Context, key types.NamespacedName) (int, error) {
	c, err := s.Regionals.Client(ctx, key)
	if err != nil {
		if childcluster.IsUnreachable(err) {
			s.Log.V(1).Info("regional cluster unreachable, not swept", "clusterDeployment", key.String())
			return 0, nil
		}
		return 0, err
	}
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss, client.MatchingLabels{RouteNamespaceLabel: "true"}); err != nil {
		return 0, fmt.Errorf("listing route namespaces on regional cluster %s: %w", key, err)
	}
	n := 0
	for _, ns := range nss.Items {
		wsKey := types.NamespacedName{Namespace: ns.Labels[workspacesv1.WorkspaceNamespaceLabel], Name: ns.Labels[workspacesv1.WorkspaceLabel]}
		if wsKey.Name == "" || wsKey.Namespace == "" {
			continue
		}
		ws := &workspacesv1.WorkspaceDeployment{}
		err := s.Workspaces.Get(ctx, wsKey, ws)
		if err == nil || !apierrors.IsNotFound(err) {
			if err != nil {
				return n, fmt.Errorf("reading workspace %s: %w", wsKey, err)
			}
			continue
		}
		s.Log.Info("removing routes of a deleted workspace", "regionalCluster", key.String(), "namespace", ns.Name, "workspace", wsKey.String())
		sel := client.MatchingLabels{workspacesv1.WorkspaceLabel: wsKey.Name, workspacesv1.WorkspaceNamespaceLabel: wsKey.Namespace, ManagedByLabel: ManagedByValue}
		if _, err := removeNamespace(ctx, c, ns, sel); err != nil {
			return n, fmt.Errorf("regional cluster %s: %w", key, err)
		}
		n++
	}
	return n, s.sweepReleaseRoutes(ctx, c, key)
}

// sweepReleaseRoutes deletes the routes of gone workspaces that live outside route namespaces: those
// of a workspace routed on its own cluster, in its release namespace, left when the deletion could
// not reach the cluster. The namespace is the release's and is never deleted here.
func (s *Sweeper) sweepReleaseRoutes(ctx context.Context, c client.Client, key types.NamespacedName) error {
	gone := map[types.NamespacedName]bool{}
	for _, list := range []client.ObjectList{&gwv1.HTTPRouteList{}, &gwv1.TCPRouteList{}} {
		if err := c.List(ctx, list, client.MatchingLabels{ManagedByLabel: ManagedByValue}); err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return fmt.Errorf("listing routes on regional cluster %s: %w", key, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, o := range items {
			obj, ok := o.(client.Object)
			if !ok || !obj.GetDeletionTimestamp().IsZero() {
				continue
			}
			l := obj.GetLabels()
			wsKey := types.NamespacedName{Namespace: l[workspacesv1.WorkspaceNamespaceLabel], Name: l[workspacesv1.WorkspaceLabel]}
			if wsKey.Name == "" || wsKey.Namespace == "" {
				continue
			}
			isGone, seen := gone[wsKey]
			if !seen {
				err := s.Workspaces.Get(ctx, wsKey, &workspacesv1.WorkspaceDeployment{})
				if err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("reading workspace %s: %w", wsKey, err)
				}
				isGone = apierrors.IsNotFound(err)
				gone[wsKey] = isGone
			}
			if !isGone {
				continue
			}
			s.Log.Info("removing a route of a deleted workspace", "regionalCluster", key.String(), "namespace", obj.GetNamespace(), "route", obj.GetName(), "workspace", wsKey.String())
			if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting route %s/%s on regional cluster %s: %w", obj.GetNamespace(), obj.GetName(), key, err)
			}
		}
	}
	return nil
}
