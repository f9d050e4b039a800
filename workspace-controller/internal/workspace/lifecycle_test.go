package workspace

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/common/testing/childtest"
	"github.com/exalsius/exalsius-operator/common/testing/testenv"
	"github.com/exalsius/exalsius-operator/common/text"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/childns"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/release"
)

// childNamespace reads ws-<name> on a child.
func childNamespace(t *testing.T, c client.Client, wsName string) (*corev1.Namespace, error) {
	t.Helper()
	ns := &corev1.Namespace{}
	return ns, c.Get(ctxT(t), client.ObjectKey{Name: owned.LocalReleaseNamespace(wsName)}, ns)
}

// syncQuota plays the child's quota controller: it copies the GPU quota's hard limits to its status,
// with nothing used, so that the API server's quota admission can count pods against it.
func syncQuota(t *testing.T, c client.Client, namespace string) *corev1.ResourceQuota {
	t.Helper()
	q := &corev1.ResourceQuota{}
	eventually(t, "GPU quota in "+namespace, func() error {
		if err := c.Get(ctxT(t), client.ObjectKey{Namespace: namespace, Name: owned.GPUQuotaName}, q); err != nil {
			return err
		}
		q.Status.Hard = q.Spec.Hard.DeepCopy()
		q.Status.Used = corev1.ResourceList{}
		for k := range q.Spec.Hard {
			q.Status.Used[k] = resource.MustParse("0")
		}
		return c.Status().Update(ctxT(t), q)
	})
	return q
}

func hostnameNode(t *testing.T, c client.Client, n int64, model string) (nodeName, hostname string) {
	t.Helper()
	nodeName = name("node")
	hostname = "host-" + nodeName
	must(t, childtest.CreateNode(ctxT(t), c, childtest.Node{Name: nodeName,
		Labels: map[string]string{gpu.LabelGPUModel: model, corev1.LabelHostname: hostname}, Allocatable: childtest.GPUs(gpu.ResourceNVIDIA, n)}))
	return nodeName, hostname
}

// TestSameNameTwoNamespacesOneCluster: two namespaces each run a workspace of one name on one cluster.
// The one in the cluster's namespace installs into ws-<name>, as always; the one from the other
// namespace into its qualified wst-<name>-<qualifier>, recorded in its status. Both run; deleting the
// younger leaves the older one's namespace alone.
func TestSameNameTwoNamespacesOneCluster(t *testing.T) {
	cdNS := newNamespace(t)
	otherNS := newNamespace(t)
	nsObj := &corev1.Namespace{}
	must(t, k8s.Get(ctxT(t), client.ObjectKey{Name: cdNS}, nsObj))
	patch := client.MergeFrom(nsObj.DeepCopy())
	nsObj.Annotations = map[string]string{workspacesv1.AllowWorkspacesFromAnnotation: "*"}
	must(t, k8s.Patch(ctxT(t), nsObj, patch))
	class := createClass(t, classSpec(name("owner")), cdNS)
	cd := createCluster(t, cdNS, child.Kubeconfig)
	first := createWorkspace(t, cdNS, class, cd.Name)
	ws := waitPhase(t, first, workspacesv1.PhaseDeploying, "")
	setServiceState(t, types.NamespacedName{Namespace: cdNS, Name: owned.ServiceSetName(ws)}, k0rdentv1beta1.ServiceStateDeployed, "")
	ws = waitPhase(t, first, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
	if ws.Status.ReleaseNamespace != owned.LocalReleaseNamespace(first.Name) {
		t.Errorf("the cluster's own namespace's workspace recorded %q, want ws-<name>", ws.Status.ReleaseNamespace)
	}

	second := createWorkspace(t, otherNS, class, cd.Name, func(w *workspacesv1.WorkspaceDeployment) {
		w.Name = first.Name
		w.Spec.ClusterDeploymentRef.Namespace = cdNS
	})
	ws2 := waitPhase(t, second, workspacesv1.PhaseDeploying, "")
	shared := owned.SharedReleaseNamespace(second.Name, otherNS)
	set := &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), types.NamespacedName{Namespace: cdNS, Name: owned.ServiceSetName(ws2)}, set))
	if ns := set.Spec.Services[0].Namespace; ns != shared {
		t.Fatalf("the other namespace's workspace installs into %s, want %s", ns, shared)
	}
	setServiceState(t, types.NamespacedName{Namespace: cdNS, Name: owned.ServiceSetName(ws2)}, k0rdentv1beta1.ServiceStateDeployed, "")
	ws2 = waitPhase(t, second, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
	if ws2.Status.ReleaseNamespace != shared {
		t.Errorf("status.releaseNamespace %q, want %s", ws2.Status.ReleaseNamespace, shared)
	}
	sharedNS := &corev1.Namespace{}
	must(t, child.Client.Get(ctxT(t), client.ObjectKey{Name: shared}, sharedNS))
	if sharedNS.Labels[workspacesv1.WorkspaceUIDLabel] != string(ws2.UID) || sharedNS.Labels[workspacesv1.WorkspaceNamespaceLabel] != otherNS {
		t.Errorf("namespace %s labels %v do not name %s", shared, sharedNS.Labels, second)
	}

	must(t, k8s.Delete(ctxT(t), getWS(t, second)))
	waitGone(t, "younger workspace", second, &workspacesv1.WorkspaceDeployment{})
	eventually(t, "the younger one's namespace deleted", func() error {
		err := child.Client.Get(ctxT(t), client.ObjectKey{Name: shared}, sharedNS)
		if err == nil && sharedNS.DeletionTimestamp.IsZero() {
			return fmt.Errorf("namespace %s is not being deleted", shared)
		}
		return client.IgnoreNotFound(err)
	})
	ns, err := childNamespace(t, child.Client, first.Name)
	must(t, err)
	if !ns.DeletionTimestamp.IsZero() {
		t.Fatalf("deleting the younger workspace deleted the older one's namespace %s", ns.Name)
	}
	if ns.Labels[workspacesv1.WorkspaceUIDLabel] != string(ws.UID) || ns.Labels[workspacesv1.WorkspaceNamespaceLabel] != cdNS ||
		ns.Labels[workspacesv1.WorkspaceLabel] != first.Name {
		t.Errorf("namespace labels %v do not name the owner %s (uid %s)", ns.Labels, first, ws.UID)
	}
	waitPhase(t, first, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)

	// The owner's deletion removes it.
	must(t, k8s.Delete(ctxT(t), getWS(t, first)))
	waitGone(t, "older workspace", first, &workspacesv1.WorkspaceDeployment{})
	if err := childNamespaceDeleted(t, first.Name); err != nil {
		t.Error(err)
	}
}

