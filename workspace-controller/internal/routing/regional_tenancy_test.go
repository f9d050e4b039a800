package routing_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/routing"
)

// The KOF labels of a ClusterDeployment are tenant input (a Colony's clusterLabels). A regional
// cluster they name in another namespace is used only when that namespace allows the child's.

// regionalIn writes a kubeconfig Secret for a regional ClusterDeployment "regional" in ns that reaches
// the suite's regional cluster, and returns the labels a child uses to name it.
func regionalIn(t *testing.T, ns string) map[string]string {
	t.Helper()
	must(t, mgmt.WriteKubeconfigSecret(ctxT(t), ns, "regional", regional.Kubeconfig))
	return map[string]string{routing.RegionalClusterNameLabel: "regional", routing.RegionalClusterNamespaceLabel: ns}
}

// allowFrom sets (or, with "", removes) the allow-workspaces-from annotation of namespace ns.
func allowFrom(t *testing.T, ns, value string) {
	t.Helper()
	n := &corev1.Namespace{}
	must(t, k8s.Get(ctxT(t), types.NamespacedName{Name: ns}, n))
	if value == "" {
		delete(n.Annotations, workspacesv1.AllowWorkspacesFromAnnotation)
	} else {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[workspacesv1.AllowWorkspacesFromAnnotation] = value
	}
	must(t, k8s.Update(ctxT(t), n))
}

// routesOn lists what the routing made on the regional cluster for the workspace in ns/name: route
// namespaces and routes.
func routesOn(t *testing.T, ns, name string) []string {
	t.Helper()
	sel := client.MatchingLabels{workspacesv1.WorkspaceLabel: name, workspacesv1.WorkspaceNamespaceLabel: ns}
	var out []string
	var nss corev1.NamespaceList
	must(t, rc.List(ctxT(t), &nss, sel))
	for _, n := range nss.Items {
		if n.DeletionTimestamp.IsZero() {
			out = append(out, "namespace "+n.Name)
		}
	}
	var hr gwv1.HTTPRouteList
	must(t, rc.List(ctxT(t), &hr, sel))
	for _, r := range hr.Items {
		out = append(out, "HTTPRoute "+r.Namespace+"/"+r.Name)
	}
	var tr gwv1.TCPRouteList
	must(t, rc.List(ctxT(t), &tr, sel))
	for _, r := range tr.Items {
		out = append(out, "TCPRoute "+r.Namespace+"/"+r.Name)
	}
	sort.Strings(out)
	return out
}

// A child in tenant A labelled to use a regional cluster in tenant B gets no route there while B
// does not allow A, and the status says why, naming the namespace and the annotation; once B allows
// A, the routes follow without a restart.
func TestRegionalLabelsNeedTheGrant(t *testing.T) {
	nsA, nsB := newNamespace(t), newNamespace(t)
	labels := regionalIn(t, nsB)
	class := createClass(t, []workspacesv1.AccessEndpoint{httpEP("web", 80), sshEP("ssh")}, nsA)
	cd := createCluster(t, nsA, labels)
	key := runningWorkspace(t, nsA, name("foreign"), class, cd)
	waitWS(t, key, "refused regional cluster", func(ws *workspacesv1.WorkspaceDeployment) error {
		if err := infraNotReady(fmt.Sprintf("namespace %q does not allow workspaces from namespace %q", nsB, nsA))(ws); err != nil {
			return err
		}
		if msg := access(ws, "web").Message; !strings.Contains(msg, workspacesv1.AllowWorkspacesFromAnnotation) || !strings.Contains(msg, nsB+"/regional") {
			return fmt.Errorf("the message names neither the annotation nor the regional cluster: %q", msg)
		}
		return nil
	})
	if got := routesOn(t, nsA, key.Name); len(got) > 0 {
		t.Fatalf("routes on a regional cluster that does not allow %s: %v", nsA, got)
	}

	allowFrom(t, nsB, "someone-else, "+nsA)
	waitWS(t, key, "routes after the grant", routesReady(map[string]string{"web": "https://" + key.Name + "." + domain, "ssh": ""}))
	if got := routesOn(t, nsA, key.Name); len(got) == 0 {
		t.Fatalf("no routes on the regional cluster after the grant")
	}
	deleteWorkspace(t, key)
}

// recording passes every call to a real connection cache and counts the clients asked for.
type recording struct {
	routing.Regionals
	mu    sync.Mutex
	asked map[types.NamespacedName]int
}

func (r *recording) Client(ctx context.Context, key types.NamespacedName) (client.Client, error) {
	r.mu.Lock()
	r.asked[key]++
	r.mu.Unlock()
	return r.Regionals.Client(ctx, key)
}

func (r *recording) count(key types.NamespacedName) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked[key]
}

