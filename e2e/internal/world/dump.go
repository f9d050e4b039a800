package world

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DumpChildren writes what a failed feature needs to know about each child cluster: every pod that
// is not Ready (with its phase, node and the reasons of its conditions), every ResourceQuota of a
// workspace namespace with its hard and used amounts, the workspace ReplicaSets with fewer ready
// pods than they ask for, and the last Warning events. A child that does
// not answer is named and skipped.
func (w *World) DumpChildren(out io.Writer, events int) {
	for _, name := range w.Children() {
		c := w.Child(name)
		if c == nil || c.Env == nil || c.Env.Client == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if n := c.restarts.Load(); n > 0 {
			_, _ = fmt.Fprintf(out, "\n===== child %s: kube-scheduler and kwok restarted %d time(s) after its API server did not answer =====\n", name, n)
		}
		err := dumpChild(ctx, out, name, c.Client(), events)
		cancel()
		if err != nil {
			_, _ = fmt.Fprintf(out, "\n===== child %s: %v =====\n", name, err)
		}
	}
}

func dumpChild(ctx context.Context, out io.Writer, name string, c client.Client, events int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\n===== child %s: pods not Ready, workspace quotas and ReplicaSets short of ready, last %d Warning events =====\n", name, events)
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		return err
	}
	for _, p := range pods.Items {
		ready := false
		var why []string
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
			if cond.Status != corev1.ConditionTrue {
				why = append(why, fmt.Sprintf("%s=%s %s %s", cond.Type, cond.Status, cond.Reason, cond.Message))
			}
		}
		if !ready {
			fmt.Fprintf(&b, "pod %s/%s phase=%s node=%q deleting=%t %s\n", p.Namespace, p.Name, p.Status.Phase,
				p.Spec.NodeName, p.DeletionTimestamp != nil, strings.Join(why, "; "))
		}
	}
	var quotas corev1.ResourceQuotaList
	if err := c.List(ctx, &quotas); err != nil {
		return err
	}
	for _, q := range quotas.Items {
		if strings.HasPrefix(q.Namespace, "ws-") || strings.HasPrefix(q.Namespace, "wst-") {
			fmt.Fprintf(&b, "quota %s/%s hard={%s} used={%s}\n", q.Namespace, q.Name, resources(q.Status.Hard), resources(q.Status.Used))
		}
	}
	var sets appsv1.ReplicaSetList
	if err := c.List(ctx, &sets); err != nil {
		return err
	}
	for _, rs := range sets.Items {
		if (strings.HasPrefix(rs.Namespace, "ws-") || strings.HasPrefix(rs.Namespace, "wst-")) && rs.Spec.Replicas != nil && *rs.Spec.Replicas != rs.Status.ReadyReplicas {
			var conds []string
			for _, cond := range rs.Status.Conditions {
				conds = append(conds, fmt.Sprintf("%s=%s %s %s", cond.Type, cond.Status, cond.Reason, cond.Message))
			}
			fmt.Fprintf(&b, "replicaset %s/%s spec=%d replicas=%d ready=%d observedGeneration=%d/%d %s\n", rs.Namespace, rs.Name,
				*rs.Spec.Replicas, rs.Status.Replicas, rs.Status.ReadyReplicas, rs.Status.ObservedGeneration, rs.Generation,
				strings.Join(conds, "; "))
		}
	}
	var evs corev1.EventList
	if err := c.List(ctx, &evs); err != nil {
		return err
	}
	warnings := evs.Items[:0]
	for _, e := range evs.Items {
		if e.Type == corev1.EventTypeWarning {
			warnings = append(warnings, e)
		}
	}
	sort.Slice(warnings, func(i, j int) bool { return lastSeen(warnings[i]).Before(lastSeen(warnings[j])) })
	if len(warnings) > events {
		warnings = warnings[len(warnings)-events:]
	}
	for _, e := range warnings {
		fmt.Fprintf(&b, "event %s %s %s %s/%s: %s (x%d)\n", lastSeen(e).UTC().Format(time.RFC3339), e.Reason,
			e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message, max(e.Count, 1))
	}
	_, err := io.WriteString(out, b.String())
	return err
}

func lastSeen(e corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// resources prints a resource list as sorted name=quantity pairs.
func resources(l corev1.ResourceList) string {
	out := make([]string, 0, len(l))
	for name, q := range l {
		out = append(out, fmt.Sprintf("%s=%s", name, q.String()))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
