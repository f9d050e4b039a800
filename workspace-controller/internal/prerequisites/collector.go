package prerequisites

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// What the collector reads and writes; the workspace reconciler's own rules cover them as well.
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=servicesets,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=clusterdeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups=workspaces.exalsius.ai,resources=workspacedeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups=workspaces.exalsius.ai,resources=workspaceclasses,verbs=get;list;watch

// Collector is the prerequisite-collector: it removes a shared prerequisite ServiceSet once no
// workspace on its cluster has needed it for the grace period.
type Collector struct {
	Client      client.Client
	GracePeriod time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// SetupWithManager registers the collector. It relies on the workspace reconciler's indexes
// (owned.IndexCluster, owned.IndexServiceSetCluster).
func (c *Collector) SetupWithManager(mgr manager.Manager, opts controller.Options) error {
	return builder.ControllerManagedBy(mgr).
		Named("prerequisite-collector").
		For(&k0rdentv1beta1.ServiceSet{}, builder.WithPredicates(predicate.NewPredicateFuncs(isPrerequisite))).
		Watches(&workspacesv1.WorkspaceDeployment{}, handler.EnqueueRequestsFromMapFunc(c.forWorkspace),
			builder.WithPredicates(changesPrerequisiteUse{})).
		WithOptions(opts).
		Complete(c)
}

// isPrerequisite passes the shared prerequisite ServiceSets (labelled workspaces.exalsius.ai/prerequisite).
func isPrerequisite(o client.Object) bool {
	_, ok := o.GetLabels()[workspacesv1.PrerequisiteLabel]
	return ok
}

func (c *Collector) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// changesPrerequisiteUse passes the workspace events that can change which prerequisites a cluster
// needs: a workspace made or gone, its deletion started, its class or its cluster changed (a placement
// sets the cluster). Status churn does not, and each event lists the cluster's ServiceSets.
type changesPrerequisiteUse struct{ predicate.Funcs }

func (changesPrerequisiteUse) Create(event.CreateEvent) bool   { return true }
func (changesPrerequisiteUse) Delete(event.DeleteEvent) bool   { return true }
func (changesPrerequisiteUse) Generic(event.GenericEvent) bool { return false }
func (changesPrerequisiteUse) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*workspacesv1.WorkspaceDeployment)
	n, ok2 := e.ObjectNew.(*workspacesv1.WorkspaceDeployment)
	if !ok1 || !ok2 {
		return true
	}
	return o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() || o.Spec.WorkspaceClassRef != n.Spec.WorkspaceClassRef ||
		owned.ClusterKey(o) != owned.ClusterKey(n)
}

// forWorkspace maps a workspace to the prerequisite ServiceSets of its cluster.
func (c *Collector) forWorkspace(ctx context.Context, o client.Object) []reconcile.Request {
	ws, ok := o.(*workspacesv1.WorkspaceDeployment)
	if !ok {
		return nil
	}
	cd := owned.ClusterKey(ws)
	var list k0rdentv1beta1.ServiceSetList
	if err := c.Client.List(ctx, &list, client.MatchingFields{owned.IndexServiceSetCluster: cd.String()}, client.UnsafeDisableDeepCopy, // read-only
		client.HasLabels{workspacesv1.PrerequisiteLabel}); err != nil {
		log.FromContext(ctx).Error(err, "listing prerequisite ServiceSets")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// Reconcile marks a prerequisite ServiceSet unused, clears the mark when it is needed again, and
// deletes it when the grace period has passed.
func (c *Collector) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ss := &k0rdentv1beta1.ServiceSet{}
	if err := c.Client.Get(ctx, req.NamespacedName, ss); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !ss.DeletionTimestamp.IsZero() {
		return c.finishDeletion(ctx, ss)
	}
	template := ss.Annotations[owned.AnnotationPrerequisiteTemplate]
	if template == "" && len(ss.Spec.Services) > 0 {
		template = ss.Spec.Services[0].Template
	}
	cd := types.NamespacedName{Namespace: ss.Namespace, Name: ss.Labels[workspacesv1.ClusterDeploymentLabel]}
	used, err := c.inUse(ctx, cd, template)
	if err != nil {
		return reconcile.Result{}, err
	}
	since, marked := ss.Annotations[owned.AnnotationUnusedSince]
	patchBase := ss.DeepCopy()
	switch {
	case used && !marked:
		return reconcile.Result{}, nil
	case used:
		delete(ss.Annotations, owned.AnnotationUnusedSince)
		return reconcile.Result{}, c.patch(ctx, ss, patchBase)
	case !marked:
		if ss.Annotations == nil {
			ss.Annotations = map[string]string{}
		}
		ss.Annotations[owned.AnnotationUnusedSince] = c.now().UTC().Format(time.RFC3339)
		if err := c.patch(ctx, ss, patchBase); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: c.GracePeriod}, nil
	}
	t, err := time.Parse(time.RFC3339, since)
	if err != nil {
		t = c.now()
	}
	if left := c.GracePeriod - c.now().Sub(t); left > 0 {
		return reconcile.Result{RequeueAfter: left}, nil
	}
	log.FromContext(ctx).Info("removing unused prerequisite", "serviceSet", req.NamespacedName.String(), "template", template)
	if err := c.Client.Delete(ctx, ss); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("deleting unused prerequisite ServiceSet %s: %w", req.NamespacedName, err)
	}
	return reconcile.Result{}, nil
}

// finishDeletion removes k0rdent's finalizer from a prerequisite ServiceSet whose ClusterDeployment is
// gone (KCM cannot finish it then); otherwise KCM finishes it.
func (c *Collector) finishDeletion(ctx context.Context, ss *k0rdentv1beta1.ServiceSet) (reconcile.Result, error) {
	cd := &k0rdentv1beta1.ClusterDeployment{}
	err := c.Client.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: ss.Spec.Cluster}, cd)
	if err == nil || !apierrors.IsNotFound(err) || len(ss.Finalizers) == 0 {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	patchBase := ss.DeepCopy()
	ss.Finalizers = nil
	return reconcile.Result{}, client.IgnoreNotFound(c.Client.Patch(ctx, ss, client.MergeFrom(patchBase)))
}

// inUse reports whether a workspace on the cluster that is not being deleted needs the template.
func (c *Collector) inUse(ctx context.Context, cd types.NamespacedName, template string) (bool, error) {
	var list workspacesv1.WorkspaceDeploymentList
	if err := c.Client.List(ctx, &list, client.MatchingFields{owned.IndexCluster: cd.String()}, client.UnsafeDisableDeepCopy); err != nil { // read-only
		return false, fmt.Errorf("listing workspaces of %s: %w", cd, err)
	}
	for i := range list.Items {
		ws := &list.Items[i]
		if !ws.DeletionTimestamp.IsZero() {
			continue
		}
		class := &workspacesv1.WorkspaceClass{}
		if err := c.Client.Get(ctx, types.NamespacedName{Name: ws.Spec.WorkspaceClassRef}, class); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, fmt.Errorf("reading WorkspaceClass %s: %w", ws.Spec.WorkspaceClassRef, err)
		}
		for _, p := range class.Spec.Prerequisites {
			if p.ServiceTemplate.Name == template {
				return true, nil
			}
		}
	}
	return false, nil
}

func (c *Collector) patch(ctx context.Context, ss, base *k0rdentv1beta1.ServiceSet) error {
	if err := c.Client.Patch(ctx, ss, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating prerequisite ServiceSet %s/%s: %w", ss.Namespace, ss.Name, err)
	}
	return nil
}