// TestReleaseNamespaceEnforced: the controller makes ws-<name> before the release, with Pod Security
// baseline and a GPU quota at the admission; a pod asking more GPUs than admitted is refused by the
// child, and the workspace says why once the child reports it.
func TestReleaseNamespaceEnforced(t *testing.T) {
	ns := newNamespace(t)
	model := name("l4")
	gpuNode(t, child.Client, gpu.ResourceNVIDIA, 4, modelLabels(model))
	class := createClass(t, classSpec(name("quota")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	waitServiceSet(t, ws)
	eventually(t, "ReleaseNamespaceReady", func() error {
		ws = getWS(t, key)
		if c := condition(ws, workspacesv1.ReleaseNamespaceReadyCondition); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("ReleaseNamespaceReady %+v", c)
		}
		return nil
	})

	childNS, err := childNamespace(t, child.Client, key.Name)
	must(t, err)
	if childNS.Labels[owned.LabelPodSecurityEnforce] != "baseline" || childNS.Labels[workspacesv1.WorkspaceUIDLabel] != string(ws.UID) {
		t.Errorf("namespace labels %v: want Pod Security baseline and the owner's uid", childNS.Labels)
	}
	q := syncQuota(t, child.Client, childNS.Name)
	if got := q.Spec.Hard[corev1.ResourceName("requests."+gpu.ResourceNVIDIA)]; got.Value() != 1 {
		t.Errorf("quota %v: want requests.nvidia.com/gpu=1", q.Spec.Hard)
	}
	if got, ok := q.Spec.Hard[corev1.ResourceName("requests."+gpu.ResourceAMD)]; !ok || got.Value() != 0 {
		t.Errorf("quota %v: want requests.amd.com/gpu=0", q.Spec.Hard)
	}

	// Pod Security baseline refuses a host-network pod.
	hostPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: childNS.Name, Name: "host"}, Spec: corev1.PodSpec{
		HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: "registry.example/x:1"}}}}
	if err := child.Client.Create(ctxT(t), hostPod); err == nil || !apierrors.IsForbidden(err) {
		t.Errorf("a host-network pod in %s: %v, want forbidden by Pod Security", childNS.Name, err)
	}

	// A chart value asking 2 GPUs: the child refuses the pod.
	err = childtest.CreatePod(ctxT(t), child.Client, childtest.Pod{Namespace: childNS.Name, Name: "greedy", Requests: childtest.Requests(gpu.ResourceNVIDIA, 2)})
	if err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("a pod asking 2 GPUs in a namespace admitted for 1: %v, want exceeded quota", err)
	}
	// The workload controller reports the refusal as an event, which the workspace repeats.
	refusal := err.Error()[strings.Index(err.Error(), "pods "):]
	now := metav1.NewMicroTime(time.Now())
	must(t, child.Client.Create(ctxT(t), &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: childNS.Name, Name: name("ev")},
		EventTime:  now, ReportingController: "replicaset-controller", ReportingInstance: "kcm", Action: "Create",
		Reason: "FailedCreate", Type: corev1.EventTypeWarning, Note: "Error creating: " + refusal,
		Regarding: corev1.ObjectReference{Kind: "ReplicaSet", Namespace: childNS.Name, Name: "release-abc", APIVersion: "apps/v1"},
	}))
	eventually(t, "the workspace names the quota refusal", func() error {
		got := getWS(t, key)
		c := condition(got, workspacesv1.HelmReleaseReadyCondition)
		if c.Reason != workspacesv1.ReasonGpuQuotaExceeded {
			return fmt.Errorf("HelmReleaseReady %s: %s", c.Reason, c.Message)
		}
		return contains(got.Status.Message, "exceeded quota")
	})
}

// TestGuardRailsPutBackWhileRunning: a Running workspace, which no pod change brings back, puts its
// release namespace's guard rails right as soon as someone changes them on the child: a GPU quota
// raised, the Pod Security label loosened, the NetworkPolicy deleted (the child's watch of the
// controller's own objects tells the change).
func TestGuardRailsPutBackWhileRunning(t *testing.T) {
	key, _, _ := runningWorkspace(t, newNamespace(t))
	relNS := owned.LocalReleaseNamespace(key.Name)
	gpus := corev1.ResourceName("requests." + gpu.ResourceNVIDIA)
	quota := &corev1.ResourceQuota{}
	policy := &networkingv1.NetworkPolicy{}
	eventually(t, "the quota and the network policy on the child", func() error {
		if err := child.Client.Get(ctxT(t), client.ObjectKey{Namespace: relNS, Name: owned.GPUQuotaName}, quota); err != nil {
			return err
		}
		return child.Client.Get(ctxT(t), client.ObjectKey{Namespace: relNS, Name: childns.NetworkPolicyName}, policy)
	})
	base := quota.DeepCopy()
	quota.Spec.Hard[gpus] = resource.MustParse("8")
	must(t, child.Client.Patch(ctxT(t), quota, client.MergeFrom(base)))
	childNS, err := childNamespace(t, child.Client, key.Name)
	must(t, err)
	nsBase := childNS.DeepCopy()
	childNS.Labels[owned.LabelPodSecurityEnforce] = "privileged"
	must(t, child.Client.Patch(ctxT(t), childNS, client.MergeFrom(nsBase)))
	must(t, child.Client.Delete(ctxT(t), policy))

	eventually(t, "the guard rails put back", func() error {
		q := &corev1.ResourceQuota{}
		if err := child.Client.Get(ctxT(t), client.ObjectKey{Namespace: relNS, Name: owned.GPUQuotaName}, q); err != nil {
			return err
		}
		if got := q.Spec.Hard[gpus]; got.Value() != 0 {
			return fmt.Errorf("quota %s", childns.QuotaString(q))
		}
		got, err := childNamespace(t, child.Client, key.Name)
		if err != nil {
			return err
		}
		if got.Labels[owned.LabelPodSecurityEnforce] != "baseline" {
			return fmt.Errorf("namespace labels %v", got.Labels)
		}
		np := &networkingv1.NetworkPolicy{}
		if err := child.Client.Get(ctxT(t), client.ObjectKey{Namespace: relNS, Name: childns.NetworkPolicyName}, np); err != nil {
			return err
		}
		return nil
	})
	if got := getWS(t, key); got.Status.Phase != workspacesv1.PhaseRunning {
		t.Errorf("phase %s after the guard rails were put back, want Running", got.Status.Phase)
	}
}

