package testenv

import (
	"net"
	"sync"
	"testing"
)

// BlackHole listens on a loopback port, accepts TCP connections and never answers, like a child
// cluster behind a dropped route. It returns the address (host:port) and a function that closes the
// listener and every connection it accepted.
func BlackHole() (addr string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return l.Addr().String(), func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	}, nil
}

// BlackHoleURL is BlackHole as an https URL for a kubeconfig, closed when the test ends.
func BlackHoleURL(t testing.TB) string {
	t.Helper()
	addr, stop, err := BlackHole()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return "https://" + addr
}
