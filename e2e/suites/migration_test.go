package suites

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/e2e/internal/k0rdentsim"
)

// upstreamPointer is one value of the upstream operator's `<colony>-kubeconfigs` Secret: a JSON
// ObjectReference to a cluster's `<cd>-kubeconfig` Secret, as upstream 0.11 wrote it.
func upstreamPointer(t *testing.T, ns, cd string) []byte {
	t.Helper()
	b, err := json.Marshal(corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: ns, Name: k0rdentv1beta1.KubeconfigSecretName(cd)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMigrationFromUpstream switches an installation of the upstream exalsius-operator 0.11 in place,
// as docs/MIGRATION.md describes. With the colony-controller and the workspace-controller stopped
// (the upstream operator uninstalled, this project's not started yet; the CRDs are the same
// groups and kinds, and handing them over is the chart test's part), it builds what upstream
// leaves behind:
//   - a Colony held by upstream's finalizer, with its ClusterDeployment `<colony>-<cluster>`
//     controlled by the Colony, and a second such Colony deleted while no controller ran (only
//     upstream's finalizer holds it);
//   - upstream's `<colony>-kubeconfigs` pointer Secret (no owner, one pointer per cluster, one of
//     them stale);
//   - a workspace with upstream's finalizer and its ServiceSet `wsd-<cd>-<name>` (owned by the
//     workspace, release `wsd-<cd>-<name>` in `ws-<name>`), installed by the simulator.
//
// Then this project's controllers start, and:
//   - the Colony deleted before the switch is torn down and goes;
//   - the other Colony carries only this project's finalizer and keeps its ClusterDeployment (same
//     UID);
//   - the pointer Secret is taken over and kept in step (stale pointer dropped, a cluster added
//     after the switch gets its pointer);
//   - the workspace runs on the same ServiceSet (same UID, no second one) and the same Helm
//     release, upgraded in place (same first deployment, a newer revision), in the same `ws-<name>`;
//   - deleting the workspace and then the Colony completes, and leaves no ServiceSet, release,
//     `ws-<name>`, ClusterDeployment or Secret of theirs behind.
func TestMigrationFromUpstream(t *testing.T) {
	localOnly(t, "stops and starts the controllers of the local world")
	const (
		colony = "up"
		cdName = colony + "-c"
		// goneColony is an upstream Colony deleted before the switch.
		goneColony = "gone"
		wsName     = "nb"
	)
	legacySS := "wsd-" + cdName + "-" + wsName // upstream's ServiceSet and release name
	outer := t
	var (
		ns, class string
		child     *childCluster
		cdUID     types.UID
		ssUID     types.UID
		nsUID     types.UID
		firstRev  int
		firstAt   time.Time
	)
	f := features.New("switching from the upstream operator in place").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns = newNamespace(ctx, t, "migrate")
			serviceTemplate(ctx, t, notebookTemplate, "jupyter-notebook", "0.3.0", "kcm-system", ns)
			class = "e2e-migrate-" + ns
			createClass(ctx, t, notebookClass(class, notebookTemplate, 0, ""))
			return ctx
		}).
		Assess("the state the upstream operator leaves behind", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// The upstream operator is gone and this project's controllers do not run yet.
			for _, name := range []string{"colony-controller", "workspace-controller"} {
				c := component(t, name)
				if err := c.Kill(); err != nil {
					t.Fatal(err)
				}
				outer.Cleanup(func() { // a failure before the switch must not leave them stopped
					if c.IsHeld() {
						_ = c.Start(context.Background())
					}
				})
			}
			cdUID = upstreamColony(ctx, t, ns, colony, "c")
			upstreamColony(ctx, t, ns, goneColony, "c")
			child = waitChild(ctx, t, ns, cdName)
			waitChild(ctx, t, ns, goneColony+"-c")
			// Deleted while no controller ran: only upstream's finalizer holds it.
			if err := mgmt().Delete(ctx, &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: goneColony}}); err != nil {
				t.Fatal(err)
			}
			// Upstream's pointer Secret: no owner, no labels; `up-old` is a cluster that went.
			mustCreate(ctx, t, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: colony + "-kubeconfigs"},
				Data:       map[string][]byte{cdName: upstreamPointer(t, ns, cdName), colony + "-old": upstreamPointer(t, ns, colony+"-old")},
			})

			// Upstream's workspace: its finalizer, and its ServiceSet owned by it.
			ws := workspace(ns, wsName, class, cdName, nil)
			ws.Finalizers = []string{workspacesv1.LegacyFinalizer}
			mustCreate(ctx, t, ws)
			ss := serviceSet(ns, cdName, legacySS, k0rdentv1beta1.ServiceWithValues{
				Name: legacySS, Namespace: "ws-" + wsName, Template: notebookTemplate,
				Values:      "_exalsius:\n  resources:\n    replicas: 1\n",
				HelmOptions: jsonOf(t, map[string]any{"wait": true, "timeout": "3m0s"}),
			})
			ss.OwnerReferences = []metav1.OwnerReference{{APIVersion: workspacesv1.GroupVersion.String(), Kind: "WorkspaceDeployment", Name: ws.Name, UID: ws.UID}}
			mustCreate(ctx, t, ss)
			ssUID = ss.UID
			waitServiceState(ctx, t, ns, legacySS, legacySS, k0rdentv1beta1.ServiceStateDeployed)
			rel, err := k0rdentsim.Release(child.KubeconfigPath, "ws-"+wsName, legacySS)
			if err != nil || rel == nil {
				t.Fatalf("upstream release ws-%s/%s: %v %v", wsName, legacySS, rel, err)
			}
			firstRev, firstAt = rel.Version, rel.Info.FirstDeployed.Time
			var n corev1.Namespace
			if err := child.Client().Get(ctx, types.NamespacedName{Name: "ws-" + wsName}, &n); err != nil {
				t.Fatal(err)
			}
			nsUID = n.UID
			return ctx
		}).
		Assess("the switch: this project's controllers take over", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, name := range []string{"colony-controller", "workspace-controller"} {
				if err := component(t, name).Start(ctx); err != nil {
					t.Fatal(err)
				}
			}
			return ctx
		}).
		Assess("the Colony deleted before the switch is torn down and goes", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			eventually(ctx, t, "Colony "+goneColony+" and its ClusterDeployment gone", clusterTimeout, func(ctx context.Context) (bool, string) {
				var c infrav1.Colony
				err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: goneColony}, &c)
				if !apierrors.IsNotFound(err) {
					return false, fmt.Sprintf("Colony: finalizers %v, err %v", c.Finalizers, err)
				}
				err = mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: goneColony + "-c"}, &k0rdentv1beta1.ClusterDeployment{})
				return apierrors.IsNotFound(err), fmt.Sprintf("ClusterDeployment: %v", err)
			})
			if world.World.Child(k0rdentsim.ChildName(ns, goneColony+"-c")) != nil {
				t.Errorf("child %s-c still runs", goneColony)
			}
			return ctx
		}).
		Assess("the Colony is this project's and keeps its cluster", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			waitColony(ctx, t, ns, colony, 1, 1)
			eventually(ctx, t, "only this project's Colony finalizer", clusterTimeout, func(ctx context.Context) (bool, string) {
				var c infrav1.Colony
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: colony}, &c); err != nil {
					return false, err.Error()
				}
				return slices.Equal(c.Finalizers, []string{infrav1.ColonyFinalizer}), fmt.Sprint(c.Finalizers)
			})
			var cd k0rdentv1beta1.ClusterDeployment
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: cdName}, &cd); err != nil {
				t.Fatal(err)
			}
			if cd.UID != cdUID {
				t.Errorf("ClusterDeployment %s was made again (uid %s, want %s)", cdName, cd.UID, cdUID)
			}
			return ctx
		}).
		Assess("the pointer Secret is taken over and kept in step", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			waitPointers(ctx, t, ns, colony, cdName)
			// A cluster added after the switch gets its pointer.
			var c infrav1.Colony
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: colony}, &c); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(c.DeepCopy())
			c.Spec.ColonyClusters = append(c.Spec.ColonyClusters, cpuColonyEntry(t, "d"))
			if err := mgmt().Patch(ctx, &c, patch); err != nil {
				t.Fatal(err)
			}
			waitColony(ctx, t, ns, colony, 2, 2)
			waitPointers(ctx, t, ns, colony, cdName, colony+"-d")
			return ctx
		}).
		Assess("the workspace keeps running on its ServiceSet and release, upgraded in place", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ws := waitRunning(ctx, t, ns, wsName)
			if ws.Status.ServiceSetName != legacySS || ws.Status.ReleaseName != legacySS {
				t.Errorf("status names ServiceSet %q release %q, want the upstream %q", ws.Status.ServiceSetName, ws.Status.ReleaseName, legacySS)
			}
			eventually(ctx, t, "only this project's workspace finalizer", workspaceTimeout, func(ctx context.Context) (bool, string) {
				var cur workspacesv1.WorkspaceDeployment
				if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: wsName}, &cur); err != nil {
					return false, err.Error()
				}
				return slices.Equal(cur.Finalizers, []string{workspacesv1.WorkspaceFinalizer}), fmt.Sprint(cur.Finalizers)
			})
			var sets k0rdentv1beta1.ServiceSetList
			if err := mgmt().List(ctx, &sets, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			for _, s := range sets.Items {
				for _, svc := range s.Spec.Services {
					if svc.Namespace == "ws-"+wsName && s.Name != legacySS {
						t.Errorf("a second ServiceSet %s installs into ws-%s", s.Name, wsName)
					}
				}
			}
			var ss k0rdentv1beta1.ServiceSet
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: legacySS}, &ss); err != nil {
				t.Fatal(err)
			}
			if ss.UID != ssUID {
				t.Errorf("ServiceSet %s was made again (uid %s, want %s)", legacySS, ss.UID, ssUID)
			}
			if ss.Labels[workspacesv1.WorkspaceLabel] != wsName || ss.Spec.Services[0].Name != legacySS {
				t.Errorf("adopted ServiceSet labels %v, release %q", ss.Labels, ss.Spec.Services[0].Name)
			}
			// The release is upgraded, never uninstalled and installed again: its history goes on.
			eventually(ctx, t, "release "+legacySS+" upgraded in place", workspaceTimeout, func(ctx context.Context) (bool, string) {
				rel, err := k0rdentsim.Release(child.KubeconfigPath, "ws-"+wsName, legacySS)
				if err != nil || rel == nil {
					return false, fmt.Sprintf("release: %v %v", rel, err)
				}
				return rel.Version > firstRev, fmt.Sprintf("revision %d (upstream's %d)", rel.Version, firstRev)
			})
			rel, err := k0rdentsim.Release(child.KubeconfigPath, "ws-"+wsName, legacySS)
			if err != nil || rel == nil {
				t.Fatalf("release: %v %v", rel, err)
			}
			if !rel.Info.FirstDeployed.Time.Equal(firstAt) {
				t.Errorf("release %s first deployed %s, want upstream's %s: it was installed again", legacySS, rel.Info.FirstDeployed.Time, firstAt)
			}
			if other, err := k0rdentsim.Release(child.KubeconfigPath, "ws-"+wsName, wsName); err != nil || other != nil {
				t.Errorf("a second release %s in ws-%s (err %v)", wsName, wsName, err)
			}
			var n corev1.Namespace
			if err := child.Client().Get(ctx, types.NamespacedName{Name: "ws-" + wsName}, &n); err != nil || n.UID != nsUID {
				t.Errorf("ws-%s made again or gone (uid %s, want %s; err %v)", wsName, n.UID, nsUID, err)
			}
			runningPods(ctx, t, child, wsName, 1)
			return ctx
		}).
		Assess("deleting the workspace completes and leaves nothing", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			deleteAndWait(ctx, t, &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wsName}}, workspaceTimeout)
			if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: legacySS}, &k0rdentv1beta1.ServiceSet{}); !apierrors.IsNotFound(err) {
				t.Errorf("ServiceSet %s outlived its workspace: %v", legacySS, err)
			}
			if n, err := workspaceServiceSets(ctx, ns, wsName); err != nil || n != 0 {
				t.Errorf("%d ServiceSets of the workspace left (err %v)", n, err)
			}
			if rel, err := k0rdentsim.Release(child.KubeconfigPath, "ws-"+wsName, legacySS); err != nil || rel != nil {
				t.Errorf("release %s left on the child: %v %v", legacySS, rel, err)
			}
			eventually(ctx, t, "ws-"+wsName+" gone from the child", workspaceTimeout, func(ctx context.Context) (bool, string) {
				err := child.Client().Get(ctx, types.NamespacedName{Name: "ws-" + wsName}, &corev1.Namespace{})
				return apierrors.IsNotFound(err), fmt.Sprint(err)
			})
			return ctx
		}).
		Assess("deleting the Colony completes and leaves nothing", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			deleteAndWait(ctx, t, &infrav1.Colony{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: colony}}, clusterTimeout)
			var cds k0rdentv1beta1.ClusterDeploymentList
			if err := mgmt().List(ctx, &cds, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			if len(cds.Items) != 0 {
				t.Errorf("%d ClusterDeployment(s) left", len(cds.Items))
			}
			var sets k0rdentv1beta1.ServiceSetList
			if err := mgmt().List(ctx, &sets, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			if len(sets.Items) != 0 {
				t.Errorf("%d ServiceSet(s) left", len(sets.Items))
			}
			// The pointer Secret goes with the Colony now that the Colony controls it (garbage
			// collection), and so do the clusters' kubeconfig Secrets with their clusters.
			eventually(ctx, t, "no Secret of the Colony left", clusterTimeout, func(ctx context.Context) (bool, string) {
				var left []string
				for _, name := range []string{colony + "-kubeconfigs", colony + "-kubeconfig",
					k0rdentv1beta1.KubeconfigSecretName(cdName), k0rdentv1beta1.KubeconfigSecretName(colony + "-d")} {
					err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.Secret{})
					if !apierrors.IsNotFound(err) {
						left = append(left, fmt.Sprintf("%s (%v)", name, err))
					}
				}
				return len(left) == 0, fmt.Sprint(left)
			})
			for _, cd := range []string{cdName, colony + "-d"} {
				if world.World.Child(k0rdentsim.ChildName(ns, cd)) != nil {
					t.Errorf("child %s still runs", cd)
				}
			}
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// upstreamColony creates a Colony as the upstream operator left it: its finalizer, and the
// ClusterDeployment `<colony>-<clusterName>` of the entry, controlled by the Colony. It returns the
// ClusterDeployment's UID.
func upstreamColony(ctx context.Context, t *testing.T, ns, name, cluster string) types.UID {
	t.Helper()
	entry := cpuColonyEntry(t, cluster)
	col := &infrav1.Colony{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{infrav1.LegacyColonyFinalizer}},
		Spec:       infrav1.ColonySpec{ColonyClusters: []infrav1.ColonyCluster{entry}},
	}
	mustCreate(ctx, t, col)
	var spec k0rdentv1beta1.ClusterDeploymentSpec
	if err := json.Unmarshal(entry.ClusterDeploymentSpec.Raw, &spec); err != nil {
		t.Fatal(err)
	}
	yes := true
	cd := &k0rdentv1beta1.ClusterDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + cluster, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: infrav1.GroupVersion.String(), Kind: "Colony", Name: col.Name, UID: col.UID, Controller: &yes, BlockOwnerDeletion: &yes,
		}}},
		Spec: spec,
	}
	mustCreate(ctx, t, cd)
	return cd.UID
}

// waitPointers waits until a Colony controls its `<colony>-kubeconfigs` Secret and the Secret holds
// upstream's pointer for exactly the clusters given.
func waitPointers(ctx context.Context, t *testing.T, ns, colony string, cds ...string) {
	t.Helper()
	eventually(ctx, t, fmt.Sprintf("pointer Secret of %s names %v", colony, cds), clusterTimeout, func(ctx context.Context) (bool, string) {
		var s corev1.Secret
		if err := mgmt().Get(ctx, types.NamespacedName{Namespace: ns, Name: colony + "-kubeconfigs"}, &s); err != nil {
			return false, err.Error()
		}
		if ref := metav1.GetControllerOf(&s); ref == nil || ref.Kind != "Colony" || ref.Name != colony {
			return false, fmt.Sprintf("controller %v", ref)
		}
		if len(s.Data) != len(cds) {
			return false, fmt.Sprintf("%d pointers, want %v", len(s.Data), cds)
		}
		for _, cd := range cds {
			if want := string(upstreamPointer(t, ns, cd)); string(s.Data[cd]) != want {
				return false, fmt.Sprintf("%s: %q, want %q", cd, s.Data[cd], want)
			}
		}
		return true, ""
	})
}
