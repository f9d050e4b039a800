// Package workspaceclass validates WorkspaceClasses: it resolves each class's k0rdent ServiceTemplate,
// checks its chart version against the class's versionConstraint, parses the class's value paths,
// checks its prerequisites' templates, and counts the WorkspaceDeployments that use it.
//
// It also protects a class in use: every class carries the finalizer Finalizer, which the reconciler
// removes from a deleting class only once no WorkspaceDeployment names it (in the cache and in a live
// list). The webhook's deletion check answers earlier with the users' names, but it fails open; the
// finalizer holds whether or not the webhook runs.
package workspaceclass

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/common/status"
	"github.com/exalsius/exalsius-operator/common/text"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/cacheread"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/component"
)

// Field indexes the reconciler registers.
const (
	// IndexTemplates indexes WorkspaceClasses by "<namespace>/<name>" of every ServiceTemplate they
	// name (their own and their prerequisites').
	IndexTemplates = "workspaceclass.templates"
	// IndexClassRef indexes WorkspaceDeployments by spec.workspaceClassRef.
	IndexClassRef = "spec.workspaceClassRef"
)

// Finalizer keeps a WorkspaceClass that WorkspaceDeployments use from going away.
const Finalizer = "workspaces.exalsius.ai/workspaceclass-protection"

// FieldManager writes the classes' status: the component word.
const FieldManager = component.Name

// ReasonDeletionBlocked is the reason of the event on a deleting class still in use.
const ReasonDeletionBlocked = "DeletionBlocked"

// Reconciler validates WorkspaceClasses.
type Reconciler struct {
	Client client.Client
	// Cache is the manager's cache, whose index of workspaces by class the count reads without
	// copying (internal/cacheread); nil counts through a list of Client.
	Cache    cache.Informers
	Recorder events.EventRecorder
	// APIReader lists WorkspaceDeployments live before a deleting class loses its finalizer, so that
	// one created a moment ago (not yet in the cache) still protects it; SetupWithManager sets the
	// manager's when nil.
	APIReader client.Reader
	// CountInterval is the least time between two status writes that only change status.inUseBy:
	// while workspaces of a class arrive by the hundred the count is written once per interval, not
	// once per workspace. 0 means 5s; negative writes every change.
	CountInterval time.Duration

	countMu      sync.Mutex
	countWritten map[string]time.Time
}

// countDelay returns how long to put off a status write that only changes inUseBy (0: write now).
func (r *Reconciler) countDelay(class string, now time.Time) time.Duration {
	interval := r.CountInterval
	if interval == 0 {
		interval = 5 * time.Second
	}
	if interval < 0 {
		return 0
	}
	r.countMu.Lock()
	defer r.countMu.Unlock()
	if last, ok := r.countWritten[class]; ok && now.Sub(last) < interval {
		return interval - now.Sub(last)
	}
	return 0
}

func (r *Reconciler) countWrote(class string, now time.Time) {
	r.countMu.Lock()
	defer r.countMu.Unlock()
	if r.countWritten == nil {
		r.countWritten = map[string]time.Time{}
	}
	r.countWritten[class] = now
}

// The finalizer is added and removed by patches and the status written by server-side apply (a
// patch); nothing carries an owner reference to a WorkspaceClass, so no finalizers subresource.
// +kubebuilder:rbac:groups=workspaces.exalsius.ai,resources=workspaceclasses,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=workspaces.exalsius.ai,resources=workspaceclasses/status,verbs=patch
// +kubebuilder:rbac:groups=workspaces.exalsius.ai,resources=workspacedeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups=k0rdent.mirantis.com,resources=servicetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the indexes and the controller.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr manager.Manager, opts controller.Options) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if err := IndexClassRefField(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &workspacesv1.WorkspaceClass{}, IndexTemplates, func(o client.Object) []string {
		c := o.(*workspacesv1.WorkspaceClass)
		return templateKeys(c)
	}); err != nil {
		return fmt.Errorf("indexing WorkspaceClasses by template: %w", err)
	}
	return builder.ControllerManagedBy(mgr).
		Named("workspaceclass").
		For(&workspacesv1.WorkspaceClass{}).
		Watches(&k0rdentv1beta1.ServiceTemplate{}, handler.EnqueueRequestsFromMapFunc(r.classesForTemplate)).
		Watches(&workspacesv1.WorkspaceDeployment{}, handler.EnqueueRequestsFromMapFunc(classOfWorkspace),
			builder.WithPredicates(createOrDelete{})).
		WithOptions(opts).
		Complete(r)
}

