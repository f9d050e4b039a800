package workspace

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	k0rdentv1beta1 "github.com/exalsius/exalsius-operator/common/api/k0rdent/v1beta1"
	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// TestWorkspaceRunsThroughServiceSet walks the happy path: Pending, Deploying with a ServiceSet that
// follows the k0rdent checklist, Running once KCM reports Deployed; URLs, events and the feasibility
// report on the way.
func TestWorkspaceRunsThroughServiceSet(t *testing.T) {
	ns := newNamespace(t)
	model := name("a100")
	node := gpuNode(t, child.Client, gpu.ResourceNVIDIA, 4, modelLabels(model))
	spec := classSpec(name("jupyter"))
	spec.DeployTimeout = &metav1.Duration{Duration: 7 * time.Minute}
	spec.DefaultResources = workspacesv1.DefaultResources{PerReplica: &workspacesv1.PerReplicaResources{CPU: qty("2"), Memory: qty("8Gi"), Storage: qty("50Gi")}}
	spec.DefaultValues = jsonRaw(t, map[string]any{"image": map[string]any{"tag": "v1"}, "keep": true})
	class := createClass(t, spec, ns)
	cd := createCluster(t, ns, child.Kubeconfig)

	key := createWorkspace(t, ns, class, cd.Name, func(ws *workspacesv1.WorkspaceDeployment) {
		ws.Spec.Resources = gpuResources(2, model)
		ws.Spec.Values = jsonRaw(t, map[string]any{"image": map[string]any{"tag": "v2"}})
	})
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, workspacesv1.ReasonHelmReleaseDeploying)
	ss := waitServiceSet(t, ws)

	if ss.Name == cd.Name || !strings.HasPrefix(ss.Name, cd.Name+"-ws-") {
		t.Errorf("ServiceSet name %q: want %s-ws-..., never the ClusterDeployment's own name", ss.Name, cd.Name)
	}
	if ss.Namespace != cd.Namespace || ss.Spec.Cluster != cd.Name || ss.Spec.Provider.Name != "ksm-projectsveltos" {
		t.Errorf("ServiceSet %s/%s cluster %q provider %q", ss.Namespace, ss.Name, ss.Spec.Cluster, ss.Spec.Provider.Name)
	}
	wantLabels := map[string]string{
		"ksm.k0rdent.mirantis.com/adapter":   "kcm-controller-manager",
		workspacesv1.WorkspaceLabel:          ws.Name,
		workspacesv1.WorkspaceNamespaceLabel: ws.Namespace,
		workspacesv1.ClusterDeploymentLabel:  cd.Name,
	}
	for k, v := range wantLabels {
		if ss.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, ss.Labels[k], v)
		}
	}
	if len(ss.OwnerReferences) != 1 || ss.OwnerReferences[0].UID != cd.UID || ss.OwnerReferences[0].Kind != "ClusterDeployment" ||
		ss.OwnerReferences[0].APIVersion != "k0rdent.mirantis.com/v1beta1" || ss.OwnerReferences[0].Controller == nil || *ss.OwnerReferences[0].Controller {
		t.Errorf("owner references %+v: want one non-controller reference to the ClusterDeployment", ss.OwnerReferences)
	}
	svc := ss.Spec.Services[0]
	if svc.Name != ws.Name || svc.Namespace != "ws-"+ws.Name || svc.Template != spec.ServiceTemplate.Name {
		t.Errorf("service %+v", svc)
	}
	if svc.HelmOptions != nil {
		t.Errorf("helmOptions %s, want none (the class asks none, so k0rdent's atomic default applies)", svc.HelmOptions.Raw)
	}
	values := serviceSetValues(t, ss)
	if values["image"].(map[string]any)["tag"] != "v2" || values["keep"] != true {
		t.Errorf("values are not defaults deep-merged with the workspace's: %v", values)
	}
	ex := values["_exalsius"].(map[string]any)
	// The shape the published workspace charts read.
	wantEx := map[string]any{
		"resources": map[string]any{
			"replicas": float64(1),
			"perReplica": map[string]any{"cpu": "2", "memory": "8Gi", "storage": "50Gi", "gpuCount": float64(2),
				"gpuVendor": "NVIDIA", "gpuType": model, "gpuResourceName": "nvidia.com/gpu"},
		},
		// Admitted with GPUs: the GPU taint's toleration. No affinity: the test's node has no
		// hostname label, so the admission names none.
		"scheduling": map[string]any{"nodeSelector": map[string]any{gpu.LabelGPUModel: model},
			"tolerations": []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}}},
	}
	if !reflect.DeepEqual(ex, wantEx) {
		t.Errorf("_exalsius = %v\nwant %v", ex, wantEx)
	}
	if ws.Status.ServiceSetName != ss.Name || ws.Status.ReleaseName != ws.Name {
		t.Errorf("status names %q %q", ws.Status.ServiceSetName, ws.Status.ReleaseName)
	}
	rr := ws.Status.ResolvedResources
	if rr == nil || rr.Replicas != 1 || *rr.PerReplica.GPUCount != 2 || rr.GPUResourceName != "nvidia.com/gpu" || rr.PerReplica.CPU.String() != "2" {
		t.Errorf("resolvedResources %+v", rr)
	}
	f := ws.Status.Feasibility
	if f == nil || !f.Feasible || f.MatchingNodes != 1 || f.FreeGPUs != 4 || f.FittingReplicas != 1 || f.Selector[gpu.LabelGPUModel] != model {
		t.Errorf("feasibility %+v", f)
	}
	if err := contains(f.Message, "storage 50Gi"); err != nil {
		t.Error(err)
	}
	if c := condition(ws, workspacesv1.FeasibleCondition); c.Status != metav1.ConditionTrue {
		t.Errorf("Feasible %+v", c)
	}

	setServiceState(t, client.ObjectKeyFromObject(ss), k0rdentv1beta1.ServiceStateDeployed, "")
	releasePod(t, ws, node, 0, false)
	ws = waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
	if ws.Status.ObservedGeneration != ws.Generation {
		t.Errorf("observedGeneration %d, generation %d", ws.Status.ObservedGeneration, ws.Generation)
	}
	for _, ct := range []string{workspacesv1.ClassResolvedCondition, workspacesv1.ClusterDeploymentResolvedCondition,
		workspacesv1.FeasibleCondition, workspacesv1.PrerequisitesMetCondition, workspacesv1.ResourcesInjectedCondition,
		workspacesv1.HelmReleaseReadyCondition, workspacesv1.ReadyCondition} {
		if c := condition(ws, ct); c.Status != metav1.ConditionTrue || c.ObservedGeneration != ws.Generation {
			t.Errorf("condition %s = %+v, want True for generation %d", ct, c, ws.Generation)
		}
	}
	// This suite runs without a route provider (internal/routing tests the routes): one entry per
	// endpoint, not ready, saying why.
	wantAccess := []workspacesv1.AccessStatus{{Name: "web", Protocol: "HTTP"}, {Name: "api", Protocol: "HTTP"}, {Name: "ssh", Protocol: "SSH"}}
	if len(ws.Status.Access) != 3 {
		t.Fatalf("access %+v", ws.Status.Access)
	}
	for i, a := range ws.Status.Access {
		if a.Name != wantAccess[i].Name || a.URL != wantAccess[i].URL || a.Ready || a.Message == "" {
			t.Errorf("access[%d] = %+v, want %+v with ready=false and a message", i, a, wantAccess[i])
		}
	}
	if c := condition(ws, workspacesv1.RoutesReadyCondition); c.Reason != workspacesv1.ReasonRoutingNotConfigured {
		t.Errorf("RoutesReady %+v", c)
	}
	eventually(t, "a Running event", func() error {
		var list eventsv1.EventList
		if err := k8s.List(ctxT(t), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == ws.Name && e.Reason == workspacesv1.ReasonRunning {
				return nil
			}
		}
		return fmt.Errorf("no Running event among %d", len(list.Items))
	})
}

