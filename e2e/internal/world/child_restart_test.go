package world

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// After an outage of the child's API server long enough for kwok and kube-scheduler to back off, pods
// are bound and staged again at once: superviseKwok restarts both once the server answers, instead of
// leaving them to their backoffs (30 s for the watches, 32 s for kwok's next try of a failed stage),
// and a pod created after the server is back becomes Ready; and a running pod marked NotReady
// meanwhile, as the node lifecycle controller does when a node stops reporting, is Ready again
// (the pod-ready-again stage). The restarts are what the test waits for, not a time shorter than the
// backoffs: on a loaded machine a just-resumed API server can take longer than that to answer.
func TestPodsReadyAfterChildOutage(t *testing.T) {
	w := &World{RunDir: t.TempDir(), out: io.Discard, children: map[string]*ChildCluster{}, extra: map[string]string{}}
	defer func() { _ = w.Stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := w.StartChild(ctx, "outage", ClusterConfig{})
	if err != nil {
		t.Fatal(err)
	}
	kwok := c.procs[len(c.procs)-1]
	podReady := func(name string, bound time.Duration) {
		t.Helper()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if err := c.Client().Create(ctx, pod); err != nil {
			t.Fatalf("creating pod %s: %v", name, err)
		}
		waitReady(ctx, t, c, kwok, pod, bound)
	}
	podReady("before", time.Minute)

	if err := c.Env.Pause(); err != nil {
		t.Fatal(err)
	}
	// Down until kwok has backed off: a stage failed five times in a row (its next try is 32 s away).
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return strings.Contains(kwok.Tail(50), `"retry":4`), nil
	}); err != nil {
		t.Fatalf("kwok did not back off while the API server was down: %v\n%s", err, kwok.Tail(20))
	}
	restarted := c.restarts.Load()
	if err := c.Env.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return c.restarts.Load() >= restarted+2, nil
	}); err != nil {
		t.Fatalf("kube-scheduler and kwok were not restarted once the API server answered again (%d restarts): %v\n%s",
			c.restarts.Load()-restarted, err, kwok.Tail(20))
	}
	podReady("after", time.Minute)

	// A pod the child's node lifecycle controller marked NotReady while its node did not report (an
	// outage longer than the node monitor grace period) is Ready again once the node reports.
	before := &corev1.Pod{}
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: "default", Name: "before"}, before); err != nil {
		t.Fatal(err)
	}
	for i := range before.Status.Conditions {
		if before.Status.Conditions[i].Type == corev1.PodReady {
			before.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	if err := c.Client().Status().Update(ctx, before); err != nil {
		t.Fatal(err)
	}
	// Without the stage kwok leaves it NotReady for good.
	waitReady(ctx, t, c, kwok, before, time.Minute)
}

// waitReady waits until pod is Ready, at most bound.
func waitReady(ctx context.Context, t *testing.T, c *ChildCluster, kwok *Process, pod *corev1.Pod, bound time.Duration) {
	t.Helper()
	var last string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, bound, true, func(ctx context.Context) (bool, error) {
		var got corev1.Pod
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
			last = err.Error()
			return false, nil
		}
		last = "phase " + string(got.Status.Phase) + ", node " + got.Spec.NodeName
		for _, cond := range got.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("pod %s not Ready within %s (%s): %v\nkwok log:\n%s", pod.Name, bound, last, err, kwok.Tail(20))
	}
}