// TestQuotaCapsDeviceResourcesThatCameLater: a device resource a node brings to the child after the
// release namespace was made (a MIG profile) is capped at 0 by the quota at the next pass: what the
// quota caps follows the child's Nodes, not what they were at the first pass.
func TestQuotaCapsDeviceResourcesThatCameLater(t *testing.T) {
	other, err := testenv.StartChild("devices")
	must(t, err)
	t.Cleanup(func() { _ = other.Stop() })
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("dev")), ns)
	cd := createCluster(t, ns, other.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	waitServiceSet(t, waitPhase(t, key, workspacesv1.PhaseDeploying, ""))
	relNS := owned.LocalReleaseNamespace(key.Name)
	mig := corev1.ResourceName("requests.nvidia.com/mig-1g.10gb")
	quota := func() (*corev1.ResourceQuota, error) {
		q := &corev1.ResourceQuota{}
		return q, other.Client.Get(ctxT(t), client.ObjectKey{Namespace: relNS, Name: owned.GPUQuotaName}, q)
	}
	eventually(t, "the GPU quota on the child", func() error {
		q, err := quota()
		if err == nil {
			if _, capped := q.Spec.Hard[mig]; capped {
				return fmt.Errorf("quota %s caps a device no node advertises yet", childns.QuotaString(q))
			}
		}
		return err
	})
	gpuNode(t, other.Client, "nvidia.com/mig-1g.10gb", 7, nil)
	ws := getWS(t, key)
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Labels = map[string]string{"nudge": "1"} // a pass, without a spec change
	must(t, k8s.Patch(ctxT(t), ws, patch))
	eventually(t, "the new device resource capped at 0", func() error {
		q, err := quota()
		if err != nil {
			return err
		}
		if got, capped := q.Spec.Hard[mig]; !capped || got.Value() != 0 {
			return fmt.Errorf("quota %s", childns.QuotaString(q))
		}
		return nil
	})
}

// TestRefusedPodNamedWhileDeploying: a chart asking a RuntimeClass the child lacks (runtimeClassName
// nvidia on a child without NVIDIA's GPU operator) has its pods refused by the child's API server;
// the workspace stays Deploying, names the workload and the child's message in HelmReleaseReady
// (PodsRefused) and in an Event, and records one more Event when the refusal changes.
func TestRefusedPodNamedWhileDeploying(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("rc")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	waitServiceSet(t, ws)
	var childNS *corev1.Namespace
	eventually(t, "ws-<name> on the child", func() (err error) {
		childNS, err = childNamespace(t, child.Client, key.Name)
		return err
	})

	// What the ReplicaSet controller is told when it creates the chart's pod.
	nvidia := "nvidia"
	err := child.Client.Create(ctxT(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: childNS.Name, Name: "nb-5d8f-x"}, Spec: corev1.PodSpec{
		RuntimeClassName: &nvidia, Containers: []corev1.Container{{Name: "c", Image: "registry.example/x:1"}}}})
	if err == nil || !strings.Contains(err.Error(), `RuntimeClass "nvidia" not found`) {
		t.Fatalf("a pod asking the RuntimeClass nvidia on a child without it: %v, want it refused", err)
	}
	refused := "Error creating: " + err.Error()[strings.Index(err.Error(), "pods "):]
	failedCreate := func(workload, note string) {
		t.Helper()
		must(t, child.Client.Create(ctxT(t), &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: childNS.Name, Name: name("ev")},
			EventTime:  metav1.NewMicroTime(time.Now()), ReportingController: "replicaset-controller", ReportingInstance: "kcm", Action: "Create",
			Reason: "FailedCreate", Type: corev1.EventTypeWarning, Note: note,
			Regarding: corev1.ObjectReference{Kind: "ReplicaSet", Namespace: childNS.Name, Name: workload, APIVersion: "apps/v1"},
		}))
	}
	failedCreate("nb-5d8f", refused)
	named := func(workload, childMessage string) func() error {
		return func() error {
			got := getWS(t, key)
			c := condition(got, workspacesv1.HelmReleaseReadyCondition)
			if got.Status.Phase != workspacesv1.PhaseDeploying || c.Reason != workspacesv1.ReasonPodsRefused {
				return fmt.Errorf("phase %s, HelmReleaseReady %s: %s", got.Status.Phase, c.Reason, c.Message)
			}
			if err := contains(c.Message, "ReplicaSet "+workload+": "); err != nil {
				return err
			}
			if err := contains(c.Message, childMessage); err != nil {
				return err
			}
			return contains(got.Status.Message, childMessage)
		}
	}
	eventually(t, "the workspace names the refused pod while Deploying", named("nb-5d8f", `RuntimeClass "nvidia" not found`))
	eventEvery := func(what string) func() error {
		return func() error {
			for _, e := range workspaceEvents(t, key) {
				if e.Reason == workspacesv1.ReasonPodsRefused && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, what) {
					return nil
				}
			}
			return fmt.Errorf("no PodsRefused Event naming %q", what)
		}
	}
	eventually(t, "an Event names the refusal", eventEvery(`ReplicaSet nb-5d8f: `+refused))

	// Another refusal under the same reason: the status and one more Event say so.
	denied := `Error creating: admission webhook "policy.example" denied the request: no GPUs for team x`
	failedCreate("nb-7c2a", denied)
	eventually(t, "the workspace names the new refusal", named("nb-7c2a", denied))
	eventually(t, "an Event names the new refusal", eventEvery("ReplicaSet nb-7c2a: "+denied))
	count := func() int {
		n := 0
		for _, e := range workspaceEvents(t, key) {
			if e.Reason == workspacesv1.ReasonPodsRefused {
				n++
			}
		}
		return n
	}
	// A pass that finds the same refusal records nothing more: a spec edit brings one, and its
	// status names the refusal for the new generation.
	before := count()
	ws = getWS(t, key)
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Spec.Values = jsonRaw(t, map[string]any{"nudge": true})
	must(t, k8s.Patch(ctxT(t), ws, patch))
	eventually(t, "a pass of the new generation names the refusal", func() error {
		got := getWS(t, key)
		c := condition(got, workspacesv1.HelmReleaseReadyCondition)
		if got.Status.ObservedGeneration != got.Generation || c.ObservedGeneration != got.Generation || c.Reason != workspacesv1.ReasonPodsRefused {
			return fmt.Errorf("generation %d, observed %d, HelmReleaseReady %s of generation %d", got.Generation, got.Status.ObservedGeneration, c.Reason, c.ObservedGeneration)
		}
		return nil
	})
	if after := count(); after != before {
		t.Errorf("PodsRefused Events went from %d to %d while the refusal stayed the same", before, after)
	}
}