// TestRunningWorkspaceFollowsServiceSet covers what happens after Running: a later Failed state, a
// recovery, a deleted ServiceSet recreated and a spec edit rolled out.
func TestRunningWorkspaceFollowsServiceSet(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("nb")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	ss := waitServiceSet(t, ws)
	ssKey := client.ObjectKeyFromObject(ss)
	setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)

	t.Run("later failure", func(t *testing.T) {
		setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateFailed, "helm upgrade: timed out waiting for the condition")
		ws := waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonHelmReleaseFailed)
		fc := ws.Status.FailureContext
		if fc == nil || fc.PhaseWhenFailed != workspacesv1.PhaseRunning || fc.Reason != workspacesv1.ReasonHelmReleaseFailed || fc.ServiceSetStatus == nil {
			t.Fatalf("failureContext %+v", fc)
		}
		if err := contains(string(fc.ServiceSetStatus.Raw), "timed out waiting"); err != nil {
			t.Error(err)
		}
		if len(fc.RecentEvents) == 0 || fmt.Sprint(fc.RecentEvents) == "" {
			t.Errorf("failureContext has no recent events")
		} else if err := contains(strings.Join(fc.RecentEvents, "\n"), "WorkspaceDeployment/"+ws.Name); err != nil {
			t.Error(err)
		}
		if err := contains(condition(ws, workspacesv1.HelmReleaseReadyCondition).Message, "timed out waiting"); err != nil {
			t.Error(err)
		}
		setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateDeployed, "")
		ws = waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
		if ws.Status.FailureContext != nil {
			t.Errorf("failureContext kept after recovery: %+v", ws.Status.FailureContext)
		}
	})

	t.Run("deleted ServiceSet recreated", func(t *testing.T) {
		old := &k0rdentv1beta1.ServiceSet{}
		must(t, k8s.Get(ctxT(t), ssKey, old))
		must(t, k8s.Delete(ctxT(t), old))
		eventually(t, "ServiceSet recreated", func() error {
			got := &k0rdentv1beta1.ServiceSet{}
			if err := k8s.Get(ctxT(t), ssKey, got); err != nil {
				return err
			}
			if got.UID == old.UID {
				return fmt.Errorf("still the old ServiceSet")
			}
			return nil
		})
		waitPhase(t, key, workspacesv1.PhaseDeploying, workspacesv1.ReasonHelmReleaseDeploying)
		setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateDeployed, "")
		waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
	})

	t.Run("spec edit rolled out", func(t *testing.T) {
		ws := getWS(t, key)
		before := &k0rdentv1beta1.ServiceSet{}
		must(t, k8s.Get(ctxT(t), ssKey, before))
		time.Sleep(time.Second) // the rollout stamp has one-second precision
		patch := client.MergeFrom(ws.DeepCopy())
		ws.Spec.Values = jsonRaw(t, map[string]any{"greeting": "hello"})
		replicas := int32(2)
		ws.Spec.Resources = &workspacesv1.ResourceOverrides{Replicas: &replicas}
		must(t, k8s.Patch(ctxT(t), ws, patch))
		gen := getWS(t, key).Generation

		eventually(t, "values rolled out", func() error {
			got := &k0rdentv1beta1.ServiceSet{}
			if err := k8s.Get(ctxT(t), ssKey, got); err != nil {
				return err
			}
			if got.Annotations[owned.AnnotationRolloutStarted] == before.Annotations[owned.AnnotationRolloutStarted] {
				return fmt.Errorf("rollout stamp unchanged")
			}
			return contains(got.Spec.Services[0].Values, "greeting: hello")
		})
		ws = waitPhase(t, key, workspacesv1.PhaseDeploying, workspacesv1.ReasonHelmReleaseDeploying)
		if ws.Status.ObservedGeneration != gen || ws.Status.ResolvedResources.Replicas != 2 {
			t.Errorf("observedGeneration %d (generation %d), replicas %d", ws.Status.ObservedGeneration, gen, ws.Status.ResolvedResources.Replicas)
		}
		setServiceState(t, ssKey, k0rdentv1beta1.ServiceStateDeployed, "")
		waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
	})
}

