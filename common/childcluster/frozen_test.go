package childcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
)

// TestWriteToPeerThatStopsReadingFails: a connection whose peer accepts and never reads fails a write
// once the socket buffers are full and no byte moved for the timeout, instead of blocking for ever.
func TestWriteToPeerThatStopsReadingFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c // never read
		}
	}()
	var d net.Dialer
	conn, err := writeTimeoutDial(d.DialContext, 200*time.Millisecond)(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	defer func() {
		if c := <-accepted; c != nil {
			_ = c.Close()
		}
	}()
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 1<<20)
		for {
			if _, err := conn.Write(buf); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("write failed with %v, want a timeout", err)
		}
	case <-time.After(wait):
		t.Fatalf("a write to a peer that never reads still blocks after %s", wait)
	}
}

// freezingProxy forwards TCP connections to a child's API server until freeze, after which it reads
// nothing more from either side, like a frozen API server or a black-holed route. Its sockets have
// small receive buffers, so a client's writes soon block.
type freezingProxy struct {
	addr   string
	frozen chan struct{}
	done   chan struct{}
}

func startFreezingProxy(t *testing.T, target string) *freezingProxy {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{addr: l.Addr().String(), frozen: make(chan struct{}), done: make(chan struct{})}
	var conns []net.Conn
	var mu sync.Mutex
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			select {
			case <-p.frozen:
				<-p.done
				return
			default:
			}
			n, err := src.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			go pipe(out, in)
			go pipe(in, out)
		}
	}()
	t.Cleanup(func() {
		close(p.done)
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return p
}

func (p *freezingProxy) freeze() { close(p.frozen) }

// withServer returns the kubeconfig with its cluster's server replaced by https://addr.
func withServer(t *testing.T, kubeconfig []byte, addr string) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = "https://" + addr
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFrozenChildFreesRequestsAndStop: a child that stops reading while requests are being sent
// fills the connection's socket buffers. Every request still returns (HTTP/2 resets a cancelled
// stream with a write under the connection's write lock, which no context cancels), the child is
// reported unhealthy, and stopping the connection does not hang on it.
func TestFrozenChildFreesRequestsAndStop(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "frozen")
	u, err := url.Parse(child.Env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startFreezingProxy(t, u.Host)
	key := types.NamespacedName{Namespace: "frozen", Name: "cd"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, withServer(t, child.Kubeconfig, proxy.addr)); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Options{ProbeTimeout: 2 * time.Second, QPS: 1000, Burst: 1000})
	cl, err := c.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		t.Fatal(err)
	}
	// The first ConfigMap request maps the kind (discovery); a frozen child must not hold that either
	// (TestFrozenChildFreesDiscovery), but here the requests are to reach the connection.
	if err := cl.Client().Get(ctx, types.NamespacedName{Namespace: "default", Name: "none"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("reading a missing ConfigMap: %v", err)
	}
	proxy.freeze()
	// More bytes in flight than the client's socket buffers hold (up to 4 MiB): HTTP/2 flow control
	// lets each stream send its window (256 KiB at the API server) before waiting.
	const n = 32
	big := strings.Repeat("x", 256<<10)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			errs <- cl.Client().Create(rctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("big-%d", i)},
				Data:       map[string]string{"v": big},
			})
		}()
	}
	timeout := time.After(wait)
	for i := range n {
		select {
		case err := <-errs:
			if err == nil {
				t.Error("a request to the frozen child succeeded")
			}
		case <-timeout:
			t.Fatalf("%d of %d requests to the frozen child still blocked after %s", n-i, n, wait)
		}
	}
	eventually(t, "the frozen child reported unhealthy", func() (bool, string) {
		_, err := c.Get(ctx, key.Namespace, key.Name)
		return UnreachableReason(err) == ReasonUnhealthy, fmt.Sprint(err)
	})
	stopped := make(chan struct{})
	go func() { c.Forget(key); cl.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(wait):
		t.Fatalf("stopping the connection to the frozen child still blocked after %s", wait)
	}
}

// TestFrozenChildFreesDiscovery: the first request of a kind maps it with a discovery request that
// carries no caller's context, under a lock every request of an unmapped kind waits for. A child that
// stopped answering releases them all within the probe timeout each.
func TestFrozenChildFreesDiscovery(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "frozen-discovery")
	u, err := url.Parse(child.Env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startFreezingProxy(t, u.Host)
	key := types.NamespacedName{Namespace: "frozen", Name: "discovery"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, withServer(t, child.Kubeconfig, proxy.addr)); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Options{ProbeTimeout: 2 * time.Second})
	cl, err := c.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		t.Fatal(err)
	}
	proxy.freeze()
	const n = 4
	errs := make(chan error, n)
	for range n {
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			errs <- cl.Client().Get(rctx, types.NamespacedName{Name: "default"}, &corev1.ServiceAccount{})
		}()
	}
	timeout := time.After(wait)
	for i := range n {
		select {
		case err := <-errs:
			if err == nil {
				t.Fatal("a request to the frozen child succeeded")
			}
		case <-timeout:
			t.Fatalf("%d of %d requests of an unmapped kind still blocked after %s", n-i, n, wait)
		}
	}
}
