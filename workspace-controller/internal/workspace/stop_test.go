package workspace

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// setStopped sets spec.stopped of a workspace.
func setStopped(t *testing.T, key types.NamespacedName, stopped bool) {
	t.Helper()
	ws := getWS(t, key)
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Spec.Stopped = stopped
	must(t, k8s.Patch(ctxT(t), ws, patch))
}

// releaseReplicas reads _exalsius.resources.replicas from the workspace's ServiceSet.
func releaseReplicas(t *testing.T, ss *k0rdentv1beta1.ServiceSet) (int64, error) {
	t.Helper()
	ex, _ := serviceSetValues(t, ss)["_exalsius"].(map[string]any)
	res, _ := ex["resources"].(map[string]any)
	r, ok := res["replicas"]
	if !ok {
		return 0, fmt.Errorf("no _exalsius.resources.replicas in %v", ex)
	}
	switch n := r.(type) {
	case int:
		return int64(n), nil
	case int64:
		return n, nil
	case float64:
		return int64(n), nil
	}
	return 0, fmt.Errorf("_exalsius.resources.replicas is %T", r)
}

// waitReplicas waits until the workspace's ServiceSet asks for n replicas, with the stopped label
// exactly when n is 0.
func waitReplicas(t *testing.T, key types.NamespacedName, n int64) *k0rdentv1beta1.ServiceSet {
	t.Helper()
	ss := &k0rdentv1beta1.ServiceSet{}
	ws := getWS(t, key)
	ssKey := types.NamespacedName{Namespace: owned.ClusterKey(ws).Namespace, Name: owned.ServiceSetName(ws)}
	eventually(t, fmt.Sprintf("ServiceSet %s with %d replicas", ssKey, n), func() error {
		if err := k8s.Get(ctxT(t), ssKey, ss); err != nil {
			return err
		}
		got, err := releaseReplicas(t, ss)
		if err != nil {
			return err
		}
		if got != n {
			return fmt.Errorf("replicas %d", got)
		}
		if stopped := ss.Labels[owned.LabelStopped] == "true"; stopped != (n == 0) {
			return fmt.Errorf("label %s=%q with %d replicas", owned.LabelStopped, ss.Labels[owned.LabelStopped], n)
		}
		return nil
	})
	return ss
}

