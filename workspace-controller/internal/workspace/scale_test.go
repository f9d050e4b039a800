package workspace

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
)

// TestOwnWritesStale: a cached copy older than this process's last write is stale; one as new ends
// the watch on it.
func TestOwnWritesStale(t *testing.T) {
	var w ownWrites
	if w.stale("ns/a", "5") {
		t.Fatal("stale without a write")
	}
	w.wrote("ns/a", "10")
	if !w.stale("ns/a", "9") {
		t.Error("a copy older than the write is not stale")
	}
	if w.stale("ns/b", "9") {
		t.Error("another workspace is stale")
	}
	if w.stale("ns/a", "10") || w.stale("ns/a", "11") {
		t.Error("the copy of the write, or a newer one, is stale")
	}
	if !w.own("ns/a", "10") || !w.own("ns/a", "9") || w.own("ns/a", "11") || w.own("ns/b", "10") {
		t.Error("own: the write and older copies are own, a newer one or another workspace's is not")
	}
	w.wrote("ns/a", "20")
	w.forget("ns/a")
	if w.stale("ns/a", "3") || w.own("ns/a", "20") {
		t.Error("tracked after forget")
	}
}

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: typ + " " + reason}
}

// TestRecordPassEventOnePerPass: a pass that changes many conditions records one Event, Ready's when
// it changed, else the first bad transition; a pass without transitions records none.
func TestRecordPassEventOnePerPass(t *testing.T) {
	first := []metav1.Condition{
		cond(workspacesv1.ClassResolvedCondition, metav1.ConditionTrue, "ClassResolved"),
		cond(workspacesv1.ClusterDeploymentResolvedCondition, metav1.ConditionTrue, "ClusterDeploymentResolved"),
		cond(workspacesv1.FeasibleCondition, metav1.ConditionTrue, "Feasible"),
		cond(workspacesv1.ReadyCondition, metav1.ConditionFalse, "Deploying"),
		cond(workspacesv1.ReconcilingCondition, metav1.ConditionTrue, "Deploying"),
	}
	for _, tc := range []struct {
		name          string
		before, after []metav1.Condition
		want          string // "<Action> <Reason>", "" for no event
	}{
		{"first pass", nil, first, "Ready Deploying"},
		{"no change", first, first, ""},
		{"a bad transition without Ready", first[:3], append(append([]metav1.Condition{}, first[:2]...),
			cond(workspacesv1.FeasibleCondition, metav1.ConditionFalse, "WaitingForGpuCapacity"),
			cond(workspacesv1.RoutesReadyCondition, metav1.ConditionTrue, "RoutesReady")), "Feasible WaitingForGpuCapacity"},
		{"only Reconciling", first[:4], first, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(20)
			ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ws"}}
			recordPassEvent(rec, ws, tc.before, tc.after)
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("events %q, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("events %q, want exactly one", got)
			}
			// FakeRecorder writes "<type> <reason> <note>"; the action is the condition type.
			want := strings.Fields(tc.want)
			if f := strings.Fields(got[0]); len(f) < 3 || f[1] != want[1] || !strings.HasPrefix(strings.Join(f[2:], " "), want[0]) {
				t.Errorf("event %q, want the %s transition", got[0], tc.want)
			}
		})
	}
}

