package routing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// Sweeper removes, from every regional cluster, the routes, mirror Services and route namespaces of
// workspaces that no longer exist, and of workspaces routed on another regional cluster now (their
// ClusterDeployment's KOF labels changed). It looks only at namespaces labelled RouteNamespaceLabel,
// so a release namespace on a regional cluster that also runs workspaces is never swept. Owner
// references do not cross clusters, so this is how routes left behind (a workspace deleted while its
// regional cluster was unreachable, a ClusterDeployment deleted with its KOF label, a
// ClusterDeployment relabelled to another regional cluster) are cleaned up. It runs when the manager
// starts, every Interval, and at once when Moved reports a ClusterDeployment that names another
// regional cluster than before.
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

	mu sync.Mutex
	// former are ClusterDeployments as they were before their KOF labels changed (Moved): the
	// regional clusters they named are swept once more, even when no ClusterDeployment names them now.
	former []*k0rdentv1beta1.ClusterDeployment
	nudge  chan struct{}
}

// Moved reports that a ClusterDeployment's KOF labels changed from old to now: when they name
// another regional cluster, the one old named is swept at once (the routes of the cluster's
// workspaces there are no longer wanted) and the one now names is not waited for.
func (s *Sweeper) Moved(old, now *k0rdentv1beta1.ClusterDeployment) {
	was, _, ok := RegionalCluster(old, s.DefaultRegional)
	if is, _, _ := RegionalCluster(now, s.DefaultRegional); !ok || was == is {
		return
	}
	s.mu.Lock()
	s.former = append(s.former, old.DeepCopy())
	s.mu.Unlock()
	select {
	case s.nudges() <- struct{}{}:
	default: // a sweep is asked for already
	}
}

func (s *Sweeper) nudges() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nudge == nil {
		s.nudge = make(chan struct{}, 1)
	}
	return s.nudge
}

// takeFormer returns the ClusterDeployments Moved recorded since the last call.
func (s *Sweeper) takeFormer() []*k0rdentv1beta1.ClusterDeployment {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.former
	s.former = nil
	return out
}

// Start sweeps now, then every Interval and whenever Moved asks, until ctx ends. It makes the
// Sweeper a manager.Runnable.
func (s *Sweeper) Start(ctx context.Context) error {
	interval := s.Interval
	if interval <= 0 {
		interval = 10 * time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	nudge := s.nudges()
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
		case <-nudge:
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
	all := make([]*k0rdentv1beta1.ClusterDeployment, 0, len(cds.Items))
	for i := range cds.Items {
		all = append(all, &cds.Items[i])
	}
	for _, cd := range append(all, s.takeFormer()...) {
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
		why, err := s.notRoutedHere(ctx, c, wsKey, key)
		if err != nil {
			return n, err
		}
		if why == "" {
			continue
		}
		s.Log.Info("removing routes of "+why, "regionalCluster", key.String(), "namespace", ns.Name, "workspace", wsKey.String())
		sel := client.MatchingLabels{workspacesv1.WorkspaceLabel: wsKey.Name, workspacesv1.WorkspaceNamespaceLabel: wsKey.Namespace, ManagedByLabel: ManagedByValue}
		if _, err := removeNamespace(ctx, c, ns, sel); err != nil {
			return n, fmt.Errorf("regional cluster %s: %w", key, err)
		}
		n++
	}
	return n, s.sweepReleaseRoutes(ctx, c, key)
}

// notRoutedHere says why the workspace wsKey's routes on regional cluster key are no longer wanted
// ("a deleted workspace", "a workspace routed elsewhere now"), or "" when they are. A workspace is
// routed elsewhere when its ClusterDeployment exists and names another regional cluster (its KOF
// labels changed, or the default now applies): the routes it had here would still publish it under
// this Gateway's domain. A workspace whose ClusterDeployment cannot be read now keeps its routes
// (its deletion removes them). here is a client of key.
func (s *Sweeper) notRoutedHere(ctx context.Context, here client.Client, wsKey, key types.NamespacedName) (string, error) {
	ws := &workspacesv1.WorkspaceDeployment{}
	if err := s.Workspaces.Get(ctx, wsKey, ws); err != nil {
		if apierrors.IsNotFound(err) {
			return "a deleted workspace", nil
		}
		return "", fmt.Errorf("reading workspace %s: %w", wsKey, err)
	}
	cdKey := owned.ClusterKey(ws)
	if cdKey.Name == "" || !ws.DeletionTimestamp.IsZero() {
		return "", nil
	}
	cd := &k0rdentv1beta1.ClusterDeployment{}
	if err := s.Clusters.Get(ctx, cdKey, cd); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading ClusterDeployment %s: %w", cdKey, err)
	}
	now, _, ok := RegionalCluster(cd, s.DefaultRegional)
	if ok && now == key {
		return "", nil
	}
	if ok {
		// Two regional ClusterDeployments may reach one cluster (the default and a label naming
		// another ClusterDeployment of it): the routes there are the ones the workspace uses.
		if same, err := s.sameCluster(ctx, here, now); err != nil || same {
			return "", err
		}
	}
	return "a workspace routed elsewhere now", nil
}

// sameCluster reports whether regional ClusterDeployment other reaches the cluster here is a client
// of, by the UID of its kube-system namespace. One that cannot be reached is another.
func (s *Sweeper) sameCluster(ctx context.Context, here client.Client, other types.NamespacedName) (bool, error) {
	oc, err := s.Regionals.Client(ctx, other)
	if err != nil {
		if childcluster.IsUnreachable(err) {
			return false, nil
		}
		return false, err
	}
	var a, b corev1.Namespace
	if err := here.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, &a); err != nil {
		return false, fmt.Errorf("reading namespace %s: %w", metav1.NamespaceSystem, err)
	}
	if err := oc.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, &b); err != nil {
		return false, nil // not answering: not the cluster that answers here
	}
	return a.UID != "" && a.UID == b.UID, nil
}

// sweepReleaseRoutes deletes the routes of gone workspaces that live outside route namespaces: those
// of a workspace routed on its own cluster, in its release namespace, left when the deletion could
// not reach the cluster. The namespace is the release's and is never deleted here.
func (s *Sweeper) sweepReleaseRoutes(ctx context.Context, c client.Client, key types.NamespacedName) error {
	gone := map[types.NamespacedName]string{}
	lists, err := routeLists(c)
	if err != nil {
		return fmt.Errorf("on regional cluster %s: %w", key, err)
	}
	for _, list := range lists {
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
			why, seen := gone[wsKey]
			if !seen {
				var err error
				if why, err = s.notRoutedHere(ctx, c, wsKey, key); err != nil {
					return err
				}
				gone[wsKey] = why
			}
			if why == "" {
				continue
			}
			s.Log.Info("removing a route of "+why, "regionalCluster", key.String(), "namespace", obj.GetNamespace(), "route", obj.GetName(), "workspace", wsKey.String())
			if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting route %s/%s on regional cluster %s: %w", obj.GetNamespace(), obj.GetName(), key, err)
			}
		}
	}
	return nil
}