// TestClassAsksPodSecurityLevel: a class may ask another Pod Security level; with no GPUs the quota
// allows none.
func TestClassAsksPodSecurityLevel(t *testing.T) {
	ns := newNamespace(t)
	spec := classSpec(name("psa"))
	spec.PodSecurityLevel = workspacesv1.PodSecurityRestricted
	class := createClass(t, spec, ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	childNS, err := childNamespace(t, child.Client, key.Name)
	must(t, err)
	if childNS.Labels[owned.LabelPodSecurityEnforce] != "restricted" {
		t.Errorf("namespace labels %v: want Pod Security restricted", childNS.Labels)
	}
	q := &corev1.ResourceQuota{}
	must(t, child.Client.Get(ctxT(t), client.ObjectKey{Namespace: childNS.Name, Name: owned.GPUQuotaName}, q))
	if got := q.Spec.Hard[corev1.ResourceName("requests."+gpu.ResourceNVIDIA)]; got.Value() != 0 {
		t.Errorf("quota %v: a workspace without GPUs gets none", q.Spec.Hard)
	}
	// Drift is corrected.
	patch := client.MergeFrom(childNS.DeepCopy())
	childNS.Labels[owned.LabelPodSecurityEnforce] = "privileged"
	must(t, child.Client.Patch(ctxT(t), childNS, patch))
	ws := getWS(t, key)
	wpatch := client.MergeFrom(ws.DeepCopy())
	ws.Spec.Values = jsonRaw(t, map[string]any{"nudge": true})
	must(t, k8s.Patch(ctxT(t), ws, wpatch))
	eventually(t, "Pod Security level restored", func() error {
		got, err := childNamespace(t, child.Client, key.Name)
		if err != nil {
			return err
		}
		if got.Labels[owned.LabelPodSecurityEnforce] != "restricted" {
			return fmt.Errorf("level %q", got.Labels[owned.LabelPodSecurityEnforce])
		}
		return nil
	})
}

// TestFailedBeforeInstallReleasesGPUs: a workspace whose prerequisite fails holds no GPUs, so another
// workspace gets them.
func TestFailedBeforeInstallReleasesGPUs(t *testing.T) {
	ns := newNamespace(t)
	model := name("a30")
	gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	spec := classSpec(name("prq"))
	prereq := name("driver")
	spec.Prerequisites = []workspacesv1.Prerequisite{{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: prereq}, Namespace: "gpu-operator"}}
	withPrereq := createClass(t, spec, ns)
	plain := createClass(t, classSpec(name("plain")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	a := createWorkspace(t, ns, withPrereq, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, a, workspacesv1.PhaseInstallingPrerequisites, "")
	setServiceState(t, types.NamespacedName{Namespace: ns, Name: owned.PrerequisiteServiceSetName(cd.Name, prereq)}, k0rdentv1beta1.ServiceStateFailed, "image pull")
	ws := waitPhase(t, a, workspacesv1.PhaseFailed, workspacesv1.ReasonPrerequisiteFailed)
	if ws.Status.Admission != nil {
		t.Errorf("a workspace failed before its install holds an admission: %+v", ws.Status.Admission)
	}
	b := createWorkspace(t, ns, plain, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, b, workspacesv1.PhaseDeploying, "")
}

// TestAdmissionSurvivesRestart: a workspace admitted and still installing holds its GPUs through its
// admission; after a controller restart a second workspace is still not admitted onto them. A failed
// release keeps them (k0rdent retries it); the first workspace's deletion frees them for the second.
func TestAdmissionSurvivesRestart(t *testing.T) {
	ns := newNamespace(t)
	model := name("h20")
	node := gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	class := createClass(t, classSpec(name("hold")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	a := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, a, workspacesv1.PhaseDeploying, "")
	ad := ws.Status.Admission
	if ad == nil || ad.Cluster != ns+"/"+cd.Name || ad.GPUs != 1 || len(ad.Nodes) != 1 || ad.Nodes[0].Name != node || ad.Nodes[0].Replicas != 1 {
		t.Fatalf("admission %+v: want 1 GPU on %s of %s/%s", ad, node, ns, cd.Name)
	}
	ss := waitServiceSet(t, ws)

	restartControllers(t)

	b := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	got := waitPhase(t, b, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	if err := contains(got.Status.Feasibility.Message, "1 reserved"); err != nil {
		t.Error(err)
	}
	// The release fails with its pod never bound: k0rdent may still install it, so the GPU stays
	// reserved until the workspace is deleted.
	setServiceState(t, client.ObjectKeyFromObject(ss), k0rdentv1beta1.ServiceStateFailed, "crash loop")
	ws = waitPhase(t, a, workspacesv1.PhaseFailed, workspacesv1.ReasonHelmReleaseFailed)
	if ws.Status.Admission == nil {
		t.Fatal("a failed workspace whose ServiceSet exists dropped its admission")
	}
	must(t, k8s.Delete(ctxT(t), ws))
	waitPhase(t, b, workspacesv1.PhaseDeploying, "")
}

// TestPinnedToAdmittedNode: replicas counted on one node are pinned to it through the selector the
// chart receives, and later decisions charge them to that node.
func TestPinnedToAdmittedNode(t *testing.T) {
	ns := newNamespace(t)
	model := name("a40")
	big, bigHost := hostnameNode(t, child.Client, 2, model)
	small, smallHost := hostnameNode(t, child.Client, 1, model)
	class := createClass(t, classSpec(name("pin")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)

	one := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, one, workspacesv1.PhaseDeploying, "")
	if ad := ws.Status.Admission; ad == nil || len(ad.Nodes) != 1 || ad.Nodes[0].Name != small {
		t.Fatalf("admission %+v: want the smallest node that holds it, %s", ad, small)
	}
	sel := serviceSetValues(t, waitServiceSet(t, ws))["_exalsius"].(map[string]any)["scheduling"].(map[string]any)["nodeSelector"].(map[string]any)
	if sel[corev1.LabelHostname] != smallHost || sel[gpu.LabelGPUModel] != model {
		t.Errorf("nodeSelector %v: want %s=%s with the model", sel, corev1.LabelHostname, smallHost)
	}

	two := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = gpuResources(1, model)
		r := int32(2)
		ws.Spec.Resources.Replicas = &r
	})
	ws = waitPhase(t, two, workspacesv1.PhaseDeploying, "")
	sel = serviceSetValues(t, waitServiceSet(t, ws))["_exalsius"].(map[string]any)["scheduling"].(map[string]any)["nodeSelector"].(map[string]any)
	if sel[corev1.LabelHostname] != bigHost {
		t.Errorf("nodeSelector %v: want the replicas pinned to %s (%s)", sel, big, bigHost)
	}
	// Every GPU is counted for a workspace whose pods are not bound yet: a third one waits.
	three := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, three, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
}

// TestServiceSetNamesNeverShared: `team/x` and `team-x` in the cluster's namespace get two ServiceSets,
// and a ServiceSet of a workspace's name that its labels do not claim is never adopted.
func TestServiceSetNamesNeverShared(t *testing.T) {
	a := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "x"},
		Spec: workspacesv1.WorkspaceDeploymentSpec{ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "cd", Namespace: "clusters"}}}
	b := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: "team-x"},
		Spec: workspacesv1.WorkspaceDeploymentSpec{ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "cd"}}}
	c := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-x", Name: "y"},
		Spec: workspacesv1.WorkspaceDeploymentSpec{ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "cd", Namespace: "clusters"}}}
	d := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "x-y"},
		Spec: workspacesv1.WorkspaceDeploymentSpec{ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: "cd", Namespace: "clusters"}}}
	seen := map[string]string{}
	for _, ws := range []*workspacesv1.WorkspaceDeployment{a, b, c, d} {
		n := owned.ServiceSetName(ws)
		if prev, dup := seen[n]; dup {
			t.Errorf("%s/%s and %s share ServiceSet %s", ws.Namespace, ws.Name, prev, n)
		}
		if len(n) > 63 {
			t.Errorf("ServiceSet name %q longer than 63", n)
		}
		seen[n] = ws.Namespace + "/" + ws.Name
	}

	ns := newNamespace(t)
	class := createClass(t, classSpec(name("own")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	wsName := name("ws")
	foreign := &k0rdentv1beta1.ServiceSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: owned.ServiceSetName(&workspacesv1.WorkspaceDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wsName},
			Spec:       workspacesv1.WorkspaceDeploymentSpec{ClusterDeploymentRef: workspacesv1.ClusterDeploymentRef{Name: cd.Name}}}),
			Labels: map[string]string{workspacesv1.WorkspaceLabel: "someone-else", workspacesv1.WorkspaceNamespaceLabel: "elsewhere"}},
		Spec: k0rdentv1beta1.ServiceSetSpec{Cluster: cd.Name, Provider: k0rdentv1beta1.StateManagementProviderConfig{Name: k0rdentv1beta1.DefaultStateManagementProvider},
			Services: []k0rdentv1beta1.ServiceWithValues{{Name: "theirs", Namespace: "theirs", Template: "theirs"}}},
	}
	must(t, k8s.Create(ctxT(t), foreign))
	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Name = wsName })
	ws := waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonServiceSetConflict)
	// The ServiceSet names another namespace's workspace: the tenant is not told whose.
	if err := contains(ws.Status.Message, "a workspace of another namespace"); err != nil || strings.Contains(ws.Status.Message, "elsewhere") {
		t.Errorf("message %q: want the owner unnamed (%v)", ws.Status.Message, err)
	}
	got := &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), client.ObjectKeyFromObject(foreign), got))
	if got.Spec.Services[0].Name != "theirs" || got.Labels[workspacesv1.WorkspaceLabel] != "someone-else" {
		t.Errorf("the foreign ServiceSet was changed: %+v %v", got.Spec.Services, got.Labels)
	}
	if ws.Status.Admission != nil {
		t.Errorf("a workspace refused its ServiceSet holds an admission: %+v", ws.Status.Admission)
	}
}