// TestWatchPredicates: the controller's own status and finalizer writes, a class's inUseBy count, a
// ClusterDeployment's unrelated status churn and a WorkspaceQuota's status wake no workspace; spec,
// deletion, labels, annotations, validity and readiness do.
func TestWatchPredicates(t *testing.T) {
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Name: "ws", Generation: 1, ResourceVersion: "1"}}
	status := ws.DeepCopy()
	status.Status.Phase = workspacesv1.PhaseDeploying
	status.Finalizers = []string{workspacesv1.WorkspaceFinalizer}
	status.ResourceVersion = "2"
	writes := &ownWrites{}
	writes.wrote("/ws", "2")
	foreign := status.DeepCopy()
	foreign.ResourceVersion = "3"
	spec := ws.DeepCopy()
	spec.Generation = 2
	annotated := ws.DeepCopy()
	annotated.Annotations = map[string]string{"a": "b"}
	deleting := ws.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now

	class := &workspacesv1.WorkspaceClass{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 1}}
	class.Status.Valid = true
	count := class.DeepCopy()
	count.Status.InUseBy = 7
	invalid := class.DeepCopy()
	invalid.Status.Valid = false
	classSpec := class.DeepCopy()
	classSpec.Generation = 2

	cd := &k0rdentv1beta1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Name: "cd", Generation: 1}}
	cd.Status.Conditions = []metav1.Condition{cond("Ready", metav1.ConditionTrue, "Ready")}
	reworded := cd.DeepCopy()
	reworded.Status.Conditions[0].Message = "another message"
	reworded.Status.KubernetesVersion = "v1.37.2"
	notReady := cd.DeepCopy()
	notReady.Status.Conditions[0].Status = metav1.ConditionFalse
	labelled := cd.DeepCopy()
	labelled.Labels = map[string]string{"k": "v"}

	quota := &workspacesv1.WorkspaceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Generation: 1, ResourceVersion: "1"}}
	quota.Spec.GPUs = []workspacesv1.GPUQuota{{Vendor: workspacesv1.GPUVendorNVIDIA, Limit: 4}}
	used := quota.DeepCopy()
	used.ResourceVersion = "2"
	used.Status.GPUs = []workspacesv1.GPUUsage{{Vendor: workspacesv1.GPUVendorNVIDIA, Used: 3, Limit: 4}}
	used.Status.Summary = "NVIDIA 3/4"
	raised := used.DeepCopy()
	raised.Generation = 2
	raised.Spec.GPUs[0].Limit = 8

	for _, tc := range []struct {
		name string
		pass bool
		got  bool
	}{
		{"quota status", false, quotaSpecChanged{}.Update(event.UpdateEvent{ObjectOld: quota, ObjectNew: used})},
		{"quota limit raised", true, quotaSpecChanged{}.Update(event.UpdateEvent{ObjectOld: used, ObjectNew: raised})},
		{"quota created", true, quotaSpecChanged{}.Create(event.CreateEvent{Object: quota})},
		{"quota deleted", true, quotaSpecChanged{}.Delete(event.DeleteEvent{Object: quota})},
		{"own status and finalizer write", false, workspaceChanged{writes: writes}.Update(event.UpdateEvent{ObjectOld: ws, ObjectNew: status})},
		{"someone else's status write", true, workspaceChanged{writes: writes}.Update(event.UpdateEvent{ObjectOld: ws, ObjectNew: foreign})},
		{"spec change", true, workspaceChanged{}.Update(event.UpdateEvent{ObjectOld: ws, ObjectNew: spec})},
		{"annotation", true, workspaceChanged{}.Update(event.UpdateEvent{ObjectOld: ws, ObjectNew: annotated})},
		{"deletion", true, workspaceChanged{}.Update(event.UpdateEvent{ObjectOld: ws, ObjectNew: deleting})},
		{"class inUseBy", false, classChanged{}.Update(event.UpdateEvent{ObjectOld: class, ObjectNew: count})},
		{"class invalid", true, classChanged{}.Update(event.UpdateEvent{ObjectOld: class, ObjectNew: invalid})},
		{"class spec", true, classChanged{}.Update(event.UpdateEvent{ObjectOld: class, ObjectNew: classSpec})},
		{"cluster status churn", false, clusterChanged{}.Update(event.UpdateEvent{ObjectOld: cd, ObjectNew: reworded})},
		{"cluster not ready", true, clusterChanged{}.Update(event.UpdateEvent{ObjectOld: cd, ObjectNew: notReady})},
		{"cluster labels", true, clusterChanged{}.Update(event.UpdateEvent{ObjectOld: cd, ObjectNew: labelled})},
		{"own ServiceSet created", false, notOwnServiceSetCreate{}.Create(event.CreateEvent{Object: &k0rdentv1beta1.ServiceSet{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{workspacesv1.WorkspaceLabel: "ws"}}}})},
		{"own ServiceSet listed at start", true, notOwnServiceSetCreate{}.Create(event.CreateEvent{Object: &k0rdentv1beta1.ServiceSet{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{workspacesv1.WorkspaceLabel: "ws"},
				CreationTimestamp: metav1.NewTime(time.Now().Add(-2 * freshServiceSet))}}})},
		{"own ServiceSet made a moment ago", false, notOwnServiceSetCreate{}.Create(event.CreateEvent{Object: &k0rdentv1beta1.ServiceSet{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{workspacesv1.WorkspaceLabel: "ws"},
				CreationTimestamp: metav1.NewTime(time.Now())}}})},
		{"prerequisite ServiceSet created", true, notOwnServiceSetCreate{}.Create(event.CreateEvent{Object: &k0rdentv1beta1.ServiceSet{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{workspacesv1.PrerequisiteLabel: "p"}}}})},
	} {
		if tc.got != tc.pass {
			t.Errorf("%s: passes %t, want %t", tc.name, tc.got, tc.pass)
		}
	}
}

// reconcileCount is the workspace controller's passes so far (controller_runtime_reconcile_total).
func reconcileCount(t *testing.T) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	must(t, err)
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "workspacedeployment" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// workspaceEvents lists the Events about a workspace.
func workspaceEvents(t *testing.T, key types.NamespacedName) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	must(t, k8s.List(ctxT(t), &list, client.InNamespace(key.Namespace)))
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "WorkspaceDeployment" && e.Regarding.Name == key.Name {
			out = append(out, e)
		}
	}
	return out
}

// runningCPUWorkspace admits a CPU-only workspace and plays KCM until it is Running.
func runningCPUWorkspace(t *testing.T) (types.NamespacedName, string) {
	t.Helper()
	ns, class, cd := gateFixture(t)
	key := createWorkspace(t, ns, class, cd)
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	ss := waitServiceSet(t, ws)
	setServiceState(t, client.ObjectKeyFromObject(ss), k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseRunning, "")
	return key, cd
}

