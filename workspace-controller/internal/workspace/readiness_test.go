package workspace

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/childcluster"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// releasePod creates a pod of the workspace's release in ws-<name> on the child, bound to node, asking
// gpus (none when 0: a test whose GPU accounting must not change), Ready unless notReady (the envtest
// child has no kubelet: the test plays it). A GPU workspace is Running only once one runs.
func releasePod(t *testing.T, ws *workspacesv1.WorkspaceDeployment, node string, gpus int64, notReady bool) string {
	t.Helper()
	podName := name("pod")
	var requests corev1.ResourceList
	if gpus > 0 {
		requests = childtest.Requests(gpu.ResourceNVIDIA, gpus)
	}
	must(t, childtest.CreatePod(ctxT(t), child.Client, childtest.Pod{Namespace: owned.LocalReleaseNamespace(ws.Name), Name: podName, Node: node,
		Requests: requests, NotReady: notReady}))
	return podName
}

// setDeployedHash plays KCM v1.12: the release Deployed with lastDeployedHash hash, the state's time now.
func setDeployedHash(t *testing.T, key types.NamespacedName, hash string) {
	t.Helper()
	eventually(t, "writing ServiceSet status", func() error {
		ss := &k0rdentv1beta1.ServiceSet{}
		if err := k8s.Get(ctxT(t), key, ss); err != nil {
			return err
		}
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		svc := ss.Spec.Services[0]
		ss.Status.Services = []k0rdentv1beta1.ServiceState{{Type: k0rdentv1beta1.ServiceTypeHelm, Name: svc.Name, Namespace: svc.Namespace,
			Template: svc.Template, State: k0rdentv1beta1.ServiceStateDeployed, LastStateTransitionTime: &now, LastDeployedHash: hash}}
		ss.Status.Deployed = true
		return k8s.Status().Update(ctxT(t), ss)
	})
}

// TestRunningWaitsForReleasePods: k0rdent's Deployed is not Running until the release's pods on the
// child are Ready; the workspace stays Deploying and names the pods not Ready yet.
func TestRunningWaitsForReleasePods(t *testing.T) {
	ns := newNamespace(t)
	model := name("a100")
	node := gpuNode(t, child.Client, gpu.ResourceNVIDIA, 2, modelLabels(model))
	class := createClass(t, classSpec(name("jupyter")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, workspacesv1.ReasonHelmReleaseDeploying)
	ssKey := client.ObjectKeyFromObject(waitServiceSet(t, ws))

	// Deployed, but no pod of a GPU release yet: k0rdent's helm may report a release before its pods exist.
	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateDeployed, "")
	eventually(t, "Deploying, no pod yet", func() error {
		return contains(getWS(t, key).Status.Message, "no pod of the release exists")
	})
	pod := releasePod(t, ws, node, 1, true)
	eventually(t, "Deploying, naming the pod not Ready", func() error {
		got := getWS(t, key)
		if got.Status.Phase != workspacesv1.PhaseDeploying {
			return contains(string(got.Status.Phase), string(workspacesv1.PhaseDeploying))
		}
		return contains(got.Status.Message, pod)
	})
	if got := getWS(t, key); got.Status.Phase != workspacesv1.PhaseDeploying {
		t.Fatalf("phase %s with a pod not Ready, want Deploying", got.Status.Phase)
	}
	must(t, childtest.SetPodReady(ctxT(t), child.Client, owned.LocalReleaseNamespace(ws.Name), pod, true))
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)

}