// TestStopFreesGPUsAndStartGatesAgain: a Running workspace holding the only GPU is stopped. Its
// chart ignores the replica count (as the published catalog's charts do): its pod keeps running
// whatever the values say, and k0rdent reports the zero-replica values Deployed all the same. The
// stop is made on the child (a quota refusing every pod of the release, the running pod deleted), and
// the workspace keeps its GPU until the child shows the pod gone; then a waiting workspace is
// admitted. Started again while the GPU is taken it waits (never Failed) with its release still at
// zero, and comes back once the GPU is free: the stop's quota is gone and the release's workloads are
// woken to make their pods at once.
func TestStopFreesGPUsAndStartGatesAgain(t *testing.T) {
	ns, class, cd := gateFixture(t)
	model := name("a10")
	node := gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	holder := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, holder, workspacesv1.PhaseDeploying, "")
	ssKey := client.ObjectKeyFromObject(waitServiceSet(t, ws))
	release := owned.LocalReleaseNamespace(holder.Name)
	// The release on the child, as the chart made it: a ReplicaSet of one replica, whatever the
	// values, and its pod bound to the GPU node.
	syncQuota(t, child.Client, release)
	one := int32(1)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: release, Name: "notebook"}, Spec: appsv1.ReplicaSetSpec{
		Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "notebook"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "notebook"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/notebook:1"}}}},
	}}
	must(t, child.Client.Create(ctxT(t), rs))
	pod := gpuPod(t, child.Client, release, node, gpu.ResourceNVIDIA, 1)
	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, holder, workspacesv1.PhaseRunning, "")
	waiter := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, waiter, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)

	setStopped(t, holder, true)
	waitReplicas(t, holder, 0)
	// k0rdent reports the zero-replica values deployed; the chart ignored them.
	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateDeployed, "")
	eventually(t, "the stop made on the child", func() error {
		q := &corev1.ResourceQuota{}
		if err := child.Client.Get(ctxT(t), client.ObjectKey{Namespace: release, Name: owned.StopQuotaName}, q); err != nil {
			return err
		}
		if h := q.Spec.Hard[corev1.ResourcePods]; !h.IsZero() {
			return fmt.Errorf("stop quota allows %s pods", h.String())
		}
		p := &corev1.Pod{}
		if err := child.Client.Get(ctxT(t), client.ObjectKey{Namespace: release, Name: pod}, p); err != nil {
			return err
		}
		if p.DeletionTimestamp.IsZero() {
			return fmt.Errorf("the release's pod is not being deleted")
		}
		return nil
	})
	ws = waitPhase(t, holder, workspacesv1.PhaseStopped, workspacesv1.ReasonStopping)
	if ws.Status.Admission == nil {
		t.Errorf("the admission is released while the release's pod still holds its GPU")
	}
	if err := contains(ws.Status.Message, pod); err != nil {
		t.Errorf("the stopping message does not name the pod that holds the GPU: %v", err)
	}
	if c := condition(ws, workspacesv1.ReconcilingCondition); c.Status != metav1.ConditionTrue {
		t.Errorf("Reconciling %+v while stopping, want True", c)
	}
	if p := getWS(t, waiter).Status.Phase; p != workspacesv1.PhaseWaiting {
		t.Errorf("the waiter is %s while the stopped release's pod still runs, want Waiting", p)
	}

	// The kubelet stops the pod.
	must(t, child.Client.Delete(ctxT(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: release, Name: pod}}, client.GracePeriodSeconds(0)))
	ws = waitPhase(t, holder, workspacesv1.PhaseStopped, workspacesv1.ReasonStopped)
	if ws.Status.Admission != nil {
		t.Errorf("a stopped workspace keeps its admission: %+v", ws.Status.Admission)
	}
	if c := condition(ws, workspacesv1.ReadyCondition); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v of a stopped workspace, want True (the spec's desired state is reached)", c)
	}
	for _, typ := range []string{workspacesv1.ReconcilingCondition, workspacesv1.StalledCondition} {
		if c := meta.FindStatusCondition(ws.Status.Conditions, typ); c != nil {
			t.Errorf("a stopped workspace has %s: %+v", typ, c)
		}
	}
	if c := condition(ws, workspacesv1.FeasibleCondition); c.Status != metav1.ConditionFalse || c.Reason != workspacesv1.ReasonStopped {
		t.Errorf("Feasible %+v, want False/%s", c, workspacesv1.ReasonStopped)
	}
	if len(ws.Status.Access) == 0 {
		t.Errorf("a stopped workspace lost its URLs")
	}
	waitPhase(t, waiter, workspacesv1.PhaseDeploying, "")

	// KCM reports states to the second: a Deployed of the same second as the start's rollout would
	// count as current. A re-sync in progress keeps the start from being taken for deployed at once.
	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateProvisioning, "")
	setStopped(t, holder, false)
	ws = waitPhase(t, holder, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	if ws.Status.Admission != nil {
		t.Errorf("a started workspace waiting for GPUs holds an admission: %+v", ws.Status.Admission)
	}
	waitReplicas(t, holder, 0) // not scaled up while it waits

	if err := child.Client.Get(ctxT(t), client.ObjectKey{Namespace: release, Name: owned.StopQuotaName}, &corev1.ResourceQuota{}); err != nil {
		t.Errorf("the stop quota went while the started workspace still waits for a GPU: %v", err)
	}

	must(t, k8s.Delete(ctxT(t), getWS(t, waiter)))
	waitGone(t, "waiter", waiter, &workspacesv1.WorkspaceDeployment{})
	waitPhase(t, holder, workspacesv1.PhaseDeploying, "")
	waitReplicas(t, holder, 1)
	eventually(t, "the stop undone on the child", func() error {
		err := child.Client.Get(ctxT(t), client.ObjectKey{Namespace: release, Name: owned.StopQuotaName}, &corev1.ResourceQuota{})
		if err == nil {
			return fmt.Errorf("the stop quota is still there")
		}
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		got := &appsv1.ReplicaSet{}
		if err := child.Client.Get(ctxT(t), client.ObjectKeyFromObject(rs), got); err != nil {
			return err
		}
		if got.Annotations[owned.AnnotationStartedAt] == "" {
			return fmt.Errorf("the release's ReplicaSet was not woken")
		}
		return nil
	})
	// The woken ReplicaSet makes its pod again (the test plays its controller and the kubelet): a
	// started workspace is Running once it runs.
	syncQuota(t, child.Client, release)
	gpuPod(t, child.Client, release, node, gpu.ResourceNVIDIA, 1)
	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateDeployed, "")
	ws = waitPhase(t, holder, workspacesv1.PhaseRunning, "")
	if ws.Status.Admission == nil || ws.Status.Admission.GPUs != 1 {
		t.Errorf("a started workspace has admission %+v, want 1 GPU", ws.Status.Admission)
	}
}

