package workspace

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/bootstrap"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// use makes the collector read the manager's cache.
func (c *queueCollector) use(reader client.Reader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reader = reader
}

// setupPlacement adds what placement and quotas need to the workspace controller: the Colony and
// WorkspaceQuota watches that wake the waiters, and the WorkspaceQuota status controller.
func (r *Reconciler) setupPlacement(mgr manager.Manager, b *builder.TypedBuilder[reconcile.Request]) (*builder.TypedBuilder[reconcile.Request], error) {
	if err := (&QuotaReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the WorkspaceQuota controller: %w", err)
	}
	return b.
		Watches(&infrav1.Colony{}, handler.EnqueueRequestsFromMapFunc(r.forColony)).
		Watches(&workspacesv1.WorkspaceQuota{}, handler.EnqueueRequestsFromMapFunc(r.forQuota)), nil
}

// unplaced reports whether a workspace waits to be placed: it names a Colony or a cluster selector,
// has no placement and is not being deleted.
func unplaced(ws *workspacesv1.WorkspaceDeployment) bool {
	return placesItself(ws) && ws.Status.Placement == nil && ws.DeletionTimestamp.IsZero()
}

// namespaceWaiters lists the workspaces of a namespace that wait for placement or for the namespace's
// quota, but skip: a cluster's GPUs freed, a workspace released its admission, a ClusterDeployment
// changed.
// They are found through an index (IndexNamespaceWaiter): every admission wakes this, and listing a
// namespace of many workspaces each time made a burst of admissions quadratic.
func (r *Reconciler) namespaceWaiters(ctx context.Context, namespace string, skip client.ObjectKey) []reconcile.Request {
	return r.workspaces(ctx, owned.IndexNamespaceWaiter, namespace, func(w *workspacesv1.WorkspaceDeployment) bool {
		return client.ObjectKeyFromObject(w) != skip
	})
}

// forColony brings back the unplaced workspaces that name the Colony (its clusters changed).
func (r *Reconciler) forColony(ctx context.Context, o client.Object) []reconcile.Request {
	var list workspacesv1.WorkspaceDeploymentList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil { // read-only
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		w := &list.Items[i]
		if unplaced(w) && w.Spec.ColonyRef != nil && w.Spec.ColonyRef.Name == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
		}
	}
	return out
}

// forQuota brings back the namespace's waiting workspaces when a quota changes: a raised limit frees
// room, a changed maxPriority reorders the queues.
func (r *Reconciler) forQuota(ctx context.Context, o client.Object) []reconcile.Request {
	var list workspacesv1.WorkspaceDeploymentList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil { // read-only
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if w := &list.Items[i]; w.Status.Phase == workspacesv1.PhaseWaiting || unplaced(w) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
		}
	}
	return out
}

// queueCollector reports at scrape time, from the manager's cache, the Waiting workspaces and the
// age of the oldest per cluster and namespace, and each WorkspaceQuota's use and limits.
type queueCollector struct {
	mu     sync.Mutex
	reader client.Reader
	now    func() time.Time

	waiting, oldest, used, limit *prometheus.Desc
}

// queues is the process's one queue collector; the latest manager's cache is the one read.
var queues = newQueueCollector()

func newQueueCollector() *queueCollector {
	return &queueCollector{
		now: time.Now,
		waiting: prometheus.NewDesc(bootstrap.MetricName(Component, "queue_length"),
			"Waiting WorkspaceDeployments by cluster (namespace/name, empty while unplaced) and namespace.", []string{"cluster", "namespace"}, nil),
		oldest: prometheus.NewDesc(bootstrap.MetricName(Component, "queue_oldest_wait_seconds"),
			"Seconds the longest-waiting WorkspaceDeployment has waited, by cluster and namespace.", []string{"cluster", "namespace"}, nil),
		used: prometheus.NewDesc(bootstrap.MetricName(Component, "quota_used"),
			"What a WorkspaceQuota's namespace uses: resource is workspaces, or gpu/<vendor>[/<model>].", []string{"namespace", "quota", "resource"}, nil),
		limit: prometheus.NewDesc(bootstrap.MetricName(Component, "quota_limit"),
			"A WorkspaceQuota's limit: resource is workspaces, or gpu/<vendor>[/<model>].", []string{"namespace", "quota", "resource"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.oldest
	ch <- c.used
	ch <- c.limit
}

// Collect implements prometheus.Collector.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	reader := c.reader
	c.mu.Unlock()
	if reader == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list workspacesv1.WorkspaceDeploymentList
	// Read-only: the cached objects are not copied (a scrape would copy every workspace).
	if err := reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err == nil {
		type key struct{ cluster, namespace string }
		counts, oldest := map[key]int{}, map[key]float64{}
		now := c.now()
		for i := range list.Items {
			w := &list.Items[i]
			if w.Status.Phase != workspacesv1.PhaseWaiting {
				continue
			}
			k := key{clusterLabel(w), w.Namespace}
			counts[k]++
			if since, ok := waitingSince(&w.Status); ok {
				oldest[k] = max(oldest[k], now.Sub(since).Seconds())
			}
		}
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(n), k.cluster, k.namespace)
			ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest[k], k.cluster, k.namespace)
		}
	}
	var quotas workspacesv1.WorkspaceQuotaList
	if err := reader.List(ctx, &quotas, client.UnsafeDisableDeepCopy); err == nil {
		for i := range quotas.Items {
			q := &quotas.Items[i]
			if w := q.Spec.Workspaces; w != nil {
				ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(*w), q.Namespace, q.Name, "workspaces")
			}
			ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(q.Status.Workspaces), q.Namespace, q.Name, "workspaces")
			for j, e := range q.Spec.GPUs {
				res := "gpu/" + string(e.Vendor)
				if e.Model != "" {
					res += "/" + e.Model
				}
				var used int64
				if j < len(q.Status.GPUs) && q.Status.GPUs[j].Vendor == e.Vendor && q.Status.GPUs[j].Model == e.Model {
					used = q.Status.GPUs[j].Used
				}
				ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(e.Limit), q.Namespace, q.Name, res)
				ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(used), q.Namespace, q.Name, res)
			}
		}
	}
}

// clusterLabel is a workspace's cluster as a metrics label: namespace/name, empty while unplaced.
func clusterLabel(w *workspacesv1.WorkspaceDeployment) string {
	if k := owned.ClusterKey(w); k.Name != "" {
		return k.String()
	}
	return ""
}

// waitingSince is when a Waiting workspace started to wait: the latest transition to False of the
// condition that holds it (Feasible, WithinQuota or Placed).
func waitingSince(st *workspacesv1.WorkspaceDeploymentStatus) (time.Time, bool) {
	var since time.Time
	for _, t := range []string{workspacesv1.FeasibleCondition, workspacesv1.WithinQuotaCondition, workspacesv1.PlacedCondition} {
		c := meta.FindStatusCondition(st.Conditions, t)
		if c != nil && c.Status == "False" && c.LastTransitionTime.After(since) {
			since = c.LastTransitionTime.Time
		}
	}
	return since, !since.IsZero()
}

// observeWait records the wait time of a workspace that leaves Waiting.
func observeWait(before, after *workspacesv1.WorkspaceDeployment, now time.Time) {
	if before.Status.Phase != workspacesv1.PhaseWaiting || after.Status.Phase == workspacesv1.PhaseWaiting {
		return
	}
	if since, ok := waitingSince(&before.Status); ok {
		waitSeconds.WithLabelValues(clusterLabel(after), after.Namespace).Observe(now.Sub(since).Seconds())
	}
}