// TestDeployTimeout fails a workspace whose release is not deployed within the class's deployTimeout.
func TestDeployTimeout(t *testing.T) {
	ns := newNamespace(t)
	spec := classSpec(name("slow"))
	spec.DeployTimeout = &metav1.Duration{Duration: 2 * time.Second}
	class := createClass(t, spec, ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhaseFailed, workspacesv1.ReasonHelmReleaseFailed)
	if c := condition(ws, workspacesv1.HelmReleaseReadyCondition); c.Reason != workspacesv1.ReasonDeployTimeout {
		t.Errorf("HelmReleaseReady %+v, want reason DeployTimeout", c)
	}
	if fc := ws.Status.FailureContext; fc == nil || fc.PhaseWhenFailed != workspacesv1.PhaseDeploying || fc.ServiceSetStatus == nil {
		t.Errorf("failureContext %+v", fc)
	}
}

// TestRestartPartWayMakesNoDuplicates stops the controllers after the ServiceSets were made and starts
// new ones: the workspace finishes with exactly one ServiceSet and one prerequisite ServiceSet.
func TestRestartPartWayMakesNoDuplicates(t *testing.T) {
	ns := newNamespace(t)
	spec := classSpec(name("restart"))
	prereq := name("operator")
	spec.Prerequisites = []workspacesv1.Prerequisite{{ServiceTemplate: workspacesv1.ServiceTemplateRef{Name: prereq}, Namespace: "gpu-operator"}}
	class := createClass(t, spec, ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	waitPhase(t, key, workspacesv1.PhaseInstallingPrerequisites, workspacesv1.ReasonPrerequisitesDeploying)
	prereqKey := types.NamespacedName{Namespace: ns, Name: owned.PrerequisiteServiceSetName(cd.Name, prereq)}
	setServiceState(t, prereqKey, k0rdentv1beta1.ServiceStateDeployed, "")
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	waitServiceSet(t, ws)

	restartControllers(t)

	// Nudge the new controllers with a spec change that keeps the resources.
	ws = getWS(t, key)
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Spec.Values = jsonRaw(t, map[string]any{"after": "restart"})
	must(t, k8s.Patch(ctxT(t), ws, patch))
	eventually(t, "new values after the restart", func() error {
		ss := &k0rdentv1beta1.ServiceSet{}
		if err := k8s.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: owned.ServiceSetName(ws)}, ss); err != nil {
			return err
		}
		return contains(ss.Spec.Services[0].Values, "after: restart")
	})
	setServiceState(t, types.NamespacedName{Namespace: ns, Name: owned.ServiceSetName(ws)}, k0rdentv1beta1.ServiceStateDeployed, "")
	waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)

	var all k0rdentv1beta1.ServiceSetList
	must(t, k8s.List(ctxT(t), &all, client.InNamespace(ns)))
	if len(all.Items) != 2 {
		names := []string{}
		for _, s := range all.Items {
			names = append(names, s.Name)
		}
		t.Fatalf("ServiceSets %v, want exactly the workspace's and the prerequisite's", names)
	}
	if n := len(workspaceServiceSets(t, ws)); n != 1 {
		t.Fatalf("%d ServiceSets labelled for the workspace, want 1", n)
	}
}

