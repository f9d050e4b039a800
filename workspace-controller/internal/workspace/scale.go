package workspace

import (
	"maps"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/conditions"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// What keeps an admission cheap when thousands of workspaces arrive at once (docs/RECONCILIATION.md,
// "Cost of an admission"): one Event per pass, no pass on a cached workspace older than this process's
// own last write, watches that wake workspaces only for changes that matter to them.

// ownWrites remembers, per workspace, the resourceVersion of this process's last write to it, so
// that a pass started from an older cached copy (the cache has not caught up with the write yet) is
// put off instead of deciding, writing and recording Events again from stale state.
type ownWrites struct {
	mu sync.Mutex
	rv map[string]string
}

func (w *ownWrites) wrote(key, resourceVersion string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rv == nil {
		w.rv = map[string]string{}
	}
	w.rv[key] = resourceVersion
}

// stale reports whether the cached copy at resourceVersion is older than the last write.
func (w *ownWrites) stale(key, resourceVersion string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.rv[key]
	return ok && owned.OlderVersion(resourceVersion, last)
}

// own reports whether a workspace at resourceVersion is this process's last write or older: an
// update event of it tells the controller nothing new.
func (w *ownWrites) own(key, resourceVersion string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.rv[key]
	return ok && (resourceVersion == last || owned.OlderVersion(resourceVersion, last))
}

func (w *ownWrites) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.rv, key)
}

// recordPassEvent records at most one Event for a pass's condition transitions: Ready's transition
// when Ready changed (it carries the pass's verdict), otherwise the first transition to a bad state,
// otherwise the first transition. Reconciling and Stalled repeat Ready and make none of their own.
// It reports whether it recorded one.
func recordPassEvent(recorder events.EventRecorder, ws *workspacesv1.WorkspaceDeployment, before, after []metav1.Condition) bool {
	if recorder == nil {
		return false
	}
	var pick *conditions.Transition
	for _, t := range conditions.Transitions(before, after) {
		if t.After.Type == workspacesv1.ReconcilingCondition || t.After.Type == workspacesv1.StalledCondition {
			continue
		}
		switch {
		case t.After.Type == workspacesv1.ReadyCondition:
			pick = &t
		case pick == nil:
			pick = &t
		case pick.After.Type != workspacesv1.ReadyCondition && pick.After.Status != metav1.ConditionFalse && t.After.Status == metav1.ConditionFalse:
			pick = &t
		}
		if pick.After.Type == workspacesv1.ReadyCondition {
			break
		}
	}
	if pick == nil {
		return false
	}
	var only []metav1.Condition
	for _, c := range after {
		if c.Type == pick.After.Type {
			only = append(only, c)
		}
	}
	var was []metav1.Condition
	if pick.Before != nil {
		was = []metav1.Condition{*pick.Before}
	}
	conditions.RecordTransitions(recorder, ws, was, only)
	return true
}

// workspaceChanged passes the workspace's own events that call for a pass: a create or delete, a spec
// change (generation), a deletion request, a change of labels or annotations, and any change this
// process did not write (a status or finalizer edited by someone else). The controller's own status
// and finalizer writes do not wake it again: the pass that wrote them went on with what it wrote.
type workspaceChanged struct {
	predicate.Funcs
	writes *ownWrites
}

func (p workspaceChanged) Update(e event.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	if o == nil || n == nil {
		return true
	}
	if o.GetGeneration() != n.GetGeneration() ||
		o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero() ||
		!maps.Equal(o.GetLabels(), n.GetLabels()) || !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) {
		return true
	}
	return p.writes == nil || !p.writes.own(n.GetNamespace()+"/"+n.GetName(), n.GetResourceVersion())
}

// classChanged passes WorkspaceClass events that change what its workspaces resolve: a create or
// delete, a spec change, or a change of its validity. Its status.inUseBy count (rewritten as
// workspaces come and go) wakes no workspace.
type classChanged struct{ predicate.Funcs }

func (classChanged) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*workspacesv1.WorkspaceClass)
	n, ok2 := e.ObjectNew.(*workspacesv1.WorkspaceClass)
	if !ok1 || !ok2 {
		return true
	}
	return o.Generation != n.Generation || o.Status.Valid != n.Status.Valid ||
		o.Status.ValidationError != n.Status.ValidationError || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
		!sameStates(o.Status.Conditions, n.Status.Conditions)
}

// clusterChanged passes ClusterDeployment events that matter to its workspaces: a create or delete,
// a spec or label change, a deletion request, and changes of its conditions (readiness) or of the
// services it reports (the prerequisites' states). Other status churn wakes no workspace.
type clusterChanged struct{ predicate.Funcs }

func (clusterChanged) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*k0rdentv1beta1.ClusterDeployment)
	n, ok2 := e.ObjectNew.(*k0rdentv1beta1.ClusterDeployment)
	if !ok1 || !ok2 {
		return true
	}
	return o.Generation != n.Generation || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
		!maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
		o.Status.Region != n.Status.Region || !sameStates(o.Status.Conditions, n.Status.Conditions) ||
		!equality.Semantic.DeepEqual(o.Status.Services, n.Status.Services)
}

// sameStates reports whether two condition lists have the same types, statuses and reasons (a
// reworded message or a new heartbeat is no change of state).
func sameStates(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		c := meta.FindStatusCondition(b, a[i].Type)
		if c == nil || c.Status != a[i].Status || c.Reason != a[i].Reason {
			return false
		}
	}
	return true
}

// notOwnServiceSetCreate drops the create events of workspaces' own ServiceSets that were made a
// moment ago: the pass that made one goes on with it. Their updates (KCM's service states) and
// deletions still wake the workspace, and prerequisite ServiceSets pass unchanged. A workspace's
// ServiceSet older than freshServiceSet is one the cache lists at start (or lists again): it passes,
// so that the ServiceSet of a workspace that no longer exists is collected (orphans.go); for a
// workspace that exists, it is the reconcile the start brings anyway.
type notOwnServiceSetCreate struct{ predicate.Funcs }

// freshServiceSet is how long after its creation a workspace's ServiceSet counts as made by a pass.
const freshServiceSet = time.Minute

func (notOwnServiceSetCreate) Create(e event.CreateEvent) bool {
	if _, own := e.Object.GetLabels()[workspacesv1.WorkspaceLabel]; !own {
		return true
	}
	created := e.Object.GetCreationTimestamp().Time
	return !created.IsZero() && time.Since(created) > freshServiceSet
}