// IndexClassRefField registers the WorkspaceDeployment index by class with idx (the manager's); it is
// shared with the workspace reconciler and tolerates being registered twice.
func IndexClassRefField(ctx context.Context, idx client.FieldIndexer) error {
	err := idx.IndexField(ctx, &workspacesv1.WorkspaceDeployment{}, IndexClassRef, func(o client.Object) []string {
		return []string{o.(*workspacesv1.WorkspaceDeployment).Spec.WorkspaceClassRef}
	})
	if err != nil && !isIndexConflict(err) {
		return fmt.Errorf("indexing WorkspaceDeployments by class: %w", err)
	}
	return nil
}

func (r *Reconciler) classesForTemplate(ctx context.Context, o client.Object) []reconcile.Request {
	var list workspacesv1.WorkspaceClassList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexTemplates: o.GetNamespace() + "/" + o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "listing WorkspaceClasses for a ServiceTemplate")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return out
}

func classOfWorkspace(_ context.Context, o client.Object) []reconcile.Request {
	ws, ok := o.(*workspacesv1.WorkspaceDeployment)
	if !ok || ws.Spec.WorkspaceClassRef == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: ws.Spec.WorkspaceClassRef}}}
}

// Reconcile validates one class and writes its status when it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	class := &workspacesv1.WorkspaceClass{}
	if err := r.Client.Get(ctx, req.NamespacedName, class); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if class.DeletionTimestamp != nil {
		return r.reconcileDelete(ctx, class)
	}
	if !controllerutil.ContainsFinalizer(class, Finalizer) {
		base := class.DeepCopy()
		controllerutil.AddFinalizer(class, Finalizer)
		if err := r.Client.Patch(ctx, class, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	before := class.Status.DeepCopy()

	p, err := r.validate(ctx, class)
	if err != nil {
		return reconcile.Result{}, err
	}
	inUse, err := r.count(ctx, class.Name)
	if err != nil {
		return reconcile.Result{}, err
	}

	st := &class.Status
	st.InUseBy = inUse
	st.ObservedGeneration = class.Generation
	cond := metav1.Condition{Type: workspacesv1.ClassReadyCondition, ObservedGeneration: class.Generation}
	if p == nil {
		st.Valid, st.ValidationError = true, ""
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, workspacesv1.ReasonValid, "the ServiceTemplate is valid and every path parses"
	} else {
		st.Valid, st.ValidationError = false, p.message
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, p.reason, p.message
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	conditions.SetKstatus(&st.Conditions, workspacesv1.ClassReadyCondition, class.Generation, p.progress())

	if equality.Semantic.DeepEqual(before, st) {
		return reconcile.Result{}, nil
	}
	now := time.Now()
	countOnly := *before
	countOnly.InUseBy = st.InUseBy
	if equality.Semantic.DeepEqual(&countOnly, st) {
		if d := r.countDelay(class.Name, now); d > 0 {
			return reconcile.Result{RequeueAfter: d}, nil
		}
	}
	conditions.RecordTransitions(r.Recorder, class, before.Conditions, st.Conditions)
	if err := status.Apply(ctx, r.Client, class, FieldManager); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("writing WorkspaceClass %s status: %w", class.Name, err)
	}
	r.countWrote(class.Name, now)
	return reconcile.Result{}, nil
}

// count returns how many WorkspaceDeployments the cache shows using class. A class is counted again
// at each create and delete of one of its workspaces (while thousands arrive, several times a
// second), so the count reads the cache's index without copying the workspaces out of it.
func (r *Reconciler) count(ctx context.Context, class string) (int32, error) {
	if users, ok, err := cacheread.ByIndex[workspacesv1.WorkspaceDeployment](ctx, r.Cache, IndexClassRef, class); err != nil {
		return 0, fmt.Errorf("counting WorkspaceDeployments of class %s: %w", class, err)
	} else if ok {
		return int32(len(users)), nil
	}
	var list workspacesv1.WorkspaceDeploymentList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexClassRef: class}, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("counting WorkspaceDeployments of class %s: %w", class, err)
	}
	return int32(len(list.Items)), nil
}