// TestPodReadyWakesDeploying: with no recheck timer within reach (DeployingRecheck 10m), a release's pod
// turning Ready on the child is what brings the Deploying workspace back: it is Running at once.
func TestPodReadyWakesDeploying(t *testing.T) {
	withOptions(t, func(o *Options) { o.DeployingRecheck = 10 * time.Minute })
	ns := newNamespace(t)
	model := name("a100")
	node := gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	class := createClass(t, classSpec(name("jupyter")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, workspacesv1.ReasonHelmReleaseDeploying)
	setServiceState(t, client.ObjectKeyFromObject(waitServiceSet(t, ws)), k0rdentv1beta1.ServiceStateDeployed, "")
	pod := releasePod(t, ws, node, 1, true)
	eventually(t, "Deploying, naming the pod not Ready", func() error {
		got := getWS(t, key)
		if got.Status.Phase != workspacesv1.PhaseDeploying {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		return contains(got.Status.Message, pod)
	})
	must(t, childtest.SetPodReady(ctxT(t), child.Client, owned.LocalReleaseNamespace(ws.Name), pod, true))
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
}

// TestStaleDeployedHashNotTaken: with KCM v1.12's lastDeployedHash, a Deployed that still carries the
// hash of before a values change is the previous configuration's, even when its state is newer than
// the change; a Deployed with a new hash is the change's.
func TestStaleDeployedHashNotTaken(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("jupyter")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, workspacesv1.ReasonHelmReleaseDeploying)
	ssKey := client.ObjectKeyFromObject(waitServiceSet(t, ws))
	setDeployedHash(t, ssKey, "hash-1")
	// KCM's CRDs before v1.12 have no lastDeployedHash: the API server drops it, and the rule under
	// test never applies (the suites also run against those CRDs, K0RDENT_CRDS).
	stored := &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), ssKey, stored))
	if len(stored.Status.Services) == 0 || stored.Status.Services[0].LastDeployedHash == "" {
		t.Skip("the ServiceSet CRD under test keeps no status.services[].lastDeployedHash (KCM before v1.12)")
	}
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)

	// A values change: a new rollout, which k0rdent fingerprints anew.
	eventually(t, "changing the values", func() error {
		got := getWS(t, key)
		got.Spec.Values = jsonRaw(t, map[string]any{"image": map[string]any{"tag": "v2"}})
		return k8s.Update(ctxT(t), got)
	})
	eventually(t, "a new rollout with its base hash", func() error {
		ss := &k0rdentv1beta1.ServiceSet{}
		if err := k8s.Get(ctxT(t), ssKey, ss); err != nil {
			return err
		}
		if ss.Annotations[owned.AnnotationRolloutBaseHash] != "hash-1" || ss.Annotations[owned.AnnotationRolloutDeployed] == ss.Annotations[owned.AnnotationRolloutStarted] {
			return contains(ss.Annotations[owned.AnnotationRolloutBaseHash], "hash-1 (and a rollout not deployed yet)")
		}
		return nil
	})
	// KCM re-reports the previous configuration Deployed after the change (a promotion while Sveltos
	// has not rendered the new values yet): its time is after the rollout, its hash is not.
	setDeployedHash(t, ssKey, "hash-1")
	eventually(t, "Deploying, the Deployed is the previous configuration's", func() error {
		got := getWS(t, key)
		if got.Status.Phase != workspacesv1.PhaseDeploying {
			return contains(string(got.Status.Phase), string(workspacesv1.PhaseDeploying))
		}
		return contains(got.Status.Message, "lastDeployedHash unchanged")
	})
	setDeployedHash(t, ssKey, "hash-2")
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
}

// TestTheDeployingLookIsSpreadOut: a pass that finds the workspace Deploying (its release installed, a
// pod not Ready) asks to be looked at again after DeployingRecheck lengthened at random by up to a
// fifth (deployingRecheck), drawn at each pass: not after DeployingRecheck itself, which would keep a
// herd of workspaces together. The passes are made by a Reconciler of the test's own over a cache
// indexed as the controller's, the suite's controllers stopped, so that each pass's result is seen.
func TestTheDeployingLookIsSpreadOut(t *testing.T) {
	const recheck = time.Minute
	ns := newNamespace(t)
	node := gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, nil)
	class := createClass(t, classSpec(name("jupyter")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, workspacesv1.ReasonHelmReleaseDeploying)
	// The pod first: a release deployed with no pod seen yet is not waited on.
	pod := releasePod(t, ws, node, 0, true)
	setServiceState(t, client.ObjectKeyFromObject(waitServiceSet(t, ws)), k0rdentv1beta1.ServiceStateDeployed, "")
	eventually(t, "Deploying, naming the pod not Ready", func() error {
		got := getWS(t, key)
		if got.Status.Phase != workspacesv1.PhaseDeploying {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		return contains(got.Status.Message, pod)
	})

	must(t, stopControllers())
	t.Cleanup(func() { must(t, startControllers()) })
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	cached, informers := gateCache(ctx, t)
	children, err := childcluster.New(childcluster.Options{Reader: k8s})
	must(t, err)
	t.Cleanup(children.Stop)
	opts := DefaultOptions()
	opts.DeployingRecheck = recheck
	r := &Reconciler{Client: cached, Cache: informers, APIReader: k8s, Children: CacheChildren{Cache: children},
		Recorder: events.NewFakeRecorder(100), Options: opts}
	var looks []time.Duration
	for pass := 0; pass < 100 && len(looks) < 10; pass++ {
		res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
		must(t, err)
		if res.RequeueAfter < time.Second {
			// The cache has not caught up with the pass's own write yet, or the child is being
			// connected: asked back at once, not the look under test.
			continue
		}
		if res.RequeueAfter < recheck || res.RequeueAfter > recheck+recheck/5 {
			t.Fatalf("pass %d of the Deploying workspace asks to be looked at after %v, want within [%v, %v]", pass, res.RequeueAfter, recheck, recheck+recheck/5)
		}
		looks = append(looks, res.RequeueAfter)
	}
	if len(looks) < 10 {
		t.Fatalf("only %d of 100 passes asked for the look: %v", len(looks), looks)
	}
	for _, l := range looks[1:] {
		if l != looks[0] {
			return
		}
	}
	t.Fatalf("10 passes all ask for the look after %v: not drawn at each pass", looks[0])
}
