package childcluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// TestSharedConnection: ClusterDeployments whose kubeconfigs have the same content (the same API
// server and identity) share one connection: one Cluster, one set of informers. A change on the child
// notifies each of them; Memo computes once per change; Forget of one leaves the connection to the
// others and the last Forget stops it. Another identity on the same server is another connection.
func TestSharedConnection(t *testing.T) {
	ctx := context.Background()
	child := startChild(t, "shared")
	x := types.NamespacedName{Namespace: "shared", Name: "x"}
	y := types.NamespacedName{Namespace: "shared", Name: "y"}
	z := types.NamespacedName{Namespace: "shared", Name: "z"}
	for _, k := range []types.NamespacedName{x, y} {
		if err := mgmt.WriteKubeconfigSecret(ctx, k.Namespace, k.Name, child.Kubeconfig); err != nil {
			t.Fatal(err)
		}
	}
	user, err := child.Env.AddUser(envtest.User{Name: "other-identity", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := mgmt.WriteKubeconfigSecret(ctx, z.Namespace, z.Name, other); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Options{})
	events, cancel := c.subscribe()
	defer cancel()
	get := func(k types.NamespacedName) *Cluster {
		t.Helper()
		cl, err := c.Get(ctx, k.Namespace, k.Name)
		if err != nil {
			t.Fatalf("Get %s: %v", k, err)
		}
		return cl
	}
	clX, clY, clZ := get(x), get(y), get(z)
	if clX != clY {
		t.Fatal("two ClusterDeployments with the same kubeconfig must share one connection")
	}
	if clZ == clX {
		t.Fatal("another identity must be another connection")
	}
	// One cluster, whatever the credentials: the three show the child's kube-system namespace UID,
	// and each knows the other two as its peers.
	var system corev1.Namespace
	if err := child.Client.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, &system); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*Cluster{clX, clZ} {
		if cl.Identity() == "" || cl.Identity() != system.UID {
			t.Errorf("identity %q, want the kube-system namespace's UID %q", cl.Identity(), system.UID)
		}
	}
	if p := c.Peers(z); len(p) != 2 || p[0] != x || p[1] != y {
		t.Errorf("peers of %s: %v, want [%s %s]", z, p, x, y)
	}
	if p := c.Peers(x); len(p) != 2 || p[0] != y || p[1] != z {
		t.Errorf("peers of %s: %v, want [%s %s]", x, p, y, z)
	}
	if p := c.Peers(types.NamespacedName{Namespace: "shared", Name: "unknown"}); p != nil {
		t.Errorf("peers of a ClusterDeployment never connected: %v", p)
	}

	var computed atomic.Int32
	count := func() any { computed.Add(1); return len(clX.Nodes()) }
	clX.Memo("nodes", count)
	clY.Memo("nodes", count)
	if n := computed.Load(); n != 1 {
		t.Fatalf("Memo computed %d times without a change, want 1", n)
	}

	// One change on the child: both ClusterDeployments are notified; Memo computes again, once.
	if err := childtest.CreateNode(ctx, child.Client, gpuNode("shared-1", 2)); err != nil {
		t.Fatal(err)
	}
	seen := map[types.NamespacedName]bool{}
	timeout := time.After(wait)
	for !seen[x] || !seen[y] {
		select {
		case k := <-events:
			seen[k.Cluster] = true
		case <-timeout:
			t.Fatalf("notified %v, want x and y", seen)
		}
	}
	eventually(t, "Memo follows the change", func() (bool, string) {
		v := clY.Memo("nodes", count).(int)
		return v == 1, fmt.Sprintf("%d nodes", v)
	})
	if n := computed.Load(); n != 2 {
		t.Fatalf("Memo computed %d times after one change, want 2", n)
	}

	c.Forget(x)
	if clY.nodes.IsStopped() {
		t.Fatal("forgetting x must leave y's shared connection running")
	}
	if get(y) != clY {
		t.Fatal("y must keep its connection")
	}
	c.Forget(y)
	if !clY.nodes.IsStopped() || !clY.pods.IsStopped() {
		t.Fatal("the last Forget must stop the shared connection")
	}
	if clZ.nodes.IsStopped() {
		t.Fatal("another identity's connection must not stop")
	}
}

// TestSharedFailureNamesEachCluster: a shared connect that fails names each ClusterDeployment in its
// own error, and both see the failure.
func TestSharedFailureNamesEachCluster(t *testing.T) {
	ctx := context.Background()
	data, err := clientcmd.Write(kubeconfigFor(testenv.BlackHoleURL(t)))
	if err != nil {
		t.Fatal(err)
	}
	keys := []types.NamespacedName{{Namespace: "sharedfail", Name: "p"}, {Namespace: "sharedfail", Name: "q"}}
	for _, k := range keys {
		if err := mgmt.WriteKubeconfigSecret(ctx, k.Namespace, k.Name, data); err != nil {
			t.Fatal(err)
		}
	}
	var connects atomic.Int32
	c := newCache(t, Options{SyncTimeout: 500 * time.Millisecond, BackoffBase: time.Hour, BackoffMax: time.Hour,
		OnConnect: func(types.NamespacedName, time.Duration, error) { connects.Add(1) }})
	for _, k := range keys {
		_, err := c.Get(ctx, k.Namespace, k.Name)
		var u *UnreachableError
		if !asUnreachable(err, &u) || u.Cluster != k || u.Reason != ReasonConnectFailed {
			t.Fatalf("Get %s: want ConnectFailed naming %s, got %v", k, k, err)
		}
	}
	if n := connects.Load(); n != 1 {
		t.Fatalf("%d connects for one kubeconfig, want 1", n)
	}
}

func asUnreachable(err error, u **UnreachableError) bool {
	v, ok := err.(*UnreachableError)
	*u = v
	return ok
}