// Ensure, Remove and the sweep never reach a regional cluster whose namespace does not allow the
// child's: not to publish, and not to remove what was published while it was allowed.
func TestRegionalLabelsRemoveAndSweep(t *testing.T) {
	nsA, nsB := newNamespace(t), newNamespace(t)
	labels := regionalIn(t, nsB)
	regionalKey := types.NamespacedName{Namespace: nsB, Name: "regional"}
	cdName := createCluster(t, nsA, labels)
	cd := &k0rdentv1beta1.ClusterDeployment{}
	must(t, k8s.Get(ctxT(t), types.NamespacedName{Namespace: nsA, Name: cdName}, cd))

	cache, err := childcluster.New(childcluster.Options{Reader: k8s, Scheme: routing.Scheme()})
	must(t, err)
	t.Cleanup(cache.Stop)
	rec := &recording{Regionals: routing.CacheRegionals{Cache: cache}, asked: map[types.NamespacedName]int{}}
	g := &routing.Gateway{Regionals: rec, Options: routing.Options{GatewayNamespace: gwNamespace, GatewayName: gwName}}
	// The sweep lists the ClusterDeployments of nsA only, so that other tests' clusters stay out of it.
	sweeper := &routing.Sweeper{Clusters: client.NewNamespacedClient(k8s, nsA), Workspaces: k8s, Regionals: rec, Log: log.Log}

	// The workspace exists (so that the suite's own sweeper leaves its routes alone) but names no
	// class: the suite's controller never routes it, only this test's Gateway does.
	wsObj := &workspacesv1.WorkspaceDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: name("manual")},
		Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: name("absent-class"),
			ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: cdName}},
	}
	must(t, k8s.Create(ctxT(t), wsObj))
	t.Cleanup(func() { deleteWorkspace(t, client.ObjectKeyFromObject(wsObj)) })
	ws := routing.Workspace{Namespace: nsA, Name: wsObj.Name, UID: wsObj.UID, ClusterKey: client.ObjectKeyFromObject(cd), Cluster: cd,
		Release: wsObj.Name, ReleaseNamespace: "ws-" + wsObj.Name, Endpoints: []workspacesv1.AccessEndpoint{httpEP("web", 80)}}
	ctx := ctxT(t)

	// Not allowed: nothing is published, removed or swept there; the cluster is never even reached.
	res, err := g.Ensure(ctx, ws)
	must(t, err)
	if !strings.Contains(res.InfraNotReady, fmt.Sprintf("namespace %q does not allow", nsB)) {
		t.Fatalf("Ensure: InfraNotReady %q, want the refusal of %s", res.InfraNotReady, regionalKey)
	}
	if gone, err := g.Remove(ctx, ws); err != nil || !gone {
		t.Fatalf("Remove: %v %v, want done", gone, err)
	}
	_, err = sweeper.Sweep(ctx)
	must(t, err)
	if n := rec.count(regionalKey); n != 0 {
		t.Fatalf("regional cluster %s reached %d times while %s does not allow %s", regionalKey, n, nsB, nsA)
	}

	// Allowed: the routes are published, and the sweep visits the cluster.
	allowFrom(t, nsB, nsA)
	res, err = g.Ensure(ctx, ws)
	must(t, err)
	if res.InfraNotReady != "" {
		t.Fatalf("Ensure after the grant: %s", res.InfraNotReady)
	}
	published := routesOn(t, nsA, ws.Name)
	if len(published) == 0 {
		t.Fatal("Ensure after the grant published nothing")
	}
	_, err = sweeper.Sweep(ctx)
	must(t, err)
	if rec.count(regionalKey) == 0 {
		t.Fatalf("the sweep did not visit %s once %s allows %s", regionalKey, nsB, nsA)
	}

	// Revoked: Remove leaves what it published there alone, without reaching the cluster.
	allowFrom(t, nsB, "")
	before := rec.count(regionalKey)
	if gone, err := g.Remove(ctx, ws); err != nil || !gone {
		t.Fatalf("Remove after the revocation: %v %v, want done", gone, err)
	}
	_, err = sweeper.Sweep(ctx)
	must(t, err)
	if n := rec.count(regionalKey); n != before {
		t.Fatalf("regional cluster %s reached after %s revoked the grant", regionalKey, nsB)
	}
	if got := routesOn(t, nsA, ws.Name); strings.Join(got, ",") != strings.Join(published, ",") {
		t.Fatalf("objects on a regional cluster that no longer allows %s changed: %v, were %v", nsA, got, published)
	}

	// Granted again, Remove cleans up.
	allowFrom(t, nsB, nsA)
	eventually(t, "routes removed", func() error {
		gone, err := g.Remove(ctx, ws)
		if err != nil || !gone {
			return fmt.Errorf("Remove: %v %v", gone, err)
		}
		var nss corev1.NamespaceList
		if err := rc.List(ctx, &nss, client.MatchingLabels{workspacesv1.WorkspaceLabel: ws.Name, workspacesv1.WorkspaceNamespaceLabel: nsA}); err != nil {
			return err
		}
		for _, n := range nss.Items {
			if n.DeletionTimestamp.IsZero() {
				return fmt.Errorf("namespace %s not deleted", n.Name)
			}
		}
		return nil
	})
}

