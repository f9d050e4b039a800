package childns

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/gpu"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

func TestDesiredQuota(t *testing.T) {
	mig := []corev1.ResourceName{"nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared"}
	for _, tc := range []struct {
		name    string
		ad      *workspacesv1.Admission
		devices []corev1.ResourceName
		claims  bool
		want    string
	}{
		{"no admission: no GPUs", nil, nil, true, "requests.amd.com/gpu=0, requests.nvidia.com/gpu=0"},
		{"a CPU-only admission", &workspacesv1.Admission{}, nil, true, "requests.amd.com/gpu=0, requests.nvidia.com/gpu=0"},
		{"two NVIDIA GPUs", &workspacesv1.Admission{GPUResourceName: string(gpu.ResourceNVIDIA), GPUs: 2}, nil, true, "requests.amd.com/gpu=0, requests.nvidia.com/gpu=2"},
		{"one AMD GPU", &workspacesv1.Admission{GPUResourceName: string(gpu.ResourceAMD), GPUs: 1}, nil, true, "requests.amd.com/gpu=1, requests.nvidia.com/gpu=0"},
		{"MIG profiles and a shared resource the child advertises", &workspacesv1.Admission{GPUResourceName: string(gpu.ResourceNVIDIA), GPUs: 1}, mig, true,
			"requests.amd.com/gpu=0, requests.nvidia.com/gpu.shared=0, requests.nvidia.com/gpu=1, requests.nvidia.com/mig-1g.10gb=0"},
		{"an admitted MIG profile", &workspacesv1.Admission{GPUResourceName: "nvidia.com/mig-1g.10gb", GPUs: 2}, mig, true,
			"requests.amd.com/gpu=0, requests.nvidia.com/gpu.shared=0, requests.nvidia.com/gpu=0, requests.nvidia.com/mig-1g.10gb=2"},
		{"no ResourceClaims unless the class allows them", nil, nil, false,
			"count/resourceclaims.resource.k8s.io=0, requests.amd.com/gpu=0, requests.nvidia.com/gpu=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := DesiredQuota("ws-nb", tc.ad, tc.devices, tc.claims, nil)
			if q.Namespace != "ws-nb" || q.Name != owned.GPUQuotaName || q.Labels[owned.LabelManagedBy] != "workspace-controller" {
				t.Fatalf("quota %s/%s labels %v", q.Namespace, q.Name, q.Labels)
			}
			if got := QuotaString(q); got != tc.want {
				t.Fatalf("QuotaString = %q, want %q", got, tc.want)
			}
			if len(q.Spec.Scopes) > 0 || q.Spec.ScopeSelector != nil {
				t.Fatal("the quota is scoped: pods outside the scope would pass the cap")
			}
		})
	}
}

func TestDeviceResources(t *testing.T) {
	nodes := []corev1.Node{
		{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"cpu": resource.MustParse("8"), "nvidia.com/gpu": resource.MustParse("4"),
			"nvidia.com/mig-1g.10gb": resource.MustParse("7")}}},
		{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"amd.com/gpu": resource.MustParse("8"), "example.com/fpga": resource.MustParse("1"),
			"nvidia.com/gpu": resource.MustParse("2")}}},
	}
	got := DeviceResources(nodes)
	want := []corev1.ResourceName{"amd.com/gpu", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"}
	if len(got) != len(want) {
		t.Fatalf("DeviceResources = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("DeviceResources = %v, want %v", got, want)
		}
	}
}

func TestQuotaString(t *testing.T) {
	q := &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		"requests.z": resource.MustParse("3"), "requests.a": resource.MustParse("500m"),
	}}}
	if got, want := QuotaString(q), "requests.a=500m, requests.z=3"; got != want {
		t.Fatalf("QuotaString = %q, want %q", got, want)
	}
	if got := QuotaString(&corev1.ResourceQuota{}); got != "" {
		t.Fatalf("an empty quota: %q", got)
	}
}

func TestQuotaDrifted(t *testing.T) {
	want := DesiredQuota("ws-nb", &workspacesv1.Admission{GPUResourceName: string(gpu.ResourceNVIDIA), GPUs: 1}, nil, false, nil)
	same := want.DeepCopy()
	same.Spec.Hard[corev1.ResourceName("requests."+gpu.ResourceNVIDIA)] = resource.MustParse("1") // equal, not identical
	if quotaDrifted(same, want) {
		t.Error("an equal quota drifted")
	}
	more := DesiredQuota("ws-nb", &workspacesv1.Admission{GPUResourceName: string(gpu.ResourceNVIDIA), GPUs: 2}, nil, false, nil)
	scoped := want.DeepCopy()
	scoped.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
	selected := want.DeepCopy()
	selected.Spec.ScopeSelector = &corev1.ScopeSelector{}
	for name, got := range map[string]*corev1.ResourceQuota{"other limits": more, "scoped": scoped, "scope selector": selected} {
		if !quotaDrifted(got, want) {
			t.Errorf("%s: not drifted", name)
		}
	}
}

