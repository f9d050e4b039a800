package k0rdentsim

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
)

func newPlan(fp string) *plan {
	return &plan{fingerprint: fp, work: func() error { return nil }}
}

// A failed release waits for its backoff, is not retried after maxConsecutiveFailures, retries at
// once with other inputs, and is forgotten with its ServiceSet.
func TestRetryGate(t *testing.T) {
	r := &serviceSetReconciler{failed: map[string]failure{}, collected: map[types.NamespacedName]time.Time{}}
	ss := &k0rdentv1beta1.ServiceSet{}
	ss.UID, ss.Namespace, ss.Name = "uid-1", "ns", "ss"
	svc := k0rdentv1beta1.ServiceWithValues{Name: "rel", Namespace: "ns"}
	key := failureKey("child", ss, svc)

	p := newPlan("a")
	r.gate(key, p, providerConfig{})
	if p.work == nil {
		t.Fatal("a release that never failed is held back")
	}
	r.recordFailure(key, "a", "boom")
	p = newPlan("a")
	r.gate(key, p, providerConfig{})
	if p.work != nil || p.state != k0rdentv1beta1.ServiceStateFailed || p.message != "boom" {
		t.Fatalf("within the backoff: work %v state %q message %q, want held and Failed", p.work != nil, p.state, p.message)
	}
	if d := r.retryAfter("child", ss, []plan{{svc: svc, state: k0rdentv1beta1.ServiceStateFailed, fingerprint: "a"}}); d <= 0 || d > retryBase+time.Second {
		t.Errorf("retry after %s, want about %s", d, retryBase)
	}
	p = newPlan("b")
	r.gate(key, p, providerConfig{})
	if p.work == nil {
		t.Error("changed inputs are held back")
	}

	// Once the backoff has passed the same inputs are tried again.
	f := r.failed[key]
	f.next = time.Now().Add(-time.Second)
	r.failed[key] = f
	p = newPlan("a")
	r.gate(key, p, providerConfig{})
	if p.work == nil {
		t.Error("no retry after the backoff")
	}
	one := int64(1)
	p = newPlan("a")
	r.gate(key, p, providerConfig{MaxConsecutiveFailures: &one})
	if p.work != nil || !strings.Contains(p.message, "not retried after 1 consecutive failures") {
		t.Errorf("maxConsecutiveFailures 1: work %v message %q", p.work != nil, p.message)
	}

	r.recordFailure(key, "a", "boom again")
	if got := r.failed[key].count; got != 2 {
		t.Errorf("consecutive failures %d, want 2", got)
	}
	r.forgetServiceSet(ss)
	if _, ok := r.failed[key]; ok {
		t.Error("the failure record outlived its ServiceSet")
	}
}

// A service that failed before Helm could act (its child unreachable while the release was read) is
// tried again with backoff, though nothing about the ServiceSet changes; getting past planning drops
// the count, and a release held back by its own backoff is not counted twice.
func TestRetryPlanFailures(t *testing.T) {
	r := &serviceSetReconciler{failed: map[string]failure{}, collected: map[types.NamespacedName]time.Time{}}
	ss := &k0rdentv1beta1.ServiceSet{}
	ss.UID, ss.Namespace, ss.Name = "uid-1", "ns", "ss"
	svc := k0rdentv1beta1.ServiceWithValues{Name: "rel", Namespace: "ns"}
	key := failureKey("child", ss, svc)
	unreachable := plan{svc: svc, state: k0rdentv1beta1.ServiceStateFailed, message: "connection refused"}

	if d := r.retryPlanFailures("child", ss, []plan{unreachable}); d != retryBase {
		t.Fatalf("first failure retried after %s, want %s", d, retryBase)
	}
	if d := r.retryPlanFailures("child", ss, []plan{unreachable}); d != 2*retryBase {
		t.Errorf("second failure retried after %s, want %s", d, 2*retryBase)
	}
	for range 10 {
		r.retryPlanFailures("child", ss, []plan{unreachable})
	}
	if d := r.retryPlanFailures("child", ss, []plan{unreachable}); d != retryMax {
		t.Errorf("retry after %s after many failures, want the cap %s", d, retryMax)
	}
	if d := r.retryPlanFailures("child", ss, []plan{{svc: svc, state: k0rdentv1beta1.ServiceStateDeployed}}); d != 0 {
		t.Errorf("a deployed service schedules a retry after %s", d)
	}
	if _, ok := r.failed[key]; ok {
		t.Error("a service past planning kept its count of planning failures")
	}
	if d := r.retryPlanFailures("child", ss, []plan{unreachable}); d != retryBase {
		t.Errorf("a new failure after a success retried after %s, want %s", d, retryBase)
	}

	r.recordFailure(key, "inputs", "helm install failed")
	held := plan{svc: svc, state: k0rdentv1beta1.ServiceStateFailed, message: "helm install failed", fingerprint: "inputs"}
	if d := r.retryPlanFailures("child", ss, []plan{held}); d != 0 {
		t.Errorf("a release held back by its backoff counted as a planning failure (retry after %s)", d)
	}
	if f := r.failed[key]; f.fingerprint != "inputs" || f.count != 1 {
		t.Errorf("the release's own failure record changed: %+v", f)
	}
}