// A ClusterDeployment relabelled away from its regional cluster: the sweep that Moved asks for
// removes its workspaces' routes there, though no ClusterDeployment names that regional cluster any
// more (a periodic sweep would never visit it again); routes of a workspace whose new regional
// ClusterDeployment reaches the same cluster are left alone.
func TestSweepAfterTheRegionalLabelMoves(t *testing.T) {
	nsA := newNamespace(t)
	labels := regionalIn(t, nsA)
	cdName := createCluster(t, nsA, labels)
	cd := &k0rdentv1beta1.ClusterDeployment{}
	must(t, k8s.Get(ctxT(t), types.NamespacedName{Namespace: nsA, Name: cdName}, cd))
	// A second regional ClusterDeployment of the same cluster, under another name.
	must(t, mgmt.WriteKubeconfigSecret(ctxT(t), nsA, "regional-alias", regional.Kubeconfig))

	cache, err := childcluster.New(childcluster.Options{Reader: k8s, Scheme: routing.Scheme()})
	must(t, err)
	t.Cleanup(cache.Stop)
	regionals := routing.CacheRegionals{Cache: cache}
	g := &routing.Gateway{Regionals: regionals, Options: routing.Options{GatewayNamespace: gwNamespace, GatewayName: gwName}}
	sweeper := &routing.Sweeper{Clusters: client.NewNamespacedClient(k8s, nsA), Workspaces: k8s, Regionals: regionals, Log: log.Log}

	// The workspace exists but names no class: only this test's Gateway routes it.
	wsObj := &workspacesv1.WorkspaceDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: name("moved")},
		Spec: workspacesv1.WorkspaceDeploymentSpec{WorkspaceClassRef: name("absent-class"),
			ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: cdName}},
	}
	must(t, k8s.Create(ctxT(t), wsObj))
	t.Cleanup(func() { deleteWorkspace(t, client.ObjectKeyFromObject(wsObj)) })
	ws := routing.Workspace{Namespace: nsA, Name: wsObj.Name, UID: wsObj.UID, ClusterKey: client.ObjectKeyFromObject(cd), Cluster: cd,
		Release: wsObj.Name, ReleaseNamespace: "ws-" + wsObj.Name, Endpoints: []workspacesv1.AccessEndpoint{httpEP("web", 80)}}
	ctx := ctxT(t)
	res, err := g.Ensure(ctx, ws)
	must(t, err)
	if res.InfraNotReady != "" {
		t.Fatalf("Ensure: %s", res.InfraNotReady)
	}
	published := routesOn(t, nsA, ws.Name)
	if len(published) == 0 {
		t.Fatal("Ensure published nothing")
	}

	relabel := func(l map[string]string) (old *k0rdentv1beta1.ClusterDeployment) {
		t.Helper()
		old = cd.DeepCopy()
		patch := client.MergeFrom(cd.DeepCopy())
		cd.Labels = l
		must(t, k8s.Patch(ctx, cd, patch))
		eventually(t, "the relabelled ClusterDeployment read back", func() error {
			got := &k0rdentv1beta1.ClusterDeployment{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(cd), got); err != nil {
				return err
			}
			if got.Labels[routing.RegionalClusterNameLabel] != l[routing.RegionalClusterNameLabel] {
				return fmt.Errorf("labels %v", got.Labels)
			}
			return nil
		})
		return old
	}

	// Another name for the same cluster: the routes there are still the workspace's.
	old := relabel(map[string]string{routing.RegionalClusterNameLabel: "regional-alias", routing.RegionalClusterNamespaceLabel: nsA})
	sweeper.Moved(old, cd)
	_, err = sweeper.Sweep(ctx)
	must(t, err)
	if got := routesOn(t, nsA, ws.Name); strings.Join(got, ",") != strings.Join(published, ",") {
		t.Fatalf("routes on the same cluster under another regional ClusterDeployment changed: %v, were %v", got, published)
	}

	// No regional cluster any more: the routes on the former one go.
	old = relabel(nil)
	_, err = sweeper.Sweep(ctx)
	must(t, err)
	if got := routesOn(t, nsA, ws.Name); len(got) == 0 {
		t.Fatal("a sweep without Moved reached a regional cluster no ClusterDeployment names: the test shows nothing")
	}
	sweeper.Moved(old, cd)
	_, err = sweeper.Sweep(ctx)
	must(t, err)
	eventually(t, "routes on the former regional cluster removed", func() error {
		if got := routesOn(t, nsA, ws.Name); len(got) > 0 {
			return fmt.Errorf("still there: %v", got)
		}
		return nil
	})
}
