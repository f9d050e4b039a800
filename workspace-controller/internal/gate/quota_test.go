package gate

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// recordingQueue records how requests are added; the queue's other methods are not called.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	now   []reconcile.Request
	later map[reconcile.Request][]time.Duration
}

func (q *recordingQueue) Add(r reconcile.Request)            { q.now = append(q.now, r) }
func (q *recordingQueue) AddRateLimited(r reconcile.Request) { q.now = append(q.now, r) }
func (q *recordingQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.later[r] = append(q.later[r], d)
}

// The changes of a burst count a quota once per quotaCountDelay: every workspace event that names a
// quota adds it after the delay (the delaying queue keeps one entry per quota meanwhile), none at
// once; an update names the quotas of the old object and of the new one.
func TestQuotaCountedAfterTheDelay(t *testing.T) {
	q := &recordingQueue{later: map[reconcile.Request][]time.Duration{}}
	quotaOf := func(ns string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "gpus"}}
	}
	h := countLater(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{quotaOf(o.GetNamespace())}
	})
	ctx := context.Background()
	ws := func(ns string) *workspacesv1.WorkspaceDeployment {
		return &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nb"}}
	}
	for range 25 {
		h.Create(ctx, event.CreateEvent{Object: ws("a")}, q)
		h.Update(ctx, event.UpdateEvent{ObjectOld: ws("a"), ObjectNew: ws("b")}, q)
		h.Delete(ctx, event.DeleteEvent{Object: ws("a")}, q)
		h.Generic(ctx, event.GenericEvent{Object: ws("a")}, q)
	}
	if len(q.now) != 0 {
		t.Fatalf("%d quota counts queued at once: each change should wait quotaCountDelay", len(q.now))
	}
	if got := len(q.later[quotaOf("a")]); got != 100 {
		t.Errorf("quota of namespace a added %d times after the delay, want 100 (one per event)", got)
	}
	if got := len(q.later[quotaOf("b")]); got != 25 {
		t.Errorf("quota of namespace b (the updates' new object) added %d times, want 25", got)
	}
	for r, ds := range q.later {
		for _, d := range ds {
			if d != quotaCountDelay {
				t.Fatalf("%v added after %s, want %s", r, d, quotaCountDelay)
			}
		}
	}
}
