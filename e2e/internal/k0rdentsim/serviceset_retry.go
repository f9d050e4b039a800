package k0rdentsim

import (
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

// failure is a failed Helm attempt: the fingerprint of its inputs, its error, how many attempts in a
// row failed and when the next one may run.
type failure struct {
	fingerprint, message string
	count                int
	next                 time.Time
}

// Retry backoff of a failed release: Sveltos requeues a failed ClusterSummary with a growing delay.
const (
	retryBase = 5 * time.Second
	retryMax  = 2 * time.Minute
)

// failureKey identifies a release of a ServiceSet: failure records belong to the ServiceSet (by
// UID), so a recreated ServiceSet starts with a clean slate, as a new Sveltos ClusterSummary does.
func failureKey(child string, ss *k0rdentv1beta1.ServiceSet, svc k0rdentv1beta1.ServiceWithValues) string {
	return string(ss.UID) + "/" + child + "/" + svc.Namespace + "/" + svc.Name
}

// retryAfter returns when the earliest waiting retry of a failed service is due (zero: none waits).
func (r *serviceSetReconciler) retryAfter(child string, ss *k0rdentv1beta1.ServiceSet, plans []plan) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var d time.Duration
	for _, p := range plans {
		if p.state != k0rdentv1beta1.ServiceStateFailed || p.fingerprint == "" {
			continue
		}
		if f, ok := r.failed[failureKey(child, ss, p.svc)]; ok && f.fingerprint == p.fingerprint && time.Now().Before(f.next) {
			d = minPositive(d, time.Until(f.next)+100*time.Millisecond)
		}
	}
	return d
}

// recordFailure counts a failed attempt and schedules the next one with backoff; an attempt with
// other inputs starts counting anew. It returns the backoff.
func (r *serviceSetReconciler) recordFailure(key, fingerprint, message string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.failed[key]
	if f.fingerprint != fingerprint {
		f = failure{fingerprint: fingerprint}
	}
	f.count++
	f.message = message
	backoff := min(retryBase<<min(f.count-1, 10), retryMax)
	f.next = time.Now().Add(backoff)
	r.failed[key] = f
	return backoff
}

// planFailure is the fingerprint of a failure before Helm could act (the release could not be read,
// the chart, the values or the helmOptions not loaded).
const planFailure = "plan"

// retryPlanFailures counts one more failed attempt for each service that failed before Helm could
// act and returns when the earliest is to be tried again (zero: none failed so). Sveltos requeues a
// failed ClusterSummary with backoff whatever failed, so a service whose child was unreachable is
// tried again once the child is back, without any change to the ServiceSet. A service that got past
// planning drops its count.
func (r *serviceSetReconciler) retryPlanFailures(child string, ss *k0rdentv1beta1.ServiceSet, plans []plan) time.Duration {
	var d time.Duration
	for _, p := range plans {
		key := failureKey(child, ss, p.svc)
		if p.state == k0rdentv1beta1.ServiceStateFailed && p.work == nil && p.fingerprint == "" {
			d = minPositive(d, r.recordFailure(key, planFailure, p.message))
			continue
		}
		r.mu.Lock()
		if r.failed[key].fingerprint == planFailure {
			delete(r.failed, key)
		}
		r.mu.Unlock()
	}
	return d
}

// forget drops the failure record of a release.
func (r *serviceSetReconciler) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failed, key)
}

// forgetServiceSet drops every record of a ServiceSet (on delete), as Sveltos forgets a deleted
// ClusterSummary.
func (r *serviceSetReconciler) forgetServiceSet(ss *k0rdentv1beta1.ServiceSet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.failed {
		if strings.HasPrefix(k, string(ss.UID)+"/") {
			delete(r.failed, k)
		}
	}
	delete(r.collected, client.ObjectKeyFromObject(ss))
}