// TestStoppedBeforeInstall: a workspace created stopped installs nothing and holds no GPU; started,
// it is gated and installed.
func TestStoppedBeforeInstall(t *testing.T) {
	ns, class, cd := gateFixture(t)
	model := name("t4")
	gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	key := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = gpuResources(1, model)
		ws.Spec.Stopped = true
	})
	ws := waitPhase(t, key, workspacesv1.PhaseStopped, workspacesv1.ReasonStopped)
	if ws.Status.Admission != nil {
		t.Errorf("admission %+v, want none", ws.Status.Admission)
	}
	if sets := workspaceServiceSets(t, ws); len(sets) != 0 {
		t.Errorf("a workspace created stopped has %d ServiceSets", len(sets))
	}
	setStopped(t, key, false)
	waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	waitReplicas(t, key, 1)
}

// TestStopAfterStopsAtTheDeadline: spec.stopAfter sets spec.stopped once the spec has not changed for
// that long, not before, with an event and the annotation saying so; started again, the annotation
// goes and the clock restarts.
func TestStopAfterStopsAtTheDeadline(t *testing.T) {
	ns, class, cd := gateFixture(t)
	const after = 3 * time.Second
	key := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.StopAfter = &metav1.Duration{Duration: after}
	})
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	ssKey := client.ObjectKeyFromObject(waitServiceSet(t, ws))
	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateProvisioning, "")

	var stopped *workspacesv1.WorkspaceDeployment
	eventually(t, "spec.stopped set by stopAfter", func() error {
		stopped = getWS(t, key)
		if !stopped.Spec.Stopped {
			return fmt.Errorf("not stopped yet (phase %s)", stopped.Status.Phase)
		}
		return nil
	})
	at, err := time.Parse(time.RFC3339, stopped.Annotations[workspacesv1.AutoStoppedAnnotation])
	if err != nil {
		t.Fatalf("annotation %s: %v", workspacesv1.AutoStoppedAnnotation, err)
	}
	first := ws.Status.LastSpecChange
	if first == nil || first.Generation != ws.Generation {
		t.Fatalf("lastSpecChange %+v, want generation %d", first, ws.Generation)
	}
	if at.Before(first.Time.Add(after)) {
		t.Errorf("stopped at %s, before the deadline %s", at, first.Time.Add(after))
	}
	waitReplicas(t, key, 0)
	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateDeployed, "")
	ws = waitPhase(t, key, workspacesv1.PhaseStopped, workspacesv1.ReasonStopped)
	if err := contains(condition(ws, workspacesv1.ReadyCondition).Message, "spec.stopAfter"); err != nil {
		t.Error(err)
	}
	eventually(t, "StoppedAfterIdle event", func() error { return hasEvent(t, ws, "StoppedAfterIdle") })

	// Started: the annotation goes, and the clock counts from the start.
	setStopped(t, key, false)
	eventually(t, "annotation removed and clock restarted", func() error {
		ws = getWS(t, key)
		if _, ok := ws.Annotations[workspacesv1.AutoStoppedAnnotation]; ok && !ws.Spec.Stopped {
			return fmt.Errorf("annotation still there")
		}
		if c := ws.Status.LastSpecChange; c == nil || c.Generation <= stopped.Generation {
			return fmt.Errorf("lastSpecChange %+v", c)
		}
		return nil
	})
	restarted := ws.Status.LastSpecChange
	eventually(t, "stopped again by stopAfter", func() error {
		ws = getWS(t, key)
		if !ws.Spec.Stopped {
			return fmt.Errorf("not stopped yet (phase %s)", ws.Status.Phase)
		}
		return nil
	})
	at, err = time.Parse(time.RFC3339, ws.Annotations[workspacesv1.AutoStoppedAnnotation])
	must(t, err)
	if at.Before(restarted.Time.Add(after)) {
		t.Errorf("stopped again at %s, before the deadline %s", at, restarted.Time.Add(after))
	}
}

