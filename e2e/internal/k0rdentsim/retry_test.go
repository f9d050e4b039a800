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