// TestServiceSetDriftCorrected puts back what someone changed on a workspace's ServiceSet.
func TestServiceSetDriftCorrected(t *testing.T) {
	ns := newNamespace(t)
	class := createClass(t, classSpec(name("drift")), ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	ss := waitServiceSet(t, ws)
	original := ss.Spec.Services[0].Values
	patch := client.MergeFrom(ss.DeepCopy())
	ss.Spec.Services[0].Values = "tampered: true\n"
	delete(ss.Labels, "ksm.k0rdent.mirantis.com/adapter")
	must(t, k8s.Patch(ctxT(t), ss, patch))
	eventually(t, "drift corrected", func() error {
		got := &k0rdentv1beta1.ServiceSet{}
		if err := k8s.Get(ctxT(t), client.ObjectKeyFromObject(ss), got); err != nil {
			return err
		}
		// The values written back are the workspace's own, never the digest the cache keeps.
		if got.Spec.Services[0].Values != original || got.Labels["ksm.k0rdent.mirantis.com/adapter"] == "" {
			return fmt.Errorf("still drifted: %q %v", got.Spec.Services[0].Values, got.Labels)
		}
		return nil
	})
}

// TestNoGPUsAndNoEndpoints: a workspace without GPUs passes the gate with NoGPURequested, and a class
// without endpoints has no URLs and RoutesReady=True/NoEndpoints.
func TestNoGPUsAndNoEndpoints(t *testing.T) {
	ns := newNamespace(t)
	spec := classSpec(name("plain"))
	spec.AccessEndpoints = nil
	class := createClass(t, spec, ns)
	cd := createCluster(t, ns, child.Kubeconfig)
	key := createWorkspace(t, ns, class, cd.Name)
	ws := waitPhase(t, key, workspacesv1.PhaseDeploying, "")
	setServiceState(t, client.ObjectKeyFromObject(waitServiceSet(t, ws)), k0rdentv1beta1.ServiceStateDeployed, "")
	ws = waitPhase(t, key, workspacesv1.PhaseRunning, workspacesv1.ReasonRunning)
	if c := condition(ws, workspacesv1.FeasibleCondition); c.Status != metav1.ConditionTrue || c.Reason != workspacesv1.ReasonNoGPURequested {
		t.Errorf("Feasible %+v", c)
	}
	if c := condition(ws, workspacesv1.RoutesReadyCondition); c.Status != metav1.ConditionTrue || c.Reason != workspacesv1.ReasonNoEndpoints {
		t.Errorf("RoutesReady %+v", c)
	}
	if len(ws.Status.Access) != 0 || ws.Status.ResolvedResources.GPUResourceName != "" || ws.Status.Feasibility.Selector != nil {
		t.Errorf("access %+v, resolved %+v, feasibility %+v", ws.Status.Access, ws.Status.ResolvedResources, ws.Status.Feasibility)
	}
}
