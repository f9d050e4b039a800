package colony

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A refused Colony is retried soon, then less and less often up to RetryRefused; a change of a
// template or credential it names (reset) starts the retries short again, because the refusing
// admission may read that change from a cache that does not show it yet.
func TestRefusalBackoff(t *testing.T) {
	var b refusalBackoff
	key := types.NamespacedName{Namespace: "ns", Name: "col"}
	var got []time.Duration
	for range 8 {
		got = append(got, b.next(key, 30*time.Second))
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays %v, want %v", got, want)
		}
	}
	b.reset(key)
	if d := b.next(key, 30*time.Second); d != refusedFirstRetry {
		t.Fatalf("after a reset the next retry is in %s, want %s", d, refusedFirstRetry)
	}
	if d := b.next(types.NamespacedName{Namespace: "ns", Name: "other"}, time.Second); d != time.Second {
		t.Fatalf("a ceiling below the first retry gives %s, want 1s", d)
	}
	if d := refusalDelay(1000, time.Hour); d != time.Hour {
		t.Fatalf("many refusals give %s, want the ceiling", d)
	}
}