// TestStopAfterCountsFromAdmission: spec.stopAfter never stops a workspace Waiting for GPUs, however
// long it waits, and its clock starts when the gate admits it; the Event names the GPU it frees.
func TestStopAfterCountsFromAdmission(t *testing.T) {
	ns, class, cd := gateFixture(t)
	model := name("l4")
	node := gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	busy := gpuPod(t, child.Client, "busy", node, gpu.ResourceNVIDIA, 1)
	const after = 2 * time.Second
	key := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = gpuResources(1, model)
		ws.Spec.StopAfter = &metav1.Duration{Duration: after}
	})
	ws := waitPhase(t, key, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	change := ws.Status.LastSpecChange
	if change == nil || change.Generation != ws.Generation {
		t.Fatalf("lastSpecChange %+v, want generation %d", change, ws.Generation)
	}
	// Well past the deadline the spec change alone would set, the workspace still waits.
	idle := change.Time.Add(2 * after)
	eventually(t, "stopAfter passed twice since the spec change", func() error {
		if time.Now().Before(idle) {
			return fmt.Errorf("not yet %s", idle)
		}
		return nil
	})
	ws = getWS(t, key)
	if ws.Spec.Stopped || ws.Status.Phase != workspacesv1.PhaseWaiting {
		t.Fatalf("a workspace waiting for GPUs was stopped by stopAfter: stopped %t, phase %s, annotations %v",
			ws.Spec.Stopped, ws.Status.Phase, ws.Annotations)
	}

	// The GPU frees up: admitted now, and stopped stopAfter after the admission, not before.
	must(t, childtest.SetPodPhase(ctxT(t), child.Client, "busy", busy, corev1.PodSucceeded))
	ws = waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	ad := ws.Status.Admission
	if ad == nil || ad.AdmittedAt == nil || ad.GPUs != 1 {
		t.Fatalf("admission %+v, want 1 GPU with its time", ad)
	}
	if ad.AdmittedAt.Add(time.Second).Before(idle) {
		t.Fatalf("admitted at %s, before the workspace had waited until %s", ad.AdmittedAt, idle)
	}
	var stopped *workspacesv1.WorkspaceDeployment
	eventually(t, "spec.stopped set by stopAfter", func() error {
		stopped = getWS(t, key)
		if !stopped.Spec.Stopped {
			return fmt.Errorf("not stopped yet (phase %s)", stopped.Status.Phase)
		}
		return nil
	})
	at, err := time.Parse(time.RFC3339, stopped.Annotations[workspacesv1.AutoStoppedAnnotation])
	must(t, err)
	if deadline := ad.AdmittedAt.Add(after); at.Before(deadline) {
		t.Errorf("stopped at %s, before stopAfter passed since the admission at %s", at, ad.AdmittedAt)
	}
	eventually(t, "StoppedAfterIdle event naming the GPU", func() error {
		return eventNote(t, stopped, "StoppedAfterIdle", "its 1 GPU is released")
	})
}

// eventNote reports whether an event of the reason regards the workspace and its note holds want.
func eventNote(t *testing.T, ws *workspacesv1.WorkspaceDeployment, reason, want string) error {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(ctxT(t), &list, client.InNamespace(ws.Namespace)); err != nil {
		return err
	}
	for _, e := range list.Items {
		if e.Regarding.Name == ws.Name && e.Reason == reason {
			return contains(e.Note, want)
		}
	}
	return fmt.Errorf("no %s event for %s among %d", reason, ws.Name, len(list.Items))
}

// hasEvent reports whether an event of the reason regards the workspace.
func hasEvent(t *testing.T, ws *workspacesv1.WorkspaceDeployment, reason string) error {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(ctxT(t), &list, client.InNamespace(ws.Namespace)); err != nil {
		return err
	}
	for _, e := range list.Items {
		if e.Regarding.Name == ws.Name && e.Reason == reason {
			return nil
		}
	}
	return fmt.Errorf("no %s event for %s among %d", reason, ws.Name, len(list.Items))
}

