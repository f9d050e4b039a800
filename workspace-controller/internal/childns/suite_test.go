package childns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// The tests of this package that act on a cluster run against real API servers: childAPI stands in
// for the child cluster (namespaces, ResourceQuotas, events), mgmt for the management cluster, whose
// WorkspaceDeployments are read through a cache with the owned.IndexName index (workspaces), as the
// controller reads them.

const (
	waitTimeout  = 60 * time.Second
	pollInterval = 50 * time.Millisecond
)

var (
	childAPI   *testenv.Child
	mgmt       *testenv.Management
	workspaces client.Reader
	uniq       atomic.Int64
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

// runTests starts the management and the child API servers (concurrently) and the management cache,
// runs the tests and stops everything. A missing KUBEBUILDER_ASSETS fails loudly.
func runTests(m *testing.M) int {
	if !ctrllog.Log.Enabled() {
		ctrllog.SetLogger(logr.Discard())
	}
	type started struct {
		ch  *testenv.Child
		err error
	}
	childDone := make(chan started, 1)
	go func() {
		ch, err := testenv.StartChild("childns")
		childDone <- started{ch, err}
	}()
	mg, mgErr := testenv.StartManagement()
	c := <-childDone
	if c.ch != nil {
		defer func() { _ = c.ch.Stop() }()
	}
	if mg != nil {
		defer func() { _ = mg.Stop() }()
	}
	if err := errors.Join(mgErr, c.err); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	childAPI, mgmt = c.ch, mg

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before the servers stop (deferred calls run last first)
	reader, err := startWorkspaceCache(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "the management cache: %v\n", err)
		return 1
	}
	workspaces = reader
	for _, ns := range []string{"team-0", "team-a", "team-b"} {
		if err := mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			fmt.Fprintf(os.Stderr, "namespace %s: %v\n", ns, err)
			return 1
		}
	}
	return m.Run()
}

// startWorkspaceCache starts a cache of the management server's WorkspaceDeployments indexed by name
// (owned.IndexName), as the workspace reconciler's manager indexes them.
func startWorkspaceCache(ctx context.Context) (client.Reader, error) {
	c, err := cache.New(mgmt.Config, cache.Options{Scheme: mgmt.Scheme})
	if err != nil {
		return nil, err
	}
	if err := c.IndexField(ctx, &workspacesv1.WorkspaceDeployment{}, owned.IndexName, func(o client.Object) []string {
		return []string{o.GetName()}
	}); err != nil {
		return nil, err
	}
	if _, err := c.GetInformer(ctx, &workspacesv1.WorkspaceDeployment{}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, errors.New("the cache did not sync")
	}
	return c, nil
}

// unique returns base with a suffix no other call returns: each test has its own names on the shared
// servers.
func unique(base string) string { return fmt.Sprintf("%s-%d", base, uniq.Add(1)) }

// eventually polls f until it returns nil, failing the test with f's last error at the timeout.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(pollInterval)
	}
}

// onChild creates objs on the child API server.
func onChild(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := childAPI.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s on the child: %v", o, o.GetName(), err)
		}
	}
}

// terminating creates ns on the child and deletes it: with no namespace controller on the test
// server, it stays Terminating (its kubernetes finalizer is never removed). It returns ns as read.
func terminating(t *testing.T, ns *corev1.Namespace) *corev1.Namespace {
	t.Helper()
	ctx := context.Background()
	onChild(t, ns)
	if err := childAPI.Client.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Namespace{}
	eventually(t, "namespace "+ns.Name+" terminating", func() error {
		if err := childAPI.Client.Get(ctx, client.ObjectKeyFromObject(ns), got); err != nil {
			return err
		}
		if got.DeletionTimestamp.IsZero() {
			return errors.New("no deletionTimestamp")
		}
		return nil
	})
	return got
}

// onManagement creates the workspaces on the management server (with a class, which the CRD
// requires) and waits until the cache lists them by name. It returns them as created, with the
// server's creationTimestamp.
func onManagement(t *testing.T, wss ...*workspacesv1.WorkspaceDeployment) []*workspacesv1.WorkspaceDeployment {
	t.Helper()
	ctx := context.Background()
	out := make([]*workspacesv1.WorkspaceDeployment, 0, len(wss))
	for _, ws := range wss {
		ws = ws.DeepCopy()
		ws.UID, ws.CreationTimestamp = "", metav1.Time{}
		ws.Spec.WorkspaceClassRef = "c"
		if err := mgmt.Client.Create(ctx, ws); err != nil {
			t.Fatalf("creating workspace %s/%s: %v", ws.Namespace, ws.Name, err)
		}
		out = append(out, ws)
	}
	for _, ws := range out {
		eventually(t, "the cache lists "+ws.Namespace+"/"+ws.Name, func() error {
			var list workspacesv1.WorkspaceDeploymentList
			if err := workspaces.List(ctx, &list, client.MatchingFields{owned.IndexName: ws.Name}); err != nil {
				return err
			}
			for _, o := range list.Items {
				if o.UID == ws.UID {
					return nil
				}
			}
			return errors.New("not yet")
		})
	}
	return out
}

// installedInLocalNamespace records on the management server that ws was installed before release
// namespaces carried a qualifier (a ServiceSet name and no release namespace: owned.ReleaseNamespace
// gives ws-<name>), and waits for the cache to show it.
func installedInLocalNamespace(t *testing.T, ws *workspacesv1.WorkspaceDeployment) {
	t.Helper()
	ctx := context.Background()
	ws.Status.ServiceSetName = "cd-ws-" + ws.Namespace + "-" + ws.Name
	if err := mgmt.Client.Status().Update(ctx, ws); err != nil {
		t.Fatalf("recording workspace %s/%s as installed: %v", ws.Namespace, ws.Name, err)
	}
	eventually(t, "the cache shows "+ws.Namespace+"/"+ws.Name+" installed", func() error {
		got := &workspacesv1.WorkspaceDeployment{}
		if err := workspaces.Get(ctx, client.ObjectKeyFromObject(ws), got); err != nil {
			return err
		}
		if owned.ReleaseNamespace(got) != owned.LocalReleaseNamespace(ws.Name) {
			return errors.New("not yet")
		}
		return nil
	})
}