func refusal(name, note string, at time.Time) eventsv1.Event {
	return eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ws-nb", Name: name},
		EventTime:  metav1.NewMicroTime(at),
		Reason:     "FailedCreate", Type: corev1.EventTypeWarning, Note: note,
		Regarding: corev1.ObjectReference{Kind: "ReplicaSet", Name: name},
	}
}

func TestLatestQuotaRefusal(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	exceeded := `pods "x" is forbidden: exceeded quota: workspace-gpus, requested: requests.nvidia.com/gpu=2`
	events := []eventsv1.Event{
		refusal("old", exceeded, t0),
		refusal("other-quota", `pods "x" is forbidden: exceeded quota: team-cpu`, t0.Add(3*time.Minute)),
		refusal("unrelated", "workspace-gpus mentioned, nothing refused", t0.Add(3*time.Minute)),
		refusal("new", exceeded, t0.Add(time.Minute)),
	}
	if got := latestQuotaRefusal(events); got == nil || got.Name != "new" {
		t.Fatalf("latest = %v, want the event new", got)
	}
	// A series' last observation counts over its first time.
	series := refusal("series", exceeded, t0)
	series.Series = &eventsv1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(t0.Add(2 * time.Minute))}
	if got := latestQuotaRefusal(append(events, series)); got == nil || got.Name != "series" {
		t.Fatalf("latest = %v, want the series", got)
	}
	if got := latestQuotaRefusal(events[1:3]); got != nil {
		t.Fatalf("no GPU quota refusal, got %s", got.Name)
	}
}

func TestQuotaRefusal(t *testing.T) {
	exceeded := `pods "nb-0" is forbidden: exceeded quota: workspace-gpus, requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=1 `
	// On the child API server: the event as the ReplicaSet controller reports it.
	ns := owned.LocalReleaseNamespace(unique("nb"))
	onChild(t, namespaceLabelled(ns, nil))
	ev := refusal("nb", exceeded, time.Now())
	ev.Namespace, ev.Regarding.Namespace = ns, ns
	ev.ReportingController, ev.ReportingInstance, ev.Action = "replicaset-controller", "kube-controller-manager", "Create"
	onChild(t, &ev)
	n := Namespaces{Child: childAPI.Client, Cluster: cluster}
	got := n.PodRefusal(context.Background(), ns, time.Now(), time.Minute)
	want := "the child refused pods of the release: ReplicaSet nb: " + strings.TrimSpace(exceeded) +
		" (the GPUs are capped at what the gate admitted; ask for more through spec.resources, not chart values)"
	if got.Reason != workspacesv1.ReasonGpuQuotaExceeded || got.Message != want {
		t.Fatalf("PodRefusal = %s\n%q\nwant %s\n%q", got.Reason, got.Message, workspacesv1.ReasonGpuQuotaExceeded, want)
	}
	if got := n.PodRefusal(context.Background(), "ws-other", time.Now(), time.Minute); got.Found() {
		t.Fatalf("another namespace: %+v", got)
	}
}

// TestComputeCap: a class with a ComputeQuota caps CPU, memory and pods at the replicas plus its
// headroom; a class without one caps none, and a resource the workspace does not set is not capped.
func TestComputeCap(t *testing.T) {
	cpu, mem := resource.MustParse("1500m"), resource.MustParse("16Gi")
	res := &workspacesv1.ResolvedResources{Replicas: 2, PerReplica: workspacesv1.PerReplicaResources{CPU: &cpu, Memory: &mem}}
	class := &workspacesv1.WorkspaceClass{Spec: workspacesv1.WorkspaceClassSpec{ComputeQuota: &workspacesv1.ComputeQuota{HeadroomReplicas: 1}}}
	q := DesiredQuota("ws-nb", nil, nil, true, ComputeCap(class, res))
	if got, want := QuotaString(q), "pods=3, requests.amd.com/gpu=0, requests.cpu=4500m, requests.memory=48Gi, requests.nvidia.com/gpu=0"; got != want {
		t.Fatalf("QuotaString = %q, want %q", got, want)
	}
	if c := ComputeCap(&workspacesv1.WorkspaceClass{}, res); c != nil {
		t.Errorf("a class without ComputeQuota caps %v", c)
	}
	noCPU := &workspacesv1.ResolvedResources{Replicas: 1}
	if c := ComputeCap(class, noCPU); len(c) != 1 || c.Pods().Value() != 2 {
		t.Errorf("without cpu or memory only pods are capped: %v", c)
	}
}