// TestSuspendHoldsStop: spec.stopped set on a suspended workspace does nothing until the suspension
// ends (suspend pauses all reconciliation), then the release is scaled to zero.
func TestSuspendHoldsStop(t *testing.T) {
	ns, class, cd := gateFixture(t)
	key := createWorkspace(t, ns, class, cd)
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	ssKey := client.ObjectKeyFromObject(waitServiceSet(t, ws))
	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseRunning, "")

	ws = getWS(t, key)
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Spec.Suspend, ws.Spec.Stopped = true, true
	must(t, k8s.Patch(ctxT(t), ws, patch))
	eventually(t, "suspension observed", func() error {
		ws = getWS(t, key)
		if ws.Status.ObservedGeneration != ws.Generation {
			return fmt.Errorf("observedGeneration %d of %d", ws.Status.ObservedGeneration, ws.Generation)
		}
		return contains(ws.Status.Message, "suspended")
	})
	if ws.Status.Phase != workspacesv1.PhaseRunning {
		t.Errorf("a suspended workspace asked to stop is %s, want left Running", ws.Status.Phase)
	}
	waitReplicas(t, key, 1)

	patch = client.MergeFrom(ws.DeepCopy())
	ws.Spec.Suspend = false
	must(t, k8s.Patch(ctxT(t), ws, patch))
	waitReplicas(t, key, 0)
	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseStopped, workspacesv1.ReasonStopped)
}

// TestStopKeepsThePodTemplate: a workspace pinned to its admitted node is stopped; the stop's values
// change only the replica count (the node pin stays, so a chart that applies the selector verbatim
// keeps its pod template), and once Stopped the release stays as the stop left it: a later pass, with
// no admission left to pin from, does not rewrite it, and a spec change made while stopped waits for
// the start.
func TestStopKeepsThePodTemplate(t *testing.T) {
	ns, class, cd := gateFixture(t)
	model := name("l4")
	node, host := hostnameNode(t, child.Client, 1, model)
	key := createWorkspace(t, ns, class, cd, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	ssKey := client.ObjectKeyFromObject(waitServiceSet(t, ws))
	// The release's pod runs on the node; the stop deletes it (and the test plays the kubelet).
	release := owned.LocalReleaseNamespace(key.Name)
	syncQuota(t, child.Client, release)
	pod := gpuPod(t, child.Client, release, node, gpu.ResourceNVIDIA, 1)
	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseRunning, "")

	pinned := func(ss *k0rdentv1beta1.ServiceSet) error {
		ex, _ := serviceSetValues(t, ss)["_exalsius"].(map[string]any)
		sched, _ := ex["scheduling"].(map[string]any)
		sel, _ := sched["nodeSelector"].(map[string]any)
		if sel[corev1.LabelHostname] != host {
			return fmt.Errorf("nodeSelector %v, want %s=%s", sel, corev1.LabelHostname, host)
		}
		return nil
	}
	setStopped(t, key, true)
	ss := waitReplicas(t, key, 0)
	if err := pinned(ss); err != nil {
		t.Errorf("the stop's values: %v", err)
	}
	eventually(t, "the release's pod deleted by the stop", func() error {
		p := &corev1.Pod{}
		if err := child.Client.Get(ctxT(t), client.ObjectKey{Namespace: release, Name: pod}, p); err != nil {
			return err
		}
		if p.DeletionTimestamp.IsZero() {
			return fmt.Errorf("not being deleted")
		}
		return nil
	})
	must(t, child.Client.Delete(ctxT(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: release, Name: pod}}, client.GracePeriodSeconds(0)))
	ws = waitPhase(t, key, workspacesv1.PhaseStopped, workspacesv1.ReasonStopped)
	if ws.Status.Admission != nil {
		t.Fatalf("admission %+v after the stop", ws.Status.Admission)
	}
	stoppedGen := ss.Generation

	// A spec change while stopped: observed, and the release left as it is.
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Spec.Values = jsonRaw(t, map[string]any{"greeting": "later"})
	must(t, k8s.Patch(ctxT(t), ws, patch))
	eventually(t, "the spec change observed while stopped", func() error {
		got := getWS(t, key)
		if got.Status.ObservedGeneration != got.Generation || got.Status.Phase != workspacesv1.PhaseStopped {
			return fmt.Errorf("observed %d of %d, phase %s", got.Status.ObservedGeneration, got.Generation, got.Status.Phase)
		}
		return nil
	})
	must(t, k8s.Get(ctxT(t), ssKey, ss))
	if ss.Generation != stoppedGen {
		t.Errorf("the stopped release was rewritten (generation %d, was %d)", ss.Generation, stoppedGen)
	}
	if err := pinned(ss); err != nil {
		t.Errorf("the stopped release: %v", err)
	}
}