// TestResyncKeepsRunning: once the current rollout was deployed, a Provisioning or Pending after the
// deployTimeout is a re-sync: the workspace stays Running and says so. A real failure still fails it.
func TestResyncKeepsRunning(t *testing.T) {
	ns := newNamespace(t)
	spec := classSpec(name("resync"))
	spec.DeployTimeout = &metav1.Duration{Duration: time.Second}
	class := createClass(t, spec, ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	// With a 1 s deadline the workspace may already be Failed (DeployTimeout) when a loaded machine
	// lets the test look: wait for the ServiceSet, not for a phase; Deployed heals it either way.
	ss := waitServiceSet(t, getWS(t, key))
	setServiceState(t, client.ObjectKeyFromObject(ss), k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
	ss = waitServiceSet(t, getWS(t, key))
	started, err := time.Parse(time.RFC3339, ss.Annotations[owned.AnnotationRolloutStarted])
	must(t, err)
	eventually(t, "the deployTimeout counted from the rollout has passed", func() error {
		if left := time.Until(started.Add(2 * time.Second)); left > 0 {
			return fmt.Errorf("%s left", left)
		}
		return nil
	})
	for _, st := range []k0rdentv1beta1.ServiceDeploymentState{k0rdentv1beta1.ServiceStateProvisioning, k0rdentv1beta1.ServiceStatePending} {
		setServiceState(t, client.ObjectKeyFromObject(ss), st, "")
		eventually(t, "re-sync reported", func() error {
			got := getWS(t, key)
			c := condition(got, workspacesv1.HelmReleaseReadyCondition)
			if got.Status.Phase != workspacesv1.PhaseRunning || c.Reason != workspacesv1.ReasonHelmReleaseResyncing {
				return fmt.Errorf("phase %s, HelmReleaseReady %s: %s", got.Status.Phase, c.Reason, c.Message)
			}
			return contains(c.Message, string(st))
		})
	}
	setServiceState(t, client.ObjectKeyFromObject(ss), k0rdentv1beta1.ServiceStateFailed, "oom")
	waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonHelmReleaseFailed)
}

// TestTemplateInvalidityKeepsRunning: a ServiceTemplate that turns invalid (KCM re-validating it) does
// not take a Running workspace out of Running: its ClassResolved condition says so.
func TestTemplateInvalidityKeepsRunning(t *testing.T) {
	ns := newNamespace(t)
	tmpl := name("flap")
	class := createClass(t, classSpec(tmpl), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	setServiceState(t, client.ObjectKeyFromObject(waitServiceSet(t, ws)), k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)

	for _, tns := range []string{ns, workspacesv1.DefaultServiceTemplateNamespace} {
		st := &k0rdentv1beta1.ServiceTemplate{}
		must(t, k8s.Get(ctxT(t), client.ObjectKey{Namespace: tns, Name: tmpl}, st))
		st.Status.Valid = false
		st.Status.ValidationError = "source artifact not ready"
		must(t, k8s.Status().Update(ctxT(t), st))
	}
	eventually(t, "ClassResolved False while Running", func() error {
		got := getWS(t, key)
		c := condition(got, workspacesv1.ClassResolvedCondition)
		if got.Status.Phase != workspacesv1.PhaseRunning || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("phase %s, ClassResolved %s %s: %s", got.Status.Phase, c.Status, c.Reason, c.Message)
		}
		return nil
	})
	if r := condition(getWS(t, key), workspacesv1.ReadyCondition); r.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v", r)
	}
}