// reconcileDelete removes the finalizer of a deleting class once no WorkspaceDeployment uses it; a
// deletion of one of its users brings the class back here.
func (r *Reconciler) reconcileDelete(ctx context.Context, class *workspacesv1.WorkspaceClass) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(class, Finalizer) {
		return reconcile.Result{}, nil
	}
	users, err := r.users(ctx, class.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(users) > 0 {
		if class.Status.InUseBy != int32(len(users)) {
			class.Status.InUseBy = int32(len(users))
			if err := status.Apply(ctx, r.Client, class, FieldManager); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
		}
		r.Recorder.Eventf(class, nil, "Warning", ReasonDeletionBlocked, "Delete", "%s",
			text.Truncate(fmt.Sprintf("WorkspaceClass %s is kept until no WorkspaceDeployment uses it: %d do (%s)",
				class.Name, len(users), strings.Join(firstN(users, 5), ", ")), text.MaxEventNoteBytes))
		return reconcile.Result{}, nil
	}
	base := class.DeepCopy()
	controllerutil.RemoveFinalizer(class, Finalizer)
	if err := r.Client.Patch(ctx, class, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{}, nil
}

// users returns "namespace/name" of the WorkspaceDeployments of a class, sorted: from the cache, and
// when the cache knows none, from a live list (a deployment created a moment ago counts). A live list
// the ServiceAccount may not make (RBAC limited to watched namespaces) leaves the cache's answer.
func (r *Reconciler) users(ctx context.Context, class string) ([]string, error) {
	var list workspacesv1.WorkspaceDeploymentList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexClassRef: class}); err != nil {
		return nil, fmt.Errorf("listing the WorkspaceDeployments of class %s: %w", class, err)
	}
	var names []string
	for i := range list.Items {
		names = append(names, list.Items[i].Namespace+"/"+list.Items[i].Name)
	}
	if len(names) == 0 && r.APIReader != nil {
		opts := []client.ListOption{client.Limit(500)}
		for {
			live := &workspacesv1.WorkspaceDeploymentList{}
			err := r.APIReader.List(ctx, live, opts...)
			if apierrors.IsForbidden(err) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("listing the WorkspaceDeployments of class %s: %w", class, err)
			}
			for i := range live.Items {
				if live.Items[i].Spec.WorkspaceClassRef == class {
					names = append(names, live.Items[i].Namespace+"/"+live.Items[i].Name)
				}
			}
			if live.Continue == "" {
				break
			}
			opts = []client.ListOption{client.Limit(500), client.Continue(live.Continue)}
		}
	}
	sort.Strings(names)
	return names, nil
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

// validate returns the first problem of the class, nil when it is valid, or an error when it could
// not tell.
func (r *Reconciler) validate(ctx context.Context, class *workspacesv1.WorkspaceClass) (*problem, error) {
	ns := TemplateNamespace(class)
	ref := class.Spec.ServiceTemplate
	tmpl := &k0rdentv1beta1.ServiceTemplate{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, tmpl); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading ServiceTemplate %s/%s: %w", ns, ref.Name, err)
		}
		return &problem{workspacesv1.ReasonServiceTemplateNotFound,
			fmt.Sprintf("spec.serviceTemplate: ServiceTemplate %s/%s not found", ns, ref.Name), true}, nil
	}
	if !tmpl.Status.Valid {
		msg := fmt.Sprintf("spec.serviceTemplate: ServiceTemplate %s/%s is not valid", ns, ref.Name)
		if tmpl.Status.ValidationError != "" {
			msg += ": " + tmpl.Status.ValidationError
		}
		// Without a validation error k0rdent has not validated the template yet.
		return &problem{workspacesv1.ReasonServiceTemplateInvalid, msg, tmpl.Status.ValidationError == ""}, nil
	}
	if err := CheckVersion(ref.VersionConstraint, tmpl); err != nil {
		return &problem{reason: workspacesv1.ReasonVersionConstraintUnmet, message: err.Error()}, nil
	}
	if p := checkValuePaths(&class.Spec); p != nil {
		return p, nil
	}
	for i := range class.Spec.Prerequisites {
		p := &class.Spec.Prerequisites[i]
		field := fmt.Sprintf("spec.prerequisites[%d]", i)
		pns, pname := p.TemplateNamespace(), p.ServiceTemplate.Name
		if pname == ref.Name && pns == ns {
			return &problem{reason: workspacesv1.ReasonInvalidPrerequisite,
				message: fmt.Sprintf("%s: the class's own ServiceTemplate %s cannot be its prerequisite", field, pname)}, nil
		}
		pt := &k0rdentv1beta1.ServiceTemplate{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: pns, Name: pname}, pt); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("reading ServiceTemplate %s/%s: %w", pns, pname, err)
			}
			return &problem{workspacesv1.ReasonInvalidPrerequisite,
				fmt.Sprintf("%s.serviceTemplate: ServiceTemplate %s/%s not found", field, pns, pname), true}, nil
		}
		if !pt.Status.Valid {
			return &problem{workspacesv1.ReasonInvalidPrerequisite,
				fmt.Sprintf("%s.serviceTemplate: ServiceTemplate %s/%s is not valid: %s", field, pns, pname, pt.Status.ValidationError),
				pt.Status.ValidationError == ""}, nil
		}
		if err := CheckVersionAt(field+".serviceTemplate.versionConstraint", p.ServiceTemplate.VersionConstraint, pt); err != nil {
			return &problem{reason: workspacesv1.ReasonInvalidPrerequisite, message: err.Error()}, nil
		}
		if p.Values != nil && len(p.Values.Raw) > 0 && p.Values.Raw[0] != '{' {
			return &problem{reason: workspacesv1.ReasonInvalidPrerequisite, message: fmt.Sprintf("%s.values: must be an object", field)}, nil
		}
	}
	return nil, nil
}
