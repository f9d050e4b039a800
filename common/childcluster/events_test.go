package childcluster

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// childEvent is an events.k8s.io Event about a workload, as a workload controller writes it.
func childEvent(ns, name, reason, kind, workload, note string, at time.Time) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		EventTime:  metav1.NewMicroTime(at), Reason: reason, Type: corev1.EventTypeWarning, Action: "Create", Note: note,
		ReportingController: "replicaset-controller", ReportingInstance: "replicaset-controller-1",
		Regarding: corev1.ObjectReference{Kind: kind, Name: workload, Namespace: ns, APIVersion: "apps/v1"},
	}
}

// TestWatchesWorkloadEvents: with WatchWorkloadEvents, the cache keeps the child's FailedCreate and
// SuccessfulCreate Events (trimmed, the note cut) and no others, and tells a new one as a change of
// its namespace's Pods; without it, it keeps none and says so.
func TestWatchesWorkloadEvents(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "events")
	key := types.NamespacedName{Namespace: "events", Name: "alpha"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"ws-a", "ws-b"} {
		if err := child.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().Truncate(time.Microsecond)
	create := func(objs ...client.Object) {
		t.Helper()
		for _, o := range objs {
			if err := child.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Before the connect: listed, not told.
	create(childEvent("ws-a", "created", "SuccessfulCreate", "ReplicaSet", "nb", "Created pod: nb-0", now.Add(-time.Hour)))

	c := newCache(t, Options{WatchWorkloadEvents: true})
	changes, cancel := c.subscribe()
	defer cancel()
	cl, err := c.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	expectChange(t, changes, key, "anything changed (the connect)", func(c Change) bool { return c.All })
	eventually(t, "the SuccessfulCreate listed", func() (bool, string) {
		evs, ok := cl.WorkloadEvents("ws-a")
		return ok && len(evs) == 1 && evs[0].Reason == "SuccessfulCreate", fmt.Sprintf("%v %+v", ok, evs)
	})

	long := "Error creating: pods \"nb-1\" is forbidden: " + strings.Repeat("x", 900)
	create(
		childEvent("ws-a", "refused", "FailedCreate", "ReplicaSet", "nb", long, now),
		// Not a workload controller's reason: never watched.
		childEvent("ws-a", "scheduling", "FailedScheduling", "Pod", "nb-0", "0/1 nodes are available", now),
	)
	expectChange(t, changes, key, "the Pods of ws-a changed (its workload Events), and no other's", func(c Change) bool {
		return !c.All && !c.Nodes && c.PodsOf("ws-a") && !c.PodsOf("ws-b")
	})
	eventually(t, "the FailedCreate kept, cut, and nothing else of ws-a", func() (bool, string) {
		evs, ok := cl.WorkloadEvents("ws-a")
		var failed *eventsv1.Event
		for i := range evs {
			if evs[i].Reason == "FailedCreate" {
				failed = &evs[i]
			}
		}
		return ok && len(evs) == 2 && failed != nil && failed.Regarding.Kind == "ReplicaSet" && failed.Regarding.Name == "nb" &&
			len(failed.Note) <= MaxConditionMessageBytes && strings.HasPrefix(failed.Note, "Error creating: pods \"nb-1\" is forbidden") &&
			failed.EventTime.Time.Equal(now), fmt.Sprintf("%v %+v", ok, evs)
	})
	if evs, ok := cl.WorkloadEvents("ws-b"); !ok || len(evs) != 0 {
		t.Fatalf("ws-b: %v %+v, want none, and known", ok, evs)
	}

	// A cache that does not watch them says it does not know.
	key2 := types.NamespacedName{Namespace: "events", Name: "beta"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key2.Namespace, key2.Name, child.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	plain := newCache(t, Options{})
	cl2, err := plain.Get(ctx, key2.Namespace, key2.Name)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if evs, ok := cl2.WorkloadEvents("ws-a"); ok || evs != nil {
		t.Fatalf("without WatchWorkloadEvents: %v %+v, want not known", ok, evs)
	}
}

// TestWorkloadEventsForbidden: credentials that may read the child's Nodes and Pods but not its Events
// connect as before and leave the child reachable; the cache says it does not hold the Events, so
// that a reading falls back to the child.
func TestWorkloadEventsForbidden(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "noevents")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "nodes-and-pods"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nodes-and-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "no-events"}}}
	for _, o := range []client.Object{role, binding} {
		if err := child.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	user, err := child.Env.AddUser(envtest.User{Name: "no-events"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The child is reached through a proxy that counts the refused lists of Events (the API server's
	// own request metrics leave out what authorization refuses).
	proxy := newRefusalCounter(t, child, user.Config())
	kc := proxy.kubeconfig(t)
	key := types.NamespacedName{Namespace: "noevents", Name: "alpha"}
	if err := mgmt.WriteKubeconfigSecret(ctx, key.Namespace, key.Name, kc); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Options{WatchWorkloadEvents: true})
	cl, err := c.Get(ctx, key.Namespace, key.Name)
	if err != nil {
		t.Fatalf("Get with credentials that may not list Events: %v, want connected", err)
	}
	// Each events watch lists once and is refused: wait for both refusals on the child's API server.
	deadline := time.Now().Add(30 * time.Second)
	for proxy.forbiddenEventLists() < len(WorkloadEventReasons) {
		if time.Now().After(deadline) {
			t.Fatalf("the child refused %d lists of Events, want %d", proxy.forbiddenEventLists(), len(WorkloadEventReasons))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Over the next ten probes (each a contact) the watches never sync, the child stays reachable, and
	// the refused lists are not retried: the credentials stay what they are for this connection, and a
	// Reflector's retries would come within a second and keep coming.
	for probes, last := 0, cl.LastContact(); probes < 10; {
		if evs, ok := cl.WorkloadEvents("default"); ok {
			t.Fatalf("WorkloadEvents = %+v, known, with credentials that may not list them", evs)
		}
		if err := cl.Err(); err != nil {
			t.Fatalf("the child is unreachable for its Events: %v", err)
		}
		if now := cl.LastContact(); now.After(last) {
			probes, last = probes+1, now
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := proxy.forbiddenEventLists(); got != len(WorkloadEventReasons) {
		t.Fatalf("the child refused %d lists of Events over ten probes, want %d (one per watch, never retried)", got, len(WorkloadEventReasons))
	}
}

// refusalCounter is a TLS reverse proxy in front of a child API server that sends each request on
// with the given credentials and counts the lists of events.k8s.io Events the child refuses.
type refusalCounter struct {
	srv       *httptest.Server
	forbidden atomic.Int64
}

func newRefusalCounter(t *testing.T, child *testenv.Child, as *rest.Config) *refusalCounter {
	t.Helper()
	target, err := url.Parse(child.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(as)
	if err != nil {
		t.Fatal(err)
	}
	p := &refusalCounter{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1 // watches stream
	rp.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		if err == nil && resp.StatusCode == http.StatusForbidden && r.Method == http.MethodGet &&
			r.URL.Path == "/apis/events.k8s.io/v1/events" && r.URL.Query().Get("watch") != "true" {
			p.forbidden.Add(1)
		}
		return resp, err
	})
	p.srv = httptest.NewTLSServer(rp)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *refusalCounter) forbiddenEventLists() int { return int(p.forbidden.Load()) }

// kubeconfig reaches the child through the proxy, which adds the credentials.
func (p *refusalCounter) kubeconfig(t *testing.T) []byte {
	t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["child"] = &clientcmdapi.Cluster{Server: p.srv.URL, CertificateAuthorityData: ca}
	cfg.AuthInfos["proxied"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["child"] = &clientcmdapi.Context{Cluster: "child", AuthInfo: "proxied"}
	cfg.CurrentContext = "child"
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// BenchmarkCachedWorkloadEventSize reports the bytes the cache keeps per workload Event (allocated by
// the transform) for a FailedCreate with a long note; figures only.
func BenchmarkCachedWorkloadEventSize(b *testing.B) {
	in := childEvent("ws-notebook", "notebook-7d9f8c6b5.18a2b3c4d5e6f708", "FailedCreate", "ReplicaSet", "notebook-7d9f8c6b5",
		"Error creating: pods \"notebook-7d9f8c6b5-x2x9z\" is forbidden: "+strings.Repeat("violates PodSecurity \"restricted:latest\"; ", 20),
		time.Unix(1_700_000_000, 0))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := trimWorkloadEvent(in); err != nil {
			b.Fatal(err)
		}
	}
}