// TestWaitersRetriedWhenHolderGoes: a waiter proceeds when the only holder (of another class) is
// deleted, without any child event, and a suspended waiter keeps no place in the queue.
func TestWaitersRetriedWhenHolderGoes(t *testing.T) {
	ns := newNamespace(t)
	model := name("rtx")
	gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	holderClass := createClass(t, classSpec(name("holder")), ns)
	class := createClass(t, classSpec(name("waiter")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	holder := createWorkspace(t, ns, holderClass, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, holder, workspacesv1.PhaseDeploying, "")
	suspended := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, suspended, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	waiter := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	waitPhase(t, waiter, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)

	ws := getWS(t, suspended)
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Spec.Suspend = true
	must(t, k8s.Patch(ctxT(t), ws, patch))
	eventually(t, "suspension noted", func() error { return contains(getWS(t, suspended).Status.Message, "suspended") })

	must(t, k8s.Delete(ctxT(t), getWS(t, holder)))
	waitGone(t, "holder", holder, &workspacesv1.WorkspaceDeployment{})
	waitPhase(t, waiter, workspacesv1.PhaseDeploying, "")
	if p := getWS(t, suspended).Status.Phase; p != workspacesv1.PhaseWaiting {
		t.Errorf("the suspended waiter is %s, want left Waiting", p)
	}
}

// TestDeletionGivesUpOnUnreachableChild: a child that does not answer leaves a Running workspace
// Running (saying so), and while its ClusterDeployment exists holds a deletion only for the
// configured time; then it completes with a Warning Event naming what was left.
func TestDeletionGivesUpOnUnreachableChild(t *testing.T) {
	other, err := testenv.StartChild("vanishing")
	must(t, err)
	t.Cleanup(func() { _ = other.Resume(); _ = other.Stop() })
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("bye")), ns)
	cd := createCluster(t, ns, other.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	ss := waitServiceSet(t, ws)
	patch := client.MergeFrom(ss.DeepCopy())
	ss.Finalizers = append(ss.Finalizers, k0rdentv1beta1.ServiceSetFinalizer)
	must(t, k8s.Patch(ctxT(t), ss, patch))
	setServiceState(t, client.ObjectKeyFromObject(ss), k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)

	// While the child does not answer, a Running workspace stays Running and says so.
	must(t, other.Pause())
	ws = getWS(t, key)
	wpatch := client.MergeFrom(ws.DeepCopy())
	ws.Labels = map[string]string{"nudge": "1"} // a pass, without a spec change
	must(t, k8s.Patch(ctxT(t), ws, wpatch))
	eventually(t, "unreachable child reported on a Running workspace", func() error {
		got := getWS(t, key)
		c := condition(got, workspacesv1.ReleaseNamespaceReadyCondition)
		if c.Reason != workspacesv1.ReasonClusterUnreachable {
			// A request that times out on the paused child fails the pass, which is retried.
			return fmt.Errorf("ReleaseNamespaceReady %s: %s", c.Reason, c.Message)
		}
		if got.Status.Phase != workspacesv1.PhaseRunning {
			return fmt.Errorf("phase %s: %s", got.Status.Phase, got.Status.Message)
		}
		return nil
	})
	must(t, k8s.Delete(ctxT(t), getWS(t, key)))
	waitGone(t, "workspace", key, &workspacesv1.WorkspaceDeployment{})
	eventually(t, "CleanupIncomplete event", func() error {
		var list eventsv1.EventList
		if err := k8s.List(ctxT(t), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == key.Name && e.Reason == EventReasonCleanupIncomplete && e.Type == corev1.EventTypeWarning {
				if err := contains(e.Note, ss.Name); err != nil {
					return err
				}
				if len(e.Note) > text.MaxEventNoteBytes {
					t.Errorf("note of %d bytes", len(e.Note))
				}
				return nil
			}
		}
		seen := []string{}
		for _, e := range list.Items {
			seen = append(seen, e.Regarding.Name+":"+e.Reason)
		}
		return fmt.Errorf("no %s event among %v", EventReasonCleanupIncomplete, seen)
	})
	// k0rdent still finishes the ServiceSet once it can.
	if err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(ss), &k0rdentv1beta1.ServiceSet{}); err != nil {
		t.Errorf("the ServiceSet k0rdent still uninstalls: %v", err)
	}
	must(t, other.Resume())
}

