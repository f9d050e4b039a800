package workspace

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// TestReleasesGPUsQuotaQueue: a waiter that leaves its quota's queue (its quota now admits it and it
// waits for GPUs instead, or it is admitted) brings back the waiters behind it, which counted it
// ahead; a quota waiter that stays one does not.
func TestReleasesGPUsQuotaQueue(t *testing.T) {
	waiting := func(reason string) *workspacesv1.WorkspaceDeployment {
		return &workspacesv1.WorkspaceDeployment{Status: workspacesv1.WorkspaceDeploymentStatus{Phase: workspacesv1.PhaseWaiting,
			Conditions: []metav1.Condition{{Type: workspacesv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason}}}}
	}
	quota := waiting(workspacesv1.ReasonQuotaExceeded)
	if !(releasesGPUs{}).Update(event.UpdateEvent{ObjectOld: quota, ObjectNew: waiting(workspacesv1.ReasonWaitingForGpuCapacity)}) {
		t.Error("a quota waiter that now waits for GPUs must bring back the quota waiters behind it")
	}
	if (releasesGPUs{}).Update(event.UpdateEvent{ObjectOld: quota, ObjectNew: waiting(workspacesv1.ReasonQuotaExceeded)}) {
		t.Error("a quota waiter that stays one brings back no one")
	}
}

// TestReleasesGPUsDeployTimeout: a Failed workspace whose release passes its deploy deadline
// (HelmReleaseReady turns DeployTimeout) brings back the waiters behind it: its replicas not bound
// yet stopped reserving GPUs. A Failed workspace whose status does not change that way brings back
// no one.
func TestReleasesGPUsDeployTimeout(t *testing.T) {
	failed := func(reason, message string) *workspacesv1.WorkspaceDeployment {
		return &workspacesv1.WorkspaceDeployment{Status: workspacesv1.WorkspaceDeploymentStatus{Phase: workspacesv1.PhaseFailed,
			Conditions: []metav1.Condition{{Type: workspacesv1.HelmReleaseReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: message}}}}
	}
	k0rdentFailed := failed(workspacesv1.ReasonHelmReleaseFailed, "failed")
	timedOut := failed(workspacesv1.ReasonDeployTimeout, "failed; not deployed within deployTimeout")
	if !(releasesGPUs{}).Update(event.UpdateEvent{ObjectOld: k0rdentFailed, ObjectNew: timedOut}) {
		t.Error("a failed release past its deploy deadline must bring back the waiters")
	}
	if (releasesGPUs{}).Update(event.UpdateEvent{ObjectOld: timedOut, ObjectNew: failed(workspacesv1.ReasonDeployTimeout, "other words")}) {
		t.Error("a timed out release that stays one brings back no one")
	}
	if (releasesGPUs{}).Update(event.UpdateEvent{ObjectOld: k0rdentFailed, ObjectNew: failed(workspacesv1.ReasonHelmReleaseFailed, "other words")}) {
		t.Error("a failed release within its deadline brings back no one")
	}
}

// TestChildEventsPutLostAdmissionsFirst: the workspaces whose admission a child event took away are
// handed to the workers ahead of the other workspaces that event (and earlier ones) brought back, so
// that their status says so without waiting behind workspaces that are only checked again.
func TestChildEventsPutLostAdmissionsFirst(t *testing.T) {
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: name}}
	}
	h := childEvents{split: func(context.Context, client.Object) (lost, others []reconcile.Request) {
		others = []reconcile.Request{req("deploying-0"), req("deploying-1"), req("deploying-2")}
		return []reconcile.Request{req("lost")}, others
	}}
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	// Workspaces an earlier event brought back are still queued.
	q.Add(req("queued-before"))
	cd := &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "cd"}}
	h.Generic(context.Background(), event.GenericEvent{Object: cd}, q)
	if n := q.Len(); n != 5 {
		t.Fatalf("want 5 queued workspaces, got %d", n)
	}
	first, _ := q.Get()
	if first != req("lost") {
		t.Fatalf("the workspace whose admission was lost must come first, got %s", first)
	}
	// A queue without priorities still gets every workspace.
	plain := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer plain.ShutDown()
	h.Generic(context.Background(), event.GenericEvent{Object: cd}, plain)
	if n := plain.Len(); n != 4 {
		t.Fatalf("plain queue: want 4 queued workspaces, got %d", n)
	}
}

