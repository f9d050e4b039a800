package stack

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
)

// WriteHold holds the first matching write a user sends to the management API server, so that a test
// can kill the writer while that write is in flight: part-way through a sequence of writes, not after
// it. It is an admission webhook on a loopback port that answers nothing until Release.
type WriteHold struct {
	// Name, when set before the write happens, holds only writes of the object of that name.
	Name    string
	s       *Stack
	name    string
	srv     *http.Server
	user    string
	held    chan struct{}
	release chan bool
	once    sync.Once
	mu      sync.Mutex
	seen    *admissionv1.AdmissionRequest
}

// HoldWrite registers a hold on the first write by user (e.g. "system:serviceaccount:ns:sa") of the
// resource (group, version, resource with an optional "/status") under the operations given.
func (s *Stack) HoldWrite(ctx context.Context, user, group, version, resource string, ops ...admissionregistrationv1.OperationType) (*WriteHold, error) {
	caPEM, cert, err := k0rdentsim.SelfSignedServing()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &WriteHold{s: s, name: "e2e-hold-" + rand.String(6), user: user, held: make(chan struct{}), release: make(chan bool, 1)}
	url := fmt.Sprintf("https://%s/hold", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("/hold", h.serve)
	h.srv = &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.srv.ServeTLS(ln, "", "") }()
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(30)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: h.name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    h.name + ".e2e.exalsius.ai",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}}}},
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          &timeout,
		}},
	}
	if err := s.Client.Create(ctx, cfg); err != nil {
		_ = h.srv.Close()
		return nil, err
	}
	return h, nil
}

func (h *WriteHold) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	if review.Request.UserInfo.Username == h.user && (h.Name == "" || review.Request.Name == h.Name) {
		first := false
		h.once.Do(func() { first = true })
		if first {
			h.mu.Lock()
			h.seen = review.Request.DeepCopy()
			h.mu.Unlock()
			close(h.held)
			select {
			case allow := <-h.release:
				if !allow {
					resp.Allowed = false
					resp.Result = &metav1.Status{Code: http.StatusConflict, Message: "held by the e2e suite and dropped: the writer was killed"}
				}
			case <-r.Context().Done():
				return
			}
		}
	}
	review.Response, review.Request = resp, nil
	out, _ := json.Marshal(review)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// Held returns a channel closed once the first matching write arrived and is being held.
func (h *WriteHold) Held() <-chan struct{} { return h.held }

// Request returns the held write's admission request (nil before Held).
func (h *WriteHold) Request() *admissionv1.AdmissionRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen
}

// Release lets the held write through (allow) or refuses it, as a write that never reached etcd.
func (h *WriteHold) Release(allow bool) {
	select {
	case h.release <- allow:
	default:
	}
}

// Remove drops the webhook configuration and stops the server (releasing a held write as refused).
func (h *WriteHold) Remove(ctx context.Context) error {
	h.Release(false)
	err := h.s.Client.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: h.name}})
	_ = h.srv.Close()
	return err
}