// TestHelmOptionsOnlyWhenClassAsks: without class helmOptions none are sent (k0rdent's atomic default
// applies); with them they are sent as they are.
func TestHelmOptionsOnlyWhenClassAsks(t *testing.T) {
	ns := newNamespace(t)
	cd := createCluster(t, ns, child.Kubeconfig)
	plain := createClass(t, classSpec(name("noopts")), ns)
	spec := classSpec(name("opts"))
	spec.HelmOptions = jsonRaw(t, map[string]any{"atomic": false, "timeout": "20m"})
	withOpts := createClass(t, spec, ns)

	a := waitServiceSet(t, waitPhase(t, createWorkspace(t, ns, plain, cd.Name), workspacesv1.PhaseDeploying, ""))
	if ho := a.Spec.Services[0].HelmOptions; ho != nil {
		t.Errorf("helmOptions %s sent although the class asks none", ho.Raw)
	}
	b := waitServiceSet(t, waitPhase(t, createWorkspace(t, ns, withOpts, cd.Name), workspacesv1.PhaseDeploying, ""))
	if !release.SameJSON(b.Spec.Services[0].HelmOptions, spec.HelmOptions) {
		t.Errorf("helmOptions %v, want the class's", b.Spec.Services[0].HelmOptions)
	}
}

// TestSharedPrerequisiteDriftAndConflicts: a changed shared prerequisite is put back; a class that asks
// other values for it, or another version of its chart in its namespace, is told so on its
// workspaces, and the prerequisite is left as the first class wants it.
func TestSharedPrerequisiteDriftAndConflicts(t *testing.T) {
	ns := newNamespace(t)
	operator := name("gpu-operator-24-9-0")
	newer := name("gpu-operator-25-3-0")
	p := workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: operator}, Namespace: "gpu-operator", Values: jsonRaw(t, map[string]any{"driver": map[string]any{"enabled": false}})}
	first := createClass(t, withPrereqs(classSpec(name("first")), p), ns)
	other := p
	other.Values = jsonRaw(t, map[string]any{"driver": map[string]any{"enabled": true}})
	otherValues := createClass(t, withPrereqs(classSpec(name("othervalues")), other), ns)
	otherVersion := createClass(t, withPrereqs(classSpec(name("otherversion")),
		workspacesv1.Prerequisite{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: newer}, Namespace: "gpu-operator"}), ns)
	cd := createCluster(t, ns, child.Kubeconfig)

	a := createWorkspace(t, ns, first, cd.Name)
	waitPhase(t, a, workspacesv1.PhaseInstallingPrerequisites, workspacesv1.ReasonPrerequisitesDeploying)
	key := types.NamespacedName{Namespace: ns, Name: owned.PrerequisiteServiceSetName(cd.Name, operator)}
	setServiceState(t, key, k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, a, workspacesv1.PhaseDeploying, "")

	// Someone edits the shared ServiceSet: its class's workspace puts it back.
	ss := &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), key, ss))
	want := ss.Spec.Services[0].Values
	patch := client.MergeFrom(ss.DeepCopy())
	ss.Spec.Services[0].Values = "driver:\n  enabled: true\n"
	must(t, k8s.Patch(ctxT(t), ss, patch))
	eventually(t, "prerequisite values put back", func() error {
		got := &k0rdentv1beta1.ServiceSet{}
		if err := k8s.Get(ctxT(t), key, got); err != nil {
			return err
		}
		if got.Spec.Services[0].Values != want {
			return fmt.Errorf("values %q, want %q", got.Spec.Services[0].Values, want)
		}
		return nil
	})

	b := createWorkspace(t, ns, otherValues, cd.Name)
	ws := waitPhase(t, b, workspacesv1.PhaseFailed, workspacesv1.ReasonPrerequisiteValuesConflict)
	if err := contains(ws.Status.Message, first); err != nil {
		t.Error(err)
	}
	c := createWorkspace(t, ns, otherVersion, cd.Name)
	ws = waitPhase(t, c, workspacesv1.PhaseFailed, workspacesv1.ReasonPrerequisiteNamespaceConflict)
	if err := contains(ws.Status.Message, "two versions of one chart"); err != nil {
		t.Error(err)
	}
	got := &k0rdentv1beta1.ServiceSet{}
	must(t, k8s.Get(ctxT(t), key, got))
	if got.Spec.Services[0].Values != want {
		t.Errorf("a conflicting class changed the shared prerequisite: %q", got.Spec.Services[0].Values)
	}
	if err := k8s.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: owned.PrerequisiteServiceSetName(cd.Name, newer)}, &k0rdentv1beta1.ServiceSet{}); err == nil {
		t.Error("a second version of the chart was installed in the same namespace")
	}
	if p := getWS(t, a).Status.Phase; p == workspacesv1.PhaseFailed {
		t.Errorf("the first class's workspace is %s", p)
	}
}