// TestChildChangeBringsBackWhomItConcerns: a child event brings back a deploying or stopping
// workspace only for a change of the Pods in its release namespace (or of anything), a workspace
// failed or pending for the child's GPU kinds for a change of its Nodes, one pending on an
// unreachable child for a change of its reachability; waiting workspaces and deletions for any change;
// an installed workspace (deploying, running, stopped) for a change of its own release namespace or
// guard rails, but not for a connect or relisting; any workspace with its release made for a change of
// the child's reachability.
func TestChildChangeBringsBackWhomItConcerns(t *testing.T) {
	ws := func(name string, phase workspacesv1.WorkspacePhase, conds ...metav1.Condition) *workspacesv1.WorkspaceDeployment {
		w := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}}
		w.Spec.ClusterDeploymentRef.Name = "cd"
		w.Status.Phase = phase
		w.Status.ServiceSetName = "ss-" + name
		w.Status.Conditions = conds
		return w
	}
	feasible := func(reason string) metav1.Condition {
		return metav1.Condition{Type: workspacesv1.FeasibleCondition, Status: metav1.ConditionFalse, Reason: reason}
	}
	deploying := ws("a", workspacesv1.PhaseDeploying)
	ns := owned.ReleaseNamespace(deploying)
	stopping := ws("b", workspacesv1.PhaseStopped, metav1.Condition{Type: workspacesv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: workspacesv1.ReasonStopping})
	stoppingNS := owned.ReleaseNamespace(stopping)
	stopped := ws("c", workspacesv1.PhaseStopped, metav1.Condition{Type: workspacesv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: workspacesv1.ReasonStopped})
	deleting := ws("d", workspacesv1.PhaseRunning)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}

	podsOf := func(namespaces ...string) childcluster.Change { return childcluster.Change{Namespaces: namespaces} }
	ownedIn := func(namespaces ...string) childcluster.Change { return childcluster.Change{Owned: namespaces} }
	running := ws("f", workspacesv1.PhaseRunning)
	runningNS := owned.ReleaseNamespace(running)
	notInstalled := ws("l", workspacesv1.PhaseFailed)
	notInstalled.Status.ServiceSetName = ""
	nodes := childcluster.Change{Nodes: true}
	all := childcluster.Change{All: true, Nodes: true}
	for _, tc := range []struct {
		name   string
		ws     *workspacesv1.WorkspaceDeployment
		change childcluster.Change
		want   bool
	}{
		{"deploying, its pods", deploying, podsOf("other", ns), true},
		{"deploying, another namespace's pods", deploying, podsOf("other"), false},
		{"deploying, nodes", deploying, nodes, false},
		{"deploying, anything", deploying, all, true},
		{"stopping, its pods", stopping, podsOf(stoppingNS), true},
		{"stopping, another namespace's pods", stopping, podsOf(ns), false},
		{"stopped", stopped, all, false},
		{"waiting, another namespace's pods", ws("e", workspacesv1.PhaseWaiting), podsOf("other"), true},
		{"running", running, all, false},
		{"running, the child unreachable or back", running, childcluster.Change{All: true, Nodes: true, Reach: true}, true},
		{"stopped, the child unreachable or back", stopped, childcluster.Change{All: true, Nodes: true, Reach: true}, true},
		{"failed with its release, the child unreachable or back", ws("k", workspacesv1.PhaseFailed), childcluster.Change{All: true, Nodes: true, Reach: true}, true},
		{"failed without a release, the child unreachable or back", notInstalled, childcluster.Change{All: true, Nodes: true, Reach: true}, false},
		{"running, its pods", running, podsOf(runningNS), false},
		{"running, its release namespace or guard rails", running, ownedIn("other", runningNS), true},
		{"running, another's guard rails", running, ownedIn("other"), false},
		{"deploying, its guard rails", deploying, ownedIn(ns), true},
		{"stopped, its guard rails", stopped, ownedIn(owned.ReleaseNamespace(stopped)), true},
		{"stopped, another's guard rails", stopped, ownedIn(ns), false},
		{"failed, its guard rails", ws("j", workspacesv1.PhaseFailed), ownedIn(owned.ReleaseNamespace(ws("j", workspacesv1.PhaseFailed))), false},
		{"deleting, another namespace's pods", deleting, podsOf("other"), true},
		{"GPU kind missing, nodes", ws("g", workspacesv1.PhaseFailed, feasible(workspacesv1.ReasonGpuOfferingUnavailable)), nodes, true},
		{"GPU kind missing, pods", ws("g", workspacesv1.PhaseFailed, feasible(workspacesv1.ReasonGpuOfferingUnavailable)), podsOf("other"), false},
		{"never fits, nodes", ws("h", workspacesv1.PhasePending, feasible(workspacesv1.ReasonGpuRequestNeverFits)), nodes, true},
		{"unreachable, reachability", ws("i", workspacesv1.PhasePending, feasible(workspacesv1.ReasonClusterUnreachable)), all, true},
		{"unreachable, nodes", ws("i", workspacesv1.PhasePending, feasible(workspacesv1.ReasonClusterUnreachable)), nodes, false},
	} {
		if got := bringsBack(tc.ws, tc.change); got != tc.want {
			t.Errorf("%s: brought back %t, want %t", tc.name, got, tc.want)
		}
	}
}
