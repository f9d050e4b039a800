package childcluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// withCredentials returns the child's kubeconfig with its user replaced.
func withCredentials(t *testing.T, kubeconfig []byte, auth *clientcmdapi.AuthInfo) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	cfg.AuthInfos[ctx.AuthInfo] = auth
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUnauthorizedReportedAtOnce: a child that refuses the credentials (401 for an unknown token,
// 403 for a user without rights) is reported as Unauthorized at the first refusal, not after the
// sync timeout (an hour here); a valid Secret written next is used at once, despite the backoff (an
// hour too).
func TestUnauthorizedReportedAtOnce(t *testing.T) {
	child := startChild(t, "auth")
	// The deadline is for the test, not for starting its API servers, which can take most of it on a
	// loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c := newCache(t, Options{SyncTimeout: time.Hour, BackoffBase: time.Hour})
	nobody, err := child.Env.AddUser(envtest.User{Name: "nobody"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	forbidden, err := nobody.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	for name, kc := range map[string][]byte{
		"unknown-token": withCredentials(t, child.Kubeconfig, &clientcmdapi.AuthInfo{Token: "not-a-valid-token"}),
		"no-rights":     forbidden,
	} {
		if err := mgmt.WriteKubeconfigSecret(ctx, "auth", name, kc); err != nil {
			t.Fatal(err)
		}
		_, err := c.Get(ctx, "auth", name)
		if UnreachableReason(err) != ReasonUnauthorized {
			t.Fatalf("%s: want Unauthorized at once, got %v", name, err)
		}
		// Rotated to a valid kubeconfig: used at once, the backoff does not apply to new data.
		if err := mgmt.WriteKubeconfigSecret(ctx, "auth", name, child.Kubeconfig); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, "auth", name); err != nil {
			t.Fatalf("%s: the rotated Secret is not used: %v", name, err)
		}
	}
}

// TestTryGetNeverWaits: TryGet returns at once while a child is connecting (here one that never
// answers, with an hour of sync timeout), and a subscriber hears when a connect ends.
func TestTryGetNeverWaits(t *testing.T) {
	child := startChild(t, "tryget")
	// The deadline is for the test, not for starting its API servers, which can take most of it on a
	// loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c := newCache(t, Options{SyncTimeout: time.Hour})
	keys, unsubscribe := c.subscribe()
	defer unsubscribe()
	hole, err := clientcmd.Write(kubeconfigFor(testenv.BlackHoleURL(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := mgmt.WriteKubeconfigSecret(ctx, "tryget", "hole", hole); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.WriteKubeconfigSecret(ctx, "tryget", "good", child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryGet(ctx, "tryget", "hole"); UnreachableReason(err) != ReasonConnecting {
		t.Fatalf("black hole: want Connecting, got %v", err)
	}
	if _, err := c.TryGet(ctx, "tryget", "hole"); UnreachableReason(err) != ReasonConnecting {
		t.Fatalf("black hole again: want Connecting, got %v", err)
	}
	_, _ = c.TryGet(ctx, "tryget", "good")
	good := types.NamespacedName{Namespace: "tryget", Name: "good"}
	expectKey(t, keys, good)
	if _, err := c.TryGet(ctx, "tryget", "good"); err != nil {
		t.Fatalf("after the connect notification: %v", err)
	}
}

// TestSecretDataReadOnlyWhenChanged: with a MetadataReader, Get reads the kubeconfig Secret's data
// only when its resourceVersion moved; a rotation is still followed.
func TestSecretDataReadOnlyWhenChanged(t *testing.T) {
	child := startChild(t, "metaonly")
	// The deadline is for the test, not for starting its API servers, which can take most of it on a
	// loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	meta, err := cache.New(mgmt.Config, cache.Options{Scheme: mgmt.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = meta.Start(runCtx) }()
	if err := mgmt.WriteKubeconfigSecret(ctx, "metaonly", "a", child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Options{MetadataReader: meta})
	first, err := c.Get(ctx, "metaonly", "a")
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if cl, err := c.Get(ctx, "metaonly", "a"); err != nil || cl != first {
			t.Fatalf("Get: %v", err)
		}
	}
	if n := c.SecretReads(); n != 1 {
		t.Fatalf("21 Gets of an unchanged Secret read its data %d times, want 1", n)
	}
	user, err := child.Env.AddUser(envtest.User{Name: "rotated", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := mgmt.WriteKubeconfigSecret(ctx, "metaonly", "a", kc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rotation is followed", func() (bool, string) {
		cl, err := c.Get(ctx, "metaonly", "a")
		return err == nil && cl != first, "same connection"
	})
}

// TestSilentChildrenHoldNoConnectSlot: children that do not answer (here three black holes, each
// waiting out a whole TLS handshake timeout, first and again on every retry) wait for their first
// answer outside the connect slots, so a new child (or a rotated credential) is listed at once
// instead of waiting behind them, with a single slot and while they retry.
func TestSilentChildrenHoldNoConnectSlot(t *testing.T) {
	child := startChild(t, "reachslots")
	// The deadline is for the test, not for starting its API servers, which can take most of it on a
	// loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	var mu sync.Mutex
	var attempts []string // "<name> ok" or "<name> failed", in the order the connects ended
	c := newCache(t, Options{MaxConcurrentConnects: 1, SyncTimeout: time.Hour,
		BackoffBase: time.Millisecond, BackoffMax: time.Millisecond,
		OnConnect: func(cd types.NamespacedName, _ time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, fmt.Sprintf("%s %s", cd.Name, map[bool]string{true: "ok", false: "failed"}[err == nil]))
		}})
	snapshot := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), attempts...)
	}
	holes := []string{"hole-a", "hole-b", "hole-c"}
	for _, name := range holes {
		data, err := clientcmd.Write(kubeconfigFor(testenv.BlackHoleURL(t)))
		if err != nil {
			t.Fatal(err)
		}
		if err := mgmt.WriteKubeconfigSecret(ctx, "reachslots", name, data); err != nil {
			t.Fatal(err)
		}
		if _, err := c.TryGet(ctx, "reachslots", name); UnreachableReason(err) != ReasonConnecting {
			t.Fatalf("%s: want Connecting, got %v", name, err)
		}
	}
	// A new child while all three wait for their first answer.
	eventually(t, "the black holes wait for their first answer", func() (bool, string) {
		return c.reaching.Load()+c.inFlight.Load() >= int32(len(holes)) && len(snapshot()) == 0, fmt.Sprint(c.reaching.Load(), c.inFlight.Load(), snapshot())
	})
	newChild := func(name string) {
		t.Helper()
		// A user of its own: a kubeconfig of the same content would share new-a's connection.
		user, err := child.Env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		kc, err := user.KubeConfig()
		if err != nil {
			t.Fatal(err)
		}
		if err := mgmt.WriteKubeconfigSecret(ctx, "reachslots", name, kc); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, "reachslots", name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	newChild("new-a")
	if got := snapshot(); len(got) != 1 || got[0] != "new-a ok" {
		t.Fatalf("the new child waited for a black hole's slot: connects ended %v, want the new child first", got)
	}
	// Again while they retry.
	eventually(t, "every black hole failed once", func() (bool, string) {
		n := 0
		for _, a := range snapshot() {
			if strings.HasSuffix(a, " failed") {
				n++
			}
		}
		return n >= len(holes), fmt.Sprint(snapshot())
	})
	for _, name := range holes {
		if _, err := c.TryGet(ctx, "reachslots", name); UnreachableReason(err) != ReasonConnecting {
			t.Fatalf("%s retry: want Connecting, got %v", name, err)
		}
	}
	eventually(t, "a black hole retries", func() (bool, string) {
		return c.reaching.Load()+c.inFlight.Load() >= 1, fmt.Sprint(snapshot())
	})
	before := len(snapshot())
	newChild("new-b")
	got := snapshot()
	for _, a := range got[before:] {
		if a == "new-b ok" {
			return
		}
		t.Fatalf("the new child waited for a retrying black hole's slot: connects ended %v after the first failures, want the new child first", got[before:])
	}
	t.Fatalf("new-b's connect is not recorded: %v", got)
}