// TestOneEventPerTransition: an admission and the step to Running record one Event each (Ready's
// transition), not one per condition, and no pass records a transition twice.
func TestOneEventPerTransition(t *testing.T) {
	key, _ := runningCPUWorkspace(t)
	var evs []eventsv1.Event
	eventually(t, "the Running event", func() error {
		evs = workspaceEvents(t, key)
		for _, e := range evs {
			if e.Reason == workspacesv1.ReasonRunning {
				return nil
			}
		}
		return fmt.Errorf("no Running event among %d", len(evs))
	})
	// The recorder writes the Events in order, so the admission's is there once the Running one is.
	if len(evs) != 2 {
		var got []string
		for _, e := range evs {
			got = append(got, e.Action+"/"+e.Reason)
		}
		t.Fatalf("%d events %v, want 2 (the admission's and Running's)", len(evs), got)
	}
	for _, e := range evs {
		if e.Action != workspacesv1.ReadyCondition {
			t.Errorf("an event for %s (%s), want only Ready's transitions", e.Action, e.Reason)
		}
	}
}

// TestNoWritesWhenNothingChanged: passes over a Running workspace whose inputs did not change (its
// ClusterDeployment relabelled) write nothing and record no Event.
func TestNoWritesWhenNothingChanged(t *testing.T) {
	key, cdName := runningCPUWorkspace(t)
	var settled *workspacesv1.WorkspaceDeployment
	eventually(t, "the Running event", func() error {
		for _, e := range workspaceEvents(t, key) {
			if e.Reason == workspacesv1.ReasonRunning {
				settled = getWS(t, key)
				return nil
			}
		}
		return fmt.Errorf("no Running event yet")
	})
	eventsBefore := len(workspaceEvents(t, key))
	cdKey := types.NamespacedName{Namespace: key.Namespace, Name: cdName}
	// Nor the ServiceSet: its cached copy holds a digest of the values, which must compare equal to
	// the desired values.
	ssKey := types.NamespacedName{Namespace: cdKey.Namespace, Name: settled.Status.ServiceSetName}
	ssBefore := &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), ssKey, ssBefore))
	for i := range 3 {
		passes := reconcileCount(t)
		cd := &k0rdentv1beta1.ClusterDeployment{}
		must(t, k8s.Get(ctxT(t), cdKey, cd))
		base := cd.DeepCopy()
		if cd.Labels == nil {
			cd.Labels = map[string]string{}
		}
		cd.Labels["bench.example/touch"] = fmt.Sprint(i)
		must(t, k8s.Patch(ctxT(t), cd, client.MergeFrom(base)))
		eventually(t, "a pass after the relabel", func() error {
			if reconcileCount(t) <= passes {
				return fmt.Errorf("no pass yet")
			}
			return nil
		})
	}
	if got := getWS(t, key); got.ResourceVersion != settled.ResourceVersion {
		t.Errorf("the workspace was written (resourceVersion %s -> %s): status %+v", settled.ResourceVersion, got.ResourceVersion, got.Status)
	}
	if n := len(workspaceEvents(t, key)); n != eventsBefore {
		t.Errorf("%d new events", n-eventsBefore)
	}
	ssAfter := &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), ssKey, ssAfter))
	if ssAfter.ResourceVersion != ssBefore.ResourceVersion {
		t.Errorf("the ServiceSet was written (resourceVersion %s -> %s)", ssBefore.ResourceVersion, ssAfter.ResourceVersion)
	}
}

// TestGPUBurstNeverDoubleBooks: ten 1-GPU workspaces created at once on a node with 4 GPUs: exactly
// 4 are admitted (each pinned to the node), the others wait.
func TestGPUBurstNeverDoubleBooks(t *testing.T) {
	ns, class, cd := gateFixture(t)
	model := name("burst")
	node := name("node")
	must(t, childtest.CreateNode(ctxT(t), child.Client, childtest.Node{Name: node,
		Labels:      map[string]string{gpu.LabelGPUModel: model, corev1.LabelHostname: node},
		Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, 4)}))
	keys := make([]types.NamespacedName, 10)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			keys[i] = createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
		})
	}
	wg.Wait()
	eventually(t, "4 admitted and 6 waiting", func() error {
		admitted, waiting, gpus := 0, 0, int64(0)
		for _, k := range keys {
			ws := getWS(t, k)
			switch {
			case ws.Status.Admission != nil && ws.Status.Admission.GPUs > 0:
				admitted++
				for _, n := range ws.Status.Admission.Nodes {
					if n.Name != node {
						return fmt.Errorf("%s admitted on node %s", k, n.Name)
					}
					gpus += int64(n.Replicas) * ws.Status.Admission.GPUsPerReplica
				}
			case ws.Status.Phase == workspacesv1.PhaseWaiting:
				waiting++
			}
		}
		if gpus > 4 {
			t.Fatalf("%d GPUs admitted on a node with 4", gpus)
		}
		if admitted != 4 || waiting != 6 {
			return fmt.Errorf("%d admitted, %d waiting", admitted, waiting)
		}
		return nil
	})
}