// TestEarlierAdmissionAdopted: a workspace admitted before admissions were recorded (no
// status.admission, Feasible for its resources, its ServiceSet made) is not gated again, even when
// the GPUs it was admitted for look taken now.
func TestEarlierAdmissionAdopted(t *testing.T) {
	ns := newNamespace(t)
	model := name("k80")
	node := gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	class := createClass(t, classSpec(name("legacy")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	setServiceState(t, client.ObjectKeyFromObject(waitServiceSet(t, ws)), k0rdentv1beta1.ServiceStateDeployed, "")
	releasePod(t, ws, node, 0, false)
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
	// The GPU is taken by a pod outside the workspace, and the status looks as an earlier version wrote it.
	gpuPod(t, child.Client, "busy", node, gpu.ResourceNVIDIA, 1)
	ws = getWS(t, key)
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Status.Admission = nil
	must(t, k8s.Status().Patch(ctxT(t), ws, patch))
	eventually(t, "admission adopted", func() error {
		got := getWS(t, key)
		if got.Status.Admission == nil || got.Status.Admission.GPUs != 1 {
			return fmt.Errorf("admission %+v, phase %s", got.Status.Admission, got.Status.Phase)
		}
		if got.Status.Phase != workspacesv1.PhaseRunning {
			return fmt.Errorf("phase %s: %s", got.Status.Phase, got.Status.Message)
		}
		return nil
	})
}

// TestSpreadWorkspaceWaitsForBinding: replicas that need several nodes cannot be pinned, so they are
// admitted only once the GPUs counted for others on their nodes are bound; and while they are not
// bound themselves, no workspace is pinned to a node they could still take.
func TestSpreadWorkspaceWaitsForBinding(t *testing.T) {
	ns := newNamespace(t)
	model := name("mi250")
	n1, _ := hostnameNode(t, child.Client, 2, model)
	hostnameNode(t, child.Client, 2, model)
	class := createClass(t, classSpec(name("spread")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)

	a := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, a, workspacesv1.PhaseDeploying, "")
	if ad := ws.Status.Admission; ad == nil || len(ad.Nodes) != 1 || ad.Nodes[0].Name != n1 {
		t.Fatalf("admission %+v: want pinned to %s", ad, n1)
	}
	b := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = gpuResources(1, model)
		r := int32(3)
		ws.Spec.Resources.Replicas = &r
	})
	ws = waitPhase(t, b, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	if err := contains(ws.Status.Message, "cannot be pinned"); err != nil {
		t.Error(err)
	}
	// The first workspace's pod is bound where it was counted: the spread one is admitted.
	syncQuota(t, child.Client, owned.LocalReleaseNamespace(a.Name))
	gpuPod(t, child.Client, owned.LocalReleaseNamespace(a.Name), n1, gpu.ResourceNVIDIA, 1)
	ws = waitPhase(t, b, workspacesv1.PhaseDeploying, "")
	if ad := ws.Status.Admission; ad == nil || len(ad.Nodes) != 2 {
		t.Fatalf("admission %+v: want 3 replicas counted on 2 nodes", ad)
	}
	// A new node with room: a workspace pinned there waits while the spread replicas are unbound.
	hostnameNode(t, child.Client, 1, model)
	c := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws = waitPhase(t, c, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	if err := contains(ws.Status.Message, "spread over several nodes"); err != nil {
		t.Error(err)
	}
}

// TestAdmissionCarriedByServiceSet: a pass that made a GPU workspace's ServiceSet and ended before its
// status write (a crash) leaves the admission on the ServiceSet. Other workspaces count it from there,
// and the workspace's next pass takes it back instead of gating again.
func TestAdmissionCarriedByServiceSet(t *testing.T) {
	ns := newNamespace(t)
	model := name("l4")
	node := gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	class := createClass(t, classSpec(name("carry")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	a := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	ws := waitPhase(t, a, workspacesv1.PhaseDeploying, "")
	carried := owned.AnnotatedAdmission(waitServiceSet(t, ws))
	if carried == nil || carried.GPUs != 1 || len(carried.Nodes) != 1 || carried.Nodes[0].Name != node {
		t.Fatalf("the ServiceSet carries admission %+v; want 1 GPU on %s", carried, node)
	}
	if !equality.Semantic.DeepEqual(carried, ws.Status.Admission) {
		t.Fatalf("the ServiceSet carries %+v, the status %+v", carried, ws.Status.Admission)
	}

	// The state a crash between the ServiceSet and the first status write leaves: a ServiceSet and an
	// empty status. The workspace is suspended so that its own pass cannot record the admission
	// again before the other workspace's decision.
	must(t, stopControllers())
	ws = getWS(t, a)
	ws.Spec.Suspend = true
	must(t, k8s.Update(ctxT(t), ws))
	ws = getWS(t, a)
	ws.Status = workspacesv1.WorkspaceDeploymentStatus{}
	must(t, k8s.Status().Update(ctxT(t), ws))
	must(t, startControllers())

	b := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	got := waitPhase(t, b, workspacesv1.PhaseWaiting, workspacesv1.ReasonWaitingForGpuCapacity)
	if err := contains(got.Status.Feasibility.Message, "1 reserved"); err != nil {
		t.Error(err)
	}
	must(t, k8s.Delete(ctxT(t), getWS(t, b)))

	// Gating again would record a new admission, admitted now (seconds after the carried one); taking
	// it back keeps the carried one as it is. (A pod outside the workspace taking the GPU would not
	// tell the two apart: an admitted node whose GPUs other pods hold is lost, gate.Lost.) Admission
	// times have seconds: the clock must be past the carried one's second for a new one to differ.
	eventually(t, "the clock past the carried admission's second", func() error {
		if d := time.Since(carried.AdmittedAt.Time); d < 2*time.Second {
			return fmt.Errorf("%s since the carried admission", d)
		}
		return nil
	})
	ws = getWS(t, a)
	ws.Spec.Suspend = false
	must(t, k8s.Update(ctxT(t), ws))
	eventually(t, "admission taken back from the ServiceSet", func() error {
		got := getWS(t, a)
		if got.Status.Phase != workspacesv1.PhaseDeploying {
			return fmt.Errorf("phase %s: %s", got.Status.Phase, got.Status.Message)
		}
		if !equality.Semantic.DeepEqual(got.Status.Admission, carried) {
			return fmt.Errorf("admission %+v, want the carried %+v", got.Status.Admission, carried)
		}
		return nil
	})
}

// TestGPUAdmissionWrittenOnce: a first GPU admission reaches the status in the same write as the
// ServiceSet's name, not in a write of its own before it; the ServiceSet carries it meanwhile.
func TestGPUAdmissionWrittenOnce(t *testing.T) {
	ns := newNamespace(t)
	model := name("a2")
	gpuNode(t, child.Client, gpu.ResourceNVIDIA, 1, modelLabels(model))
	class := createClass(t, classSpec(name("once")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	wc, err := client.NewWithWatch(mgmt.Config, client.Options{Scheme: mgmt.Scheme})
	must(t, err)
	var list workspacesv1.WorkspaceDeploymentList
	w, err := wc.Watch(ctxT(t), &list, client.InNamespace(ns))
	must(t, err)
	defer w.Stop()
	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) { ws.Spec.Resources = gpuResources(1, model) })
	deadline := time.After(waitTimeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended")
			}
			o, isWS := ev.Object.(*workspacesv1.WorkspaceDeployment)
			if !isWS || o.Name != key.Name || o.Status.Admission == nil {
				continue
			}
			if o.Status.ServiceSetName == "" {
				t.Fatalf("the admission was written before the ServiceSet, in a status of its own (phase %s)", o.Status.Phase)
			}
			return
		case <-deadline:
			t.Fatal("no admission written")
		}
	}
}
