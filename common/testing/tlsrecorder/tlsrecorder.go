// Package tlsrecorder is an HTTPS server for tests of the trust boundary: it stands for a server a
// tenant controls, records every connection made to it and the credentials of every request, and
// answers 401. A test aims a tenant's kubeconfig at it and asserts that nothing reached it.
package tlsrecorder

import (
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Server records what reaches it.
type Server struct {
	srv   *httptest.Server
	mu    sync.Mutex
	conns int
	creds []string
}

// New starts a Server that stops when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		for k, v := range req.Header {
			if k == "Authorization" || strings.HasPrefix(k, "Impersonate-") {
				s.creds = append(s.creds, k+": "+strings.Join(v, ","))
			}
		}
		s.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the server's https:// URL.
func (s *Server) URL() string { return s.srv.URL }

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.srv.Listener.Addr().String() }

// CAPEM is the server's certificate in PEM, for a kubeconfig to trust.
func (s *Server) CAPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// Seen returns how many connections reached the server, TLS or not, and the Authorization and
// Impersonate-* headers of every request, in order.
func (s *Server) Seen() (conns int, creds []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns, append([]string(nil), s.creds...)
}

// Kubeconfig returns a kubeconfig whose one context aims at the server (trusting its certificate)
// with user as its credentials, as a tenant would write it into a kubeconfig Secret.
func (s *Server) Kubeconfig(t testing.TB, user *clientcmdapi.AuthInfo) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: s.URL(), CertificateAuthorityData: s.CAPEM()}
	kc.AuthInfos["u"] = user
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
